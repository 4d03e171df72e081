"""Performance metrics — the single definition of each.

Inputs are 1-D per-period SIMPLE returns net of costs (r_t = equity_t / equity_{t-1} − 1), the
position held over each bar (signed fraction of equity: −1 short, 0 flat, +1 long) and the traded
notional per bar as a fraction of equity. `ppy` is the number of periods per year (252 for daily).

`sharpe` works on numpy arrays (float64, on the host) and on jax arrays (inside `jit`) alike; the
other metrics are host-side numpy float64 and return plain Python floats. They match
empyrical-reloaded (`sharpe_ratio`, `sortino_ratio`, `max_drawdown`, `annual_return`,
`annual_volatility`, `calmar_ratio`) wherever empyrical's answer is finite; where empyrical gives
NaN or ±inf (too few returns, zero dispersion, no drawdown) these return 0.0, so that every value in
`performance` is a finite, json-able float.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

PERFORMANCE_KEYS = ("sharpe", "sortino", "max_drawdown", "calmar", "cagr", "volatility",
                    "turnover", "hit_rate", "exposure", "n_trades")


def _xp(x):
    return jnp if isinstance(x, jax.Array) else np


def _host(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).reshape(-1)


def sharpe(returns, periods_per_year: float, valid=None):
    """Annualised Sharpe ratio: mean(r) / std(r, ddof=1) · √periods_per_year (0 risk-free).

    Reduces over the last axis. Returns 0 when the standard deviation is 0 (e.g. a flat policy,
    or any constant series: max == min) or there are < 2 returns. `valid` (an int, or a traced
    scalar inside `jit`): only the first `valid` returns count, the rest being the padding of a
    shape bucket (`buckets`).
    """
    xp = _xp(returns)
    n = returns.shape[-1]
    if valid is None:
        if n < 2:
            return xp.zeros(returns.shape[:-1])
        mask, count = xp.ones(n, bool), n
    else:
        mask, count = xp.arange(n) < valid, xp.maximum(valid, 2)
    r = xp.where(mask, returns, 0.0)
    mean = r.sum(-1) / count
    std = xp.sqrt((xp.where(mask, returns - mean[..., None], 0.0) ** 2).sum(-1) / (count - 1))
    spread = (xp.where(mask, returns, -xp.inf).max(-1) > xp.where(mask, returns, xp.inf).min(-1))
    ok = (std > 0) & spread  # constant ⇒ 0, not a 1e-18 residue; < 2 valid ⇒ no spread
    safe = xp.where(ok, std, 1.0)
    return xp.where(ok, mean / safe * math.sqrt(periods_per_year), 0.0)


def information_coefficient(forecast, target, valid=None):
    """Pearson correlation of a forecast with its realised target over the last axis:
    IC = Σ(f − f̄)(y − ȳ) / √(Σ(f − f̄)² · Σ(y − ȳ)²); NaN when either is constant. Like
    `sharpe`, on numpy (host) and jax (inside `jit`) arrays; `valid`: only the first `valid`
    entries count."""
    xp = _xp(forecast)
    n = forecast.shape[-1]
    mask = xp.ones(n, bool) if valid is None else xp.arange(n) < valid
    count = xp.maximum(mask.sum(), 1)

    def centred(x):
        return xp.where(mask, x - xp.where(mask, x, 0.0).sum(-1, keepdims=True) / count, 0.0)

    def spread(x):  # not constant: max > min (not a rounding residue of the mean)
        return xp.where(mask, x, -xp.inf).max(-1) > xp.where(mask, x, xp.inf).min(-1)

    f, y = centred(forecast), centred(target)
    var = (f**2).sum(-1) * (y**2).sum(-1)
    ok = spread(forecast) & spread(target) & (var > 0)
    return xp.where(ok, (f * y).sum(-1) / xp.sqrt(xp.where(ok, var, 1.0)), xp.nan)


def unit_volatility(returns) -> np.ndarray:
    """A host series divided by its standard deviation (ddof 1), float64: its mean is its
    per-period `sharpe`. Zeros where `sharpe` is 0 for want of spread (a constant series, or
    fewer than 2 returns)."""
    r = np.asarray(returns, np.float64)
    sd = float(np.std(r, ddof=1)) if r.size > 1 else 0.0
    return r / sd if sd > 0 and r.max() > r.min() else np.zeros_like(r)


def sharpe_of(returns, ppy: float) -> float:
    """`sharpe` of one host series (any float dtype, computed in float64) as a Python float."""
    return float(sharpe(np.asarray(returns, np.float64), ppy))


def sortino(returns, ppy: float) -> float:
    """Annualised Sortino ratio (required return 0): mean(r) / DD · √ppy.

    DD = √(mean(min(r, 0)²)) over ALL periods (empyrical's `downside_risk`). 0.0 when DD is 0
    (no losing period) or there are < 2 returns (empyrical: inf / NaN).
    """
    r = _host(returns)
    if r.size < 2:
        return 0.0
    dd = math.sqrt(float(np.mean(np.minimum(r, 0.0) ** 2)))
    return float(np.mean(r)) / dd * math.sqrt(ppy) if dd > 0 else 0.0


def max_drawdown(returns) -> float:
    """Maximum drawdown: min_t (E_t / max_{s≤t} E_s − 1) ≤ 0, fraction of the peak.

    E is the compounded equity curve E_0 = 1, E_t = Π_{s≤t} (1 + r_s); the start E_0 counts as a
    peak, so a first-bar loss is a drawdown. 0.0 for no returns (empyrical: NaN).
    """
    r = _host(returns)
    if r.size == 0:
        return 0.0
    equity = np.concatenate([[1.0], np.cumprod(1.0 + r)])
    peak = np.maximum.accumulate(equity)
    return float(np.min(equity / peak - 1.0))


def cagr(returns, ppy: float) -> float:
    """Compound annual growth rate: E_n^(ppy / n) − 1, E_n = Π (1 + r_t) (empyrical `cagr`).

    A fraction per year (0.1 = 10 %/yr). 0.0 for no returns; −1.0 when the equity is wiped out
    (E_n ≤ 0); the growth exponent is capped at e^700 so the result stays finite.
    """
    r = _host(returns)
    if r.size == 0:
        return 0.0
    final = float(np.prod(1.0 + r))
    if final <= 0:
        return -1.0
    return math.expm1(min(math.log(final) * ppy / r.size, 700.0))


def annual_volatility(returns, ppy: float) -> float:
    """Annualised volatility: std(r, ddof=1) · √ppy (empyrical `annual_volatility`, alpha=2).

    0.0 for < 2 returns (empyrical: NaN).
    """
    r = _host(returns)
    return float(np.std(r, ddof=1)) * math.sqrt(ppy) if r.size >= 2 else 0.0


def calmar(returns, ppy: float) -> float:
    """Calmar ratio: cagr / |max_drawdown| (whole sample, not the usual trailing 36 months).

    0.0 when there is no drawdown (max_drawdown == 0; empyrical: NaN).
    """
    mdd = max_drawdown(returns)
    return cagr(returns, ppy) / abs(mdd) if mdd < 0 else 0.0


def turnover(turnover_per_bar, ppy: float) -> float:
    """Annualised turnover: mean_t(|traded notional_t| / equity at the fill's open) · ppy.

    1.0 = the book is traded once a year; going flat→long→flat daily is ≈ 2 · 252 = 504.
    0.0 for no bars.
    """
    t = _host(turnover_per_bar)
    return float(np.mean(np.abs(t))) * ppy if t.size else 0.0


def hit_rate(returns, position) -> float:
    """Fraction of in-market bars (position ≠ 0) whose return is > 0; 0.0 if never in the market."""
    r, p = _host(returns), _host(position)
    if r.shape != p.shape:
        raise ValueError(f"returns {r.shape} and position {p.shape} differ in length")
    held = p != 0
    return float(np.mean(r[held] > 0)) if held.any() else 0.0


def exposure(position) -> float:
    """Mean absolute position, mean_t |p_t| (1.0 = always fully invested); 0.0 for no bars."""
    p = _host(position)
    return float(np.mean(np.abs(p))) if p.size else 0.0


def n_trades(position) -> int:
    """Number of bars whose position differs from the previous bar's; the position before the
    first bar is 0 (flat), so starting long counts as a trade and a reversal counts once."""
    p = _host(position)
    return int(np.count_nonzero(np.diff(p, prepend=0.0)))


def performance(returns, position, turnover_per_bar, ppy: float) -> dict[str, float]:
    """Every metric above in one dict with keys `PERFORMANCE_KEYS`, as plain finite floats.

    sharpe, sortino, calmar, cagr, volatility and turnover are annualised with `ppy`;
    max_drawdown is ≤ 0; hit_rate and exposure are fractions; n_trades is a count (as a float).
    """
    r = _host(returns)
    if not np.all(np.isfinite(r)):
        raise ValueError("returns contain NaN or inf")
    out = {
        "sharpe": float(sharpe(r, ppy)),
        "sortino": sortino(r, ppy),
        "max_drawdown": max_drawdown(r),
        "calmar": calmar(r, ppy),
        "cagr": cagr(r, ppy),
        "volatility": annual_volatility(r, ppy),
        "turnover": turnover(turnover_per_bar, ppy),
        "hit_rate": hit_rate(r, position),
        "exposure": exposure(position),
        "n_trades": float(n_trades(position)),
    }
    return {k: out[k] for k in PERFORMANCE_KEYS}


def geometric_mean_positive(values) -> float | None:
    """Geometric mean of per-fold Sharpes, or None unless every value is > 0."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0 or np.any(~(v > 0)):
        return None
    return float(np.exp(np.mean(np.log(v))))


def prior_figures(position, prior, kind: str, ppy: float) -> dict[str, float | str]:
    """The agent's target positions p_t [T] split into the prior π_t [T] they were chosen
    around (`kind`: the --prior) and the residual u_t = p_t − π_t: the prior's mean, the
    residual's mean |u| (`exposure`), and the turnover (annualised, `turnover`) of the
    target changes |Δp| less that of the prior's own |Δπ| (both from flat before the first
    bar, the equity drift between fills left out): what the residual adds."""
    p, pi = _host(position), _host(prior)
    if p.shape != pi.shape:
        raise ValueError(f"position {p.shape} and prior {pi.shape} differ in length")
    moves = [np.abs(np.diff(x, prepend=0.0)) for x in (p, pi)]
    return {"prior": kind, "prior_mean": float(np.mean(pi)) if pi.size else 0.0,
            "mean_abs_residual": exposure(p - pi),
            "turnover_added": turnover(moves[0], ppy) - turnover(moves[1], ppy)}
