"""The selection rule — one definition, used by every run, the in-program trainer and the tests.

Candidates (epochs, or the ensembles of one fold) are taken in order against an incumbent that
starts at −∞; a candidate replaces it only when its validation Sharpe is strictly greater, so
NaN never wins. The choice is the first maximum (earliest epoch, lowest ensemble index); when
every score is NaN the first candidate stands. `improves` is the rule itself and works on
Python floats, numpy and traced JAX values alike (the in-program trainer uses it in a scan).

The forecasts' early stopping (`regression_stop`) counts a rise of the validation IC by the
same `improves`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


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


def _where(cond: Any, a: Any, b: Any) -> Any:
    xp = jnp if any(isinstance(v, jax.Array) for v in (cond, a, b)) else np
    return xp.where(cond, a, b)


def regression_stop(ic: Any, best_ic: Any, since_best: Any, stopped: Any,
                    patience: int) -> tuple[Any, Any, Any]:
    """One epoch of the forecasts' early stopping (`TrainConfig.forecast_patience` ≥ 1): the
    validation IC `ic` against the best so far (`improves`, so NaN never counts as a rise) →
    (best IC, epochs since it, stopped). Stopped once `patience` epochs pass without a rise,
    and for good. Python floats, numpy and traced JAX values alike."""
    better = improves(ic, best_ic)
    since = _where(better, 0, since_best + 1)
    return _where(better, ic, best_ic), since, stopped | (since >= patience)


def regression_stopped(ic_history: Sequence[float], patience: int) -> bool:
    """Whether the forecasts' regression is stopped after the epochs of `ic_history`
    (`regression_stop` over them; never with patience 0)."""
    best, since, stopped = float("-inf"), 0, False
    for ic in ic_history if patience else ():
        best, since, stopped = regression_stop(ic, best, since, stopped, patience)
    return bool(stopped)
