"""Causal market features and the train-segment normaliser.

Every feature value at bar t depends only on bars 0..t (bar t's close included): windows end at
t, rolling sums are prefix sums (`np.cumsum` is sequential), lags pad on the left. Computation is
float64, vectorised over bars (no Python loop over bars; loops only over window lags), output
float32. Rows before `first_valid` (the longest warm-up) are set to 0.

Features (r_t = log(c_t / c_{t-1}) is the 1-bar log return):

- ret_k      log(c_t / c_{t-k}) for k in 1, 2, 5, 10, 20, 60
- vol_w      sample std (ddof=1) of r over the last w bars, w in 5, 20, 60
- range      log(h_t / l_t);  range_20: its 20-bar mean
- close_loc  (c_t - l_t) / (h_t - l_t), 0.5 when h_t == l_t
- body       log(c_t / o_t)
- gap        log(o_t / c_{t-1})
- volume_z   z-score of log1p(v_t) over the last 20 bars (0 when the window is constant)
- rsi_14     (G - L) / (G + L) with G, L the sums of gains / losses of r over 14 bars
             (= (RSI - 50) / 50 with simple averages, in [-1, 1]; 0 when G + L == 0)
- ma_dist_w  log(c_t / mean(c_{t-w+1..t})), w in 20, 50, 200
- mom_vol_20 ret_20 / (vol_20 * sqrt(20))  (0 when vol_20 == 0)
- drawdown   log(c_t / max(c_{t-251..t}))  (<= 0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rl_trader.errors import InputError

_RET_HORIZONS = (1, 2, 5, 10, 20, 60)
_VOL_WINDOWS = (5, 20, 60)
_MA_WINDOWS = (20, 50, 200)
_DD_WINDOW = 252


@dataclass(frozen=True)
class MarketFeatures:
    """values: float32 [T, F] raw (un-normalised), rows < first_valid are 0; names: F names."""

    values: np.ndarray
    names: tuple[str, ...]
    first_valid: int


@dataclass(frozen=True)
class Normaliser:
    """Per-feature mean and std (float32 [F]) fit on a train segment."""

    mean: np.ndarray
    std: np.ndarray


def _lag(x: np.ndarray, k: int) -> np.ndarray:
    """x[t-k], with the first k entries padded by x[0] (only warm-up rows see the padding)."""
    if k == 0:
        return x
    out = np.empty_like(x)
    k = min(k, len(x))
    out[:k] = x[0]
    out[k:] = x[: len(x) - k]
    return out


def _rolling_mean(x: np.ndarray, w: int) -> np.ndarray:
    """mean(x[t-w+1..t]) via prefix sums; the first w-1 entries average what is available."""
    cs = np.concatenate([[0.0], np.cumsum(x)])
    t = np.arange(len(x))
    lo = np.maximum(t + 1 - w, 0)
    return (cs[t + 1] - cs[lo]) / (t + 1 - lo)


def _rolling_std(x: np.ndarray, w: int) -> np.ndarray:
    """Sample std (ddof=1) of x[t-w+1..t]: two-pass (mean, then squared deviations), O(T*w)."""
    m = _rolling_mean(x, w)
    ss = np.zeros_like(x)
    for k in range(w):
        ss += (_lag(x, k) - m) ** 2
    return np.sqrt(ss / (w - 1))


def _rolling_max(x: np.ndarray, w: int) -> np.ndarray:
    """max(x[t-w+1..t]) by doubling spans (sparse table), O(T log w)."""
    m, span = x, 1
    while 2 * span <= w:
        m = np.maximum(m, _lag(m, span))
        span *= 2
    return np.maximum(m, _lag(m, w - span))


def _safe_div(num: np.ndarray, den: np.ndarray, fill: float) -> np.ndarray:
    """num / den where den != 0, else `fill`."""
    out = np.full_like(num, fill)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _check_inputs(arrays: dict[str, np.ndarray]) -> int:
    n = None
    for name, a in arrays.items():
        if a.ndim != 1:
            raise InputError(f"{name}: expected a 1-D array of bars, got shape {a.shape}")
        if n is not None and len(a) != n:
            raise InputError(f"{name}: has {len(a)} bars, expected {n} like the others")
        n = len(a)
        if not np.all(np.isfinite(a)):
            raise InputError(f"{name}: contains NaN or inf")
        if name == "volume":
            if np.any(a < 0):
                raise InputError("volume: contains negative values")
        elif np.any(a <= 0):
            raise InputError(f"{name}: prices must be > 0")
    assert n is not None
    if n == 0:
        raise InputError("no bars to compute features on")
    return n


def compute_features(
    open: np.ndarray, high: np.ndarray, low: np.ndarray, close: np.ndarray, volume: np.ndarray
) -> MarketFeatures:
    """Causal features of OHLCV bars (each float64 [T]) → `MarketFeatures` float32 [T, F]."""
    o, h, lo, c, v = (np.asarray(a, dtype=np.float64) for a in (open, high, low, close, volume))
    _check_inputs({"open": o, "high": h, "low": lo, "close": c, "volume": v})
    logc = np.log(c)
    r1 = logc - _lag(logc, 1)  # 0 at t=0
    feats: list[tuple[str, np.ndarray, int]] = []  # (name, values, warm-up bars)

    for k in _RET_HORIZONS:
        feats.append((f"ret_{k}", logc - _lag(logc, k), k))
    vols = {w: _rolling_std(r1, w) for w in _VOL_WINDOWS}
    for w in _VOL_WINDOWS:
        feats.append((f"vol_{w}", vols[w], w))
    rng = np.log(h / lo)
    feats.append(("range", rng, 0))
    feats.append(("range_20", _rolling_mean(rng, 20), 19))
    feats.append(("close_loc", _safe_div(c - lo, h - lo, 0.5), 0))
    feats.append(("body", np.log(c / o), 0))
    feats.append(("gap", np.log(o) - _lag(logc, 1), 1))

    lv = np.log1p(v)
    lv_sd = _rolling_std(lv, 20)
    feats.append(("volume_z", _safe_div(lv - _rolling_mean(lv, 20), lv_sd, 0.0), 19))

    gains = _rolling_mean(np.maximum(r1, 0.0), 14)
    losses = _rolling_mean(np.maximum(-r1, 0.0), 14)
    feats.append(("rsi_14", _safe_div(gains - losses, gains + losses, 0.0), 14))

    for w in _MA_WINDOWS:
        feats.append((f"ma_dist_{w}", logc - np.log(_rolling_mean(c, w)), w - 1))
    ret20 = logc - _lag(logc, 20)
    feats.append(("mom_vol_20", _safe_div(ret20, vols[20] * np.sqrt(20.0), 0.0), 20))
    feats.append(("drawdown", logc - np.log(_rolling_max(c, _DD_WINDOW)), _DD_WINDOW - 1))

    first_valid = max(warm for _, _, warm in feats)
    values = np.stack([f for _, f, _ in feats], axis=1)
    values[:first_valid] = 0.0
    values = values.astype(np.float32)
    if not np.all(np.isfinite(values)):  # cannot happen for valid inputs; guard the contract
        raise InputError("features: non-finite values computed from the bars")
    return MarketFeatures(values=values, names=tuple(n for n, _, _ in feats),
                          first_valid=first_valid)


def fit_normaliser(values: np.ndarray, start: int, end: int) -> Normaliser:
    """Mean/std (ddof=0, float64 then float32) of rows [start, end) of values [T, F] only.

    A feature whose std <= 1e-8 * max(1, |mean|) counts as constant and gets std 1, so it
    normalises to 0 instead of blowing up.
    """
    if not 0 <= start < end <= len(values):
        raise ValueError(f"fit_normaliser: need 0 <= start < end <= {len(values)}, "
                         f"got [{start}, {end})")
    seg = np.asarray(values[start:end], dtype=np.float64)
    mean = seg.mean(axis=0)
    std = seg.std(axis=0)
    std = np.where(std <= 1e-8 * np.maximum(1.0, np.abs(mean)), 1.0, std)
    return Normaliser(mean=mean.astype(np.float32), std=std.astype(np.float32))


def normalise(values: np.ndarray, norm: Normaliser, clip: float) -> np.ndarray:
    """float32 [T, F]: clip((x - mean) / std, -clip, clip)."""
    z = (np.asarray(values, np.float64) - norm.mean.astype(np.float64)) / norm.std.astype(
        np.float64)
    return np.clip(z, -clip, clip).astype(np.float32)


def next_bar_log_return(close: np.ndarray) -> np.ndarray:
    """float32 [T]: log(close[t+1] / close[t]); the last entry is 0 (no next bar)."""
    c = np.asarray(close, dtype=np.float64)
    out = np.zeros(len(c), dtype=np.float64)
    out[:-1] = np.log(c[1:] / c[:-1])
    return out.astype(np.float32)
