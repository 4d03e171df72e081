"""The run's headline with its selection-bias statistics (PSR, DSR, MinTRL, PBO).

Trials are every (fold, epoch, setting) ensemble whose validation Sharpe was looked at when
choosing; the DSR deflates the stitched test Sharpe by the expected maximum Sharpe of that many
zero-skill trials, using the dispersion of the trials' validation Sharpes. PBO is computed per
fold by CSCV over the fold's validation trial matrix [bars, trials] and averaged over folds.
"""

from __future__ import annotations

import math

import numpy as np

from rl_trader.evaluation.metrics import geometric_mean_positive, sharpe
from rl_trader.evaluation.stats import (
    annualise_sharpe,
    deannualise_sharpe,
    deflated_sharpe_ratio,
    min_track_record_length,
    moments,
    pbo_cscv,
    probabilistic_sharpe_ratio,
)

PBO_SPLITS = 16


def fold_pbo(val_returns: np.ndarray) -> float | None:
    """PBO of one fold's trials, `val_returns` [trials, bars]; None with < 2 trials."""
    n_trials, n_bars = val_returns.shape
    splits = min(PBO_SPLITS, n_bars - n_bars % 2)
    if n_trials < 2 or splits < 2:
        return None
    return pbo_cscv(val_returns.T, n_splits=splits)


def headline(stitched: np.ndarray, trials: list[dict], val_matrix: list[list[np.ndarray]],
             ppy: float, fold_test_sharpes: list[float] | None = None,
             prior_trials: int = 0) -> dict:
    """Stitched test Sharpe with PSR, DSR over all trials (this run's and `prior_trials`
    looked at outside it), MinTRL, E[max Sharpe] and PBO."""
    sr, skew, kurt, n = moments(stitched)
    trial_sr = [deannualise_sharpe(t["val_sharpe"], ppy) for t in trials]
    deflated = deflated_sharpe_ratio(sr, n, skew, kurt, trial_sr, prior_trials)
    pbos = [fold_pbo(np.concatenate(m, axis=0)) for m in val_matrix]
    pbos = [p for p in pbos if p is not None]
    mintrl = min_track_record_length(sr, skew, kurt)
    return {
        "stitched_test_sharpe": float(sharpe(stitched, ppy)),
        "psr": probabilistic_sharpe_ratio(sr, n, skew, kurt),
        "dsr": deflated.dsr,
        "n_trials": deflated.n_trials,
        "expected_max_sharpe": annualise_sharpe(deflated.sr_benchmark, ppy),
        "min_track_record_bars": None if math.isinf(mintrl) else mintrl,
        "n_test_bars": n,
        "pbo": float(np.mean(pbos)) if pbos else None,
        "pbo_by_fold": pbos,
        "geo_mean_test_sharpe": (geometric_mean_positive(fold_test_sharpes)
                                 if fold_test_sharpes else None),
        "skew": skew,
        "kurtosis": kurt,
    }
