"""rl_trader.evaluation.verdict: the plain verdict on skill."""

from rl_trader.evaluation.verdict import skill_verdict


def test_the_verdict_on_skill_needs_the_dsr_and_the_spa():
    """Skill is a DSR of 0.95 or more (the PSR where nothing was selected) and, where the SPA
    was computed, its p for 'the agent beats every baseline' below 0.05; the sentence says
    which figure failed."""
    beats = {"spa": {"p_agent_beats_all": 0.01}}
    assert skill_verdict({"dsr": 0.97, **beats}) == (True, "yes (DSR 0.970 ≥ 0.95; SPA p "
                                                           "0.010 < 0.05)")
    skill, why = skill_verdict({"dsr": 0.002, "spa": {"p_agent_beats_all": 1.0}})
    assert not skill and why.startswith("no (DSR 0.002 < 0.95: the Sharpe is not clearly")
    assert "SPA p 1.000 ≥ 0.05: it does not beat every baseline" in why
    assert skill_verdict({"dsr": 0.97, "spa": {"p_agent_beats_all": 0.2}})[0] is False
    assert skill_verdict({"dsr": None, "psr": 0.99, **beats})[1].startswith("yes (PSR 0.990")
    assert skill_verdict({"dsr": 0.99, "spa": None}) == (True, "yes (DSR 0.990 ≥ 0.95)")
    assert skill_verdict({})[0] is None
    assert skill_verdict({"dsr": "x", "psr": True})[0] is None  # not numbers: absent
