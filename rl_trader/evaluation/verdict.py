"""The plain verdict on a run's headline: is it evidence of skill? (No JAX: the command line's
`runs` table reads it.)"""

from __future__ import annotations

import math
from numbers import Real

from rl_trader.evaluation.record import Headline, Spa

SKILL_PROB = 0.95  # DSR (PSR where nothing was selected) at or above: more than selection luck
SKILL_P = 0.05  # SPA p for "the agent beats every baseline" below: it beats them


def skill_verdict(head: Headline) -> tuple[bool | None, str]:
    """Whether a headline (`evaluation.headline.headline`, or a backtest's) is evidence of
    skill, and why in plain words: (True, why) when the DSR (the PSR where nothing was
    selected: a backtest) reaches `SKILL_PROB` and the SPA p for "the agent beats every
    baseline" is below `SKILL_P`; where no SPA was computed (an older run, too few bars) the
    DSR decides alone and the reason says so. (None, why) without a DSR or PSR. A value that
    is not a finite number counts as absent."""
    dsr, psr = finite_or_none(head.dsr), finite_or_none(head.psr)
    prob, name = (dsr, "DSR") if dsr is not None else (psr, "PSR")
    if prob is None:
        return None, "no DSR or PSR in this summary"
    p = finite_or_none(head.spa.p_agent_beats_all) if isinstance(head.spa, Spa) else None
    lucky = prob < SKILL_PROB
    why = [f"{name} {_shown(prob, SKILL_PROB)} {'<' if lucky else '≥'} {SKILL_PROB}"
           + ("" if not lucky else
              ": the Sharpe is not clearly more than the luck of the trials" if name == "DSR"
              else ": the Sharpe is not clearly above 0")]
    if p is None:
        why.append("no SPA test in this summary")
    else:
        why.append(f"SPA p {_shown(p, SKILL_P)} {'<' if p < SKILL_P else '≥'} {SKILL_P}"
                   + ("" if p < SKILL_P else ": it is not shown to beat every baseline"))
    return not lucky and (p is None or p < SKILL_P), "; ".join(why)


def finite_or_none(x: object) -> float | None:
    """`x` as a float when it is a finite real number (not a bool), else None (JSON null)."""
    ok = isinstance(x, Real) and not isinstance(x, bool) and math.isfinite(float(x))
    return float(x) if ok else None


def _shown(x: float, threshold: float) -> str:
    """`x` to 3 decimals, or to 6 where 3 would round it across `threshold`."""
    text = f"{x:.3f}"
    return text if (float(text) < threshold) == (x < threshold) else f"{x:.6f}"
