"""The selection rule — one definition, used by every run, the in-program trainer and the tests.

Candidates (epochs, or the ensembles of one fold) are taken in order against an incumbent that
starts at −∞; a candidate replaces it only when its validation Sharpe is strictly greater, so
NaN never wins. The choice is the first maximum (earliest epoch, lowest ensemble index); when
every score is NaN the first candidate stands. `improves` is the rule itself and works on
Python floats, numpy and traced JAX values alike (the in-program trainer uses it in a scan).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def improves(candidate: Any, incumbent: Any) -> Any:
    """True where `candidate` beats `incumbent`: candidate > incumbent (NaN compares False)."""
    return candidate > incumbent


def best_of(indices: Sequence[int], score: Sequence[float]) -> int:
    """The index in `indices` chosen by the rule on `score[i]`."""
    best, incumbent = indices[0], float("-inf")
    for i in indices:
        if improves(score[i], incumbent):
            best, incumbent = i, score[i]
    return best

