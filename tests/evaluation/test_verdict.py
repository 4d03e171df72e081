"""rl_trader.evaluation.verdict: the plain verdict on skill."""

import numpy as np

from rl_trader.evaluation.record import Headline, Spa
from rl_trader.evaluation.verdict import skill_verdict


def head(spa_p: float | None = None, **figures) -> Headline:
    """A headline with `figures`, and an SPA whose p for "the agent beats all" is `spa_p`."""
    spa = None if spa_p is None else Spa(agent_beats={}, p_agent_beats_all=spa_p,
                                         p_some_baseline_beats_agent=0.5, block_bars=1, reps=1)
    return Headline(stitched_test_sharpe=0.0, spa=spa, **figures)


def test_the_verdict_on_skill_needs_the_dsr_and_the_spa():
    """Skill is a DSR of 0.95 or more (the PSR where nothing was selected) and the SPA p for
    'the agent beats every baseline' below 0.05; the reason names what failed or is missing."""
    assert skill_verdict(head(0.01, dsr=0.97)) == (True, "DSR 0.970 ≥ 0.95; SPA p 0.010 < 0.05")
    skill, why = skill_verdict(head(1.0, dsr=0.002))
    assert not skill and why.startswith("DSR 0.002 < 0.95: the Sharpe is not clearly")
    assert "SPA p 1.000 ≥ 0.05: it is not shown to beat every baseline" in why
    assert skill_verdict(head(0.2, dsr=0.97))[0] is False
    assert skill_verdict(head(0.01, dsr=None, psr=0.99)) == (
        True, "PSR 0.990 ≥ 0.95; SPA p 0.010 < 0.05")  # a backtest: nothing selected
    assert skill_verdict(head(dsr=0.99)) == (
        True, "DSR 0.990 ≥ 0.95; no SPA test in this summary")  # too few bars, or older
    assert skill_verdict(head(0.01, dsr=0.9496))[1].startswith("DSR 0.949600 < 0.95")


def test_values_that_are_not_finite_numbers_count_as_absent():
    assert skill_verdict(head())[0] is None
    assert skill_verdict(head(dsr="x", psr=True))[0] is None
    assert skill_verdict(head(dsr=float("nan"), psr=np.float32(0.2))) == (
        False, "PSR 0.200 < 0.95: the Sharpe is not clearly above 0; no SPA test in this "
               "summary")
