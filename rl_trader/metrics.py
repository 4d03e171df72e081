"""Performance metrics — the single definition of each.

Every function takes per-period simple returns (net of costs) and works on numpy arrays (float64,
on the host) and on jax arrays (inside `jit`) alike.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np


def _xp(x):
    return jnp if isinstance(x, jax.Array) else np


def sharpe(returns, periods_per_year: float):
    """Annualised Sharpe ratio: mean(r) / std(r, ddof=1) · √periods_per_year (0 risk-free).

    Returns 0 when the standard deviation is 0 (e.g. a flat policy) or there are < 2 returns.
    """
    xp = _xp(returns)
    n = returns.shape[-1]
    if n < 2:
        return xp.zeros(returns.shape[:-1])
    mean = returns.mean(-1)
    std = xp.sqrt(((returns - mean[..., None]) ** 2).sum(-1) / (n - 1))
    safe = xp.where(std > 0, std, 1.0)
    return xp.where(std > 0, mean / safe * math.sqrt(periods_per_year), 0.0)


def geometric_mean_positive(values) -> float | None:
    """Geometric mean of per-fold Sharpes, or None unless every value is > 0."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0 or np.any(~(v > 0)):
        return None
    return float(np.exp(np.mean(np.log(v))))
