"""The run's headline with its selection-bias statistics (PSR, DSR, MinTRL, PBO) and Hansen's
SPA test of the agent against every baseline.

Trials are every (fold, epoch, setting) ensemble whose validation Sharpe was looked at when
choosing; the DSR deflates the stitched test Sharpe by the expected maximum Sharpe of that many
zero-skill trials, using the dispersion of the trials' validation Sharpes. PBO is computed per
fold by CSCV over the fold's validation trial matrix [bars, trials] and averaged over folds.
The SPA compares Sharpe ratios on the same test bars (each strategy's net returns scaled to
unit volatility), as every other figure of the headline does.
"""

from __future__ import annotations

import math

import numpy as np

from rl_trader.evaluation.metrics import geometric_mean_positive, sharpe, unit_volatility
from rl_trader.evaluation.record import Headline, Spa
from rl_trader.evaluation.stats import (
    SPA_MIN_PERIODS,
    annualise_sharpe,
    deannualise_sharpe,
    deflated_sharpe_ratio,
    min_track_record_length,
    moments,
    pbo_cscv,
    probabilistic_sharpe_ratio,
    spa_test,
    stationary_bootstrap_means,
)

PBO_SPLITS = 16
SPA_REPS = 1000  # stationary-bootstrap resamples: p-values to ±0.016 (1 s.e. at p = 0.5)


def superior_ability(agent: np.ndarray, baselines: dict[str, np.ndarray],
                     seed: int) -> dict | None:
    """Hansen's SPA (`stats.spa_test`, consistent p-values) of the agent's per-bar returns
    `agent` [n] against each of `baselines` (name → [n], the same bars), both ways, on Sharpe
    ratios: every series is first scaled to unit volatility (`metrics.unit_volatility`), so a
    difference of means is a difference of per-bar Sharpe ratios. The scales are taken as
    known: their estimation error (about 1/√(2n) of each, relative) is not resampled.

    - `agent_beats[name]`: p of H0 "the agent's Sharpe ≤ name's" (benchmark: name; model: the
      agent); a small p is evidence that the agent beats it;
    - `p_agent_beats_all`: the largest of those, a valid p for "the agent beats every baseline"
      (an intersection–union test);
    - `p_some_baseline_beats_agent`: p of H0 "no baseline's Sharpe beats the agent's"
      (benchmark: the agent; models: every baseline at once, Hansen's test over all of them);
      a small p is evidence that some baseline beats the agent.

    Every test uses the same resamples (`seed`). None with fewer than
    `stats.SPA_MIN_PERIODS` bars or no baseline."""
    names = list(baselines)
    a = unit_volatility(agent)
    if a.size < SPA_MIN_PERIODS or not names:
        return None
    base = np.stack([unit_volatility(baselines[k]) for k in names], axis=1)
    block = int(math.sqrt(a.size))
    means = stationary_bootstrap_means(np.column_stack([a, base]), SPA_REPS, block,
                                       np.random.default_rng(seed))  # [reps, 1 + K]
    beats = {k: spa_test(base[:, j], a, block=block, means=means[:, [j + 1, 0]]).consistent
             for j, k in enumerate(names)}
    reverse = spa_test(a, base, block=block, means=means)
    return {"agent_beats": beats, "p_agent_beats_all": max(beats.values()),
            "p_some_baseline_beats_agent": reverse.consistent, "block_bars": reverse.block,
            "reps": SPA_REPS}


def fold_pbo(val_returns: np.ndarray) -> float | None:
    """PBO of one fold's trials, `val_returns` [trials, bars]; None with < 2 trials."""
    n_trials, n_bars = val_returns.shape
    splits = min(PBO_SPLITS, n_bars - n_bars % 2)
    if n_trials < 2 or splits < 2:
        return None
    return pbo_cscv(val_returns.T, n_splits=splits)


def headline(stitched: np.ndarray, trials: list[dict], val_matrix: list[list[np.ndarray]],
             ppy: float, baselines: dict[str, np.ndarray], seed: int,
             fold_test_sharpes: list[float] | None = None, prior_trials: int = 0) -> Headline:
    """Stitched test Sharpe with PSR, DSR over all trials (this run's and `prior_trials`
    looked at outside it), MinTRL, E[max Sharpe], PBO and the SPA against `baselines`' stitched
    returns (`superior_ability`, resampled with `seed`)."""
    sr, skew, kurt, n = moments(stitched)
    trial_sr = [deannualise_sharpe(t["val_sharpe"], ppy) for t in trials]
    deflated = deflated_sharpe_ratio(sr, n, skew, kurt, trial_sr, prior_trials)
    pbos = [fold_pbo(np.concatenate(m, axis=0)) for m in val_matrix
            if m]  # a fold stopped in its first epoch has no trials
    pbos = [p for p in pbos if p is not None]
    mintrl = min_track_record_length(sr, skew, kurt)
    spa = superior_ability(stitched, baselines, seed)
    return Headline(
        stitched_test_sharpe=float(sharpe(stitched, ppy)),
        psr=probabilistic_sharpe_ratio(sr, n, skew, kurt),
        dsr=deflated.dsr,
        n_trials=deflated.n_trials,
        expected_max_sharpe=annualise_sharpe(deflated.sr_benchmark, ppy),
        min_track_record_bars=None if math.isinf(mintrl) else mintrl,
        n_test_bars=n,
        pbo=float(np.mean(pbos)) if pbos else None,
        pbo_by_fold=pbos,
        geo_mean_test_sharpe=(geometric_mean_positive(fold_test_sharpes)
                              if fold_test_sharpes else None),
        skew=skew,
        kurtosis=kurt,
        spa=None if spa is None else Spa(**spa))
