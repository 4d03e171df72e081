"""Tear-sheet statistics of a return series: rolling Sharpe and volatility, calendar returns,
drawdown episodes, beta. Pure numpy on the host.

Inputs are 1-D per-bar SIMPLE returns r_t (net of costs, as in rl_trader.evaluation.metrics);
`dates` are the bars' datetime64 stamps in increasing order; `ppy` is the number of periods
per year.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from rl_trader.evaluation.metrics import sharpe


def _r(returns) -> np.ndarray:
    return np.asarray(returns, np.float64).reshape(-1)


def rolling_sharpe(returns, window: int, ppy: float) -> np.ndarray:
    """Annualised Sharpe (`metrics.sharpe`) of each trailing `window`-bar window; [n], the first
    window − 1 entries NaN (all NaN when n < window)."""
    r = _r(returns)
    out = np.full(r.size, np.nan)
    if r.size >= window:
        out[window - 1:] = sharpe(sliding_window_view(r, window), ppy)
    return out


def rolling_volatility(returns, window: int, ppy: float) -> np.ndarray:
    """Annualised volatility std(r, ddof=1)·√ppy (as `metrics.annual_volatility`) of each
    trailing `window`-bar window; [n], the first window − 1 entries NaN."""
    r = _r(returns)
    out = np.full(r.size, np.nan)
    if r.size >= window >= 2:
        out[window - 1:] = sliding_window_view(r, window).std(-1, ddof=1) * np.sqrt(ppy)
    return out


def period_returns(returns, dates, unit: str) -> tuple[np.ndarray, np.ndarray]:
    """Compounded return of each calendar period that has bars: Π_{t in period}(1 + r_t) − 1.

    `unit` is a numpy datetime unit ("M" months, "Y" years). Returns (periods as
    datetime64[unit], returns) for the periods present, in order.
    """
    r, d = _r(returns), np.asarray(dates).astype(f"datetime64[{unit}]")
    if d.shape != r.shape:
        raise ValueError(f"dates {d.shape} and returns {r.shape} differ in length")
    if r.size == 0:
        return d, r
    if np.any(d[1:] < d[:-1]):
        raise ValueError("dates are not in increasing order")
    periods, first = np.unique(d, return_index=True)
    return periods, np.multiply.reduceat(1.0 + r, first) - 1.0


def monthly_table(returns, dates) -> tuple[np.ndarray, np.ndarray]:
    """Year × month table of compounded monthly returns: (years [Y] int, table [Y, 12]) with NaN
    for months without bars."""
    months, rets = period_returns(returns, dates, "M")
    m = months.astype(np.int64)  # months since 1970-01
    years = np.arange(m.min() // 12, m.max() // 12 + 1) if m.size else np.zeros(0, np.int64)
    table = np.full((years.size, 12), np.nan)
    if m.size:
        table[m // 12 - years[0], m % 12] = rets
    return years + 1970, table


@dataclass(frozen=True)
class Drawdown:
    """One drawdown episode. Indices are bars of the return series; `peak` is the last bar at
    the running high before the fall (−1: the starting equity), `recovery` the first bar back at
    that high (None: not recovered by the last bar). `depth` = min E_t / peak − 1 (< 0);
    `bars` = recovery − peak, or (n − 1) − peak when not recovered."""

    peak: int
    trough: int
    recovery: int | None
    depth: float
    bars: int


def drawdown_episodes(returns, top: int = 5) -> list[Drawdown]:
    """The `top` deepest drawdown episodes, deepest first.

    E_0 = 1, E_t = Π_{s≤t}(1 + r_s); the drawdown D_t = E_t / max_{s≤t} E_s − 1 (the start
    counts as a peak, as in `metrics.max_drawdown`); an episode is a maximal run of bars with
    D_t < 0.
    """
    r = _r(returns)
    eq = np.cumprod(1.0 + r)
    dd = eq / np.maximum.accumulate(np.maximum(eq, 1.0)) - 1.0
    under = np.concatenate([[False], dd < 0, [False]])
    starts = np.flatnonzero(under[1:] & ~under[:-1])
    ends = np.flatnonzero(under[:-1] & ~under[1:])  # exclusive
    out = []
    for a, b in zip(starts, ends, strict=True):
        trough = a + int(np.argmin(dd[a:b]))
        recovered = b < r.size
        out.append(Drawdown(peak=int(a) - 1, trough=trough,
                            recovery=int(b) if recovered else None, depth=float(dd[trough]),
                            bars=int((b if recovered else r.size - 1) - (a - 1))))
    return sorted(out, key=lambda e: e.depth)[:top]


def beta_correlation(returns, benchmark) -> tuple[float, float]:
    """(β, ρ) of `returns` on `benchmark`: β = cov(r, b) / var(b), ρ = cov(r, b) / (σ_r σ_b)
    (ddof 1). NaN where a variance is 0 or there are < 2 bars."""
    r, b = _r(returns), _r(benchmark)
    if r.shape != b.shape:
        raise ValueError(f"returns {r.shape} and benchmark {b.shape} differ in length")
    if r.size < 2:
        return float("nan"), float("nan")
    c = np.cov(r, b, ddof=1)
    beta = c[0, 1] / c[1, 1] if c[1, 1] > 0 else float("nan")
    rho = c[0, 1] / np.sqrt(c[0, 0] * c[1, 1]) if c[0, 0] > 0 and c[1, 1] > 0 else float("nan")
    return float(beta), float(rho)


def band(paths, lo: float = 5.0, hi: float = 95.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pointwise (median, lo-th, hi-th percentile) over the first axis of `paths` [R, n]."""
    p = np.asarray(paths, np.float64)
    return tuple(np.percentile(p, [50.0, lo, hi], axis=0))
