"""rl_trader.evaluation.headline: the SPA of the agent against the baselines, both ways."""

import numpy as np

from rl_trader.evaluation.headline import SPA_REPS, superior_ability
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
    assert spa["p_no_baseline_beats_agent"] < 0.01
    assert (spa["reps"], spa["block_bars"]) == (SPA_REPS, int(np.sqrt(2000)))
    assert spa["agent_beats"]["weak"] == spa_test(baselines["weak"], agent, SPA_REPS,
                                                  seed=7).consistent
    assert superior_ability(agent, baselines, seed=7) == spa  # deterministic


def test_an_agent_equal_to_a_baseline_shows_no_skill_against_it():
    rng = np.random.default_rng(1)
    flat = np.zeros(500)
    spa = superior_ability(flat, {"flat": flat, "noise": rng.normal(0, 0.01, 500)}, seed=0)
    assert spa["agent_beats"]["flat"] == 1.0 == spa["p_agent_beats_all"]
