"""The plain verdict on a run's headline: is it evidence of skill? (No JAX: the command line's
`runs` table reads it.)"""

from __future__ import annotations

SKILL_PROB = 0.95  # DSR (PSR where nothing was selected) at or above: more than selection luck
SKILL_P = 0.05  # SPA p for "the agent beats every baseline" below: it beats them


def skill_verdict(head: dict) -> tuple[bool | None, str]:
    """Whether a headline (`evaluation.headline.headline`, or a backtest's) is evidence of
    skill, and why, in one plain sentence: yes when the DSR (the PSR where nothing was
    selected, a backtest) reaches `SKILL_PROB` and, where the SPA was computed, its p for "the
    agent beats every baseline" is below `SKILL_P`. None (and why) without those figures (an
    older run; a value that is not a number counts as absent)."""
    dsr, psr = _number(head.get("dsr")), _number(head.get("psr"))
    prob, name = (dsr, "DSR") if dsr is not None else (psr, "PSR")
    if prob is None:
        return None, "no DSR or PSR in this summary"
    spa = head.get("spa")
    p = _number(spa.get("p_agent_beats_all")) if isinstance(spa, dict) else None
    why = [f"{name} {prob:.3f} {'≥' if prob >= SKILL_PROB else '<'} {SKILL_PROB}"
           + ("" if prob >= SKILL_PROB else
              (": the Sharpe is not clearly more than the luck of the trials" if name == "DSR"
               else ": the Sharpe is not clearly above 0"))]
    if p is not None:
        why.append(f"SPA p {p:.3f} {'<' if p < SKILL_P else '≥'} {SKILL_P}"
                   + ("" if p < SKILL_P else ": it does not beat every baseline"))
    skill = prob >= SKILL_PROB and (p is None or p < SKILL_P)
    return skill, ("yes" if skill else "no") + " (" + "; ".join(why) + ")"


def _number(x: object) -> float | None:
    """`x` as a float when it is a real number (not a bool), else None."""
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None
