"""Volatility targeting's position, min(1, σ*/σ̂): the `vol_target` baseline and the agent's
prior (`EnvConfig.prior`, min(1, k·σ*/σ̂) with k = `EnvConfig.prior_scale`), from the ratio
σ*/σ̂ computed once per fold in data preparation (host, float64).

σ̂_t is the sample std (ddof 1) of the last VOL_WINDOW log returns, bar t's close included and
nothing later; σ* is the median σ̂ over the fold's train bars, so the target needs no tuning and
fits any bar frequency.
"""

from __future__ import annotations

import numpy as np

VOL_WINDOW = 20  # bars of trailing log returns in σ̂


def trailing_vol(close: np.ndarray) -> np.ndarray:
    """σ̂_t = std(log(C_s / C_{s−1}), s = t − VOL_WINDOW + 1 … t; ddof 1) [T]; NaN while fewer
    than VOL_WINDOW returns exist (t < VOL_WINDOW)."""
    close = np.asarray(close, np.float64)
    rho = np.diff(np.log(close))  # rho[s − 1] = log(C_s / C_{s−1})
    out = np.full(len(close), np.nan)
    if len(rho) >= VOL_WINDOW:
        windows = np.lib.stride_tricks.sliding_window_view(rho, VOL_WINDOW)
        out[VOL_WINDOW:] = windows.std(axis=1, ddof=1)
    return out


def vol_target_scale(vol: np.ndarray, start: int, end: int) -> float:
    """σ* = median of `vol` (σ̂ [T]) over the train bars [start, end), NaN bars skipped; NaN
    when none is defined."""
    part = np.asarray(vol[start:end], np.float64)
    part = part[np.isfinite(part)]
    return float(np.median(part)) if len(part) else float("nan")


RATIO_MAX = 1e6  # σ*/σ̂ where only σ̂ is 0 (constant prices of late): any position cap holds


def vol_ratio(vol: np.ndarray, sigma_star: float) -> np.ndarray:
    """σ* / σ̂ [same shape as `vol`], ≥ 0: 0 where σ̂ or σ* is undefined, or both are 0
    (constant prices); RATIO_MAX where only σ̂ is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = sigma_star / np.asarray(vol, np.float64)
    return np.nan_to_num(np.minimum(ratio, RATIO_MAX), nan=0.0)


def vol_target_fraction(vol: np.ndarray, sigma_star: float) -> np.ndarray:
    """p = min(1, σ* / σ̂) (`vol_ratio`), long only: full size in a typical train bar's
    volatility or calmer; 0 where σ̂ or σ* is undefined, or both are 0; 1 where only σ̂ is 0."""
    return np.minimum(1.0, vol_ratio(vol, sigma_star))


def vol_target_ratios(close: np.ndarray, start: int, end: int) -> tuple[np.ndarray, float]:
    """(σ*/σ̂_t [T] (`vol_ratio`), σ*) with σ* fit on the train bars [start, end)."""
    vol = trailing_vol(close)
    sigma_star = vol_target_scale(vol, start, end)
    return vol_ratio(vol, sigma_star), sigma_star


def vol_target_positions(close: np.ndarray, start: int, end: int) -> tuple[np.ndarray, float]:
    """(p_t = min(1, σ*/σ̂_t) [T], σ*) with σ* fit on the train bars [start, end)."""
    ratio, sigma_star = vol_target_ratios(close, start, end)
    return np.minimum(1.0, ratio), sigma_star
