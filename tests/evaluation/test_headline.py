"""rl_trader.evaluation.headline: the SPA of the agent against the baselines, both ways."""

import numpy as np

from rl_trader.evaluation.headline import SPA_REPS, headline, superior_ability
from rl_trader.evaluation.stats import spa_test


def test_superior_ability_reads_both_directions():
    """An agent that clearly beats a weak baseline and clearly trails a strong one: a small p
    against the weak one, a large one for 'beats every baseline', and a small p for 'some
    baseline beats the agent'."""
    rng = np.random.default_rng(0)
    noise = rng.normal(0.0, 0.01, (3, 2000))
    agent = 0.002 + noise[0]
    baselines = {"weak": -0.002 + noise[1], "strong": 0.006 + noise[2]}
    spa = superior_ability(agent, baselines, seed=7)
    assert list(spa["agent_beats"]) == ["weak", "strong"]
    assert spa["agent_beats"]["weak"] < 0.01 and spa["agent_beats"]["strong"] > 0.99
    assert spa["p_agent_beats_all"] == spa["agent_beats"]["strong"]
    assert spa["p_some_baseline_beats_agent"] < 0.01
    assert (spa["reps"], spa["block_bars"]) == (SPA_REPS, int(np.sqrt(2000)))
    unit = [r / np.std(r, ddof=1) for r in (baselines["weak"], agent)]
    assert spa["agent_beats"]["weak"] == spa_test(*unit, SPA_REPS, seed=7).consistent
    assert superior_ability(agent, baselines, seed=7) == spa  # deterministic


def test_it_compares_sharpe_ratios_not_mean_returns():
    """A baseline that is the agent at twice the size has twice its mean return and the same
    Sharpe: no evidence either way. A flat agent (no returns) shows none against flat."""
    rng = np.random.default_rng(1)
    agent = 0.001 + rng.normal(0, 0.01, 500)
    spa = superior_ability(agent, {"levered": 2 * agent, "flat": np.zeros(500)}, seed=0)
    assert spa["agent_beats"]["levered"] == 1.0 == spa["p_agent_beats_all"]
    assert spa["p_some_baseline_beats_agent"] == 1.0
    flat = superior_ability(np.zeros(500), {"flat": np.zeros(500)}, seed=0)
    assert flat["agent_beats"]["flat"] == 1.0


def test_too_few_bars_or_no_baseline_give_no_test():
    rng = np.random.default_rng(2)
    assert superior_ability(rng.normal(size=7), {"flat": np.zeros(7)}, seed=0) is None
    assert superior_ability(rng.normal(size=50), {}, seed=0) is None


def test_a_fold_without_trials_leaves_the_pbo_to_the_others():
    """A fold stopped in its first epoch has no validation matrix: the headline's PBO is the
    other folds' (here the one fold with trials), not an error."""
    rng = np.random.default_rng(1)
    stitched = rng.normal(0.0005, 0.01, 400)
    trials = [{"val_sharpe": s} for s in (0.3, 0.1, -0.2, 0.5)]
    fold = [rng.normal(0.0, 0.01, (2, 200)), rng.normal(0.0, 0.01, (2, 200))]
    alone = headline(stitched, trials, [fold], 252.0, {"flat": np.zeros(400)}, seed=3)
    both = headline(stitched, trials, [[], fold], 252.0, {"flat": np.zeros(400)}, seed=3)
    assert both == alone and both.pbo is not None
