"""Selection-bias statistics: PSR, DSR, MinTRL (Bailey & López de Prado), PBO by CSCV, and
Hansen's test of superior predictive ability (SPA) on the stationary bootstrap.

Units: every Sharpe ratio here is PER PERIOD (mean / std of per-period returns, NOT annualised)
unless a name says otherwise; convert with `annualise_sharpe` / `deannualise_sharpe`. Kurtosis is
the RAW (non-excess) fourth standardised moment γ4 (3 for a normal), skewness γ3 the third.

References: Bailey & López de Prado, "The Sharpe Ratio Efficient Frontier", J. of Risk 15(2), 2012
(PSR, MinTRL); "The Deflated Sharpe Ratio", J. Portfolio Management 40(5), 2014 (DSR, expected
maximum Sharpe); Bailey, Borwein, López de Prado & Zhu, "The Probability of Backtest Overfitting",
J. Computational Finance 20(4), 2017 (PBO, CSCV); Hansen, "A Test for Superior Predictive
Ability", J. Business & Economic Statistics 23(4), 2005 (SPA); Politis & Romano, "The Stationary
Bootstrap", JASA 89(428), 1994. Runtime needs numpy and the standard library only (no scipy).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

EULER_GAMMA = 0.5772156649015329

_STANDARD_NORMAL = NormalDist()


def norm_cdf(x: float) -> float:
    """Standard normal CDF Φ(x) = ½·erfc(−x/√2), accurate in both tails. (`NormalDist.cdf`
    computes ½·(1 + erf(x/√2)), which cancels in the lower tail and is 0 below x ≈ −8.3.)"""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def norm_ppf(p: float) -> float:
    """Standard normal quantile Φ⁻¹(p) (`statistics.NormalDist.inv_cdf`, Wichura's AS241).
    −inf at p = 0, +inf at p = 1; ValueError outside [0, 1]."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"norm_ppf: p={p} is not in [0, 1]")
    if p == 0.0 or p == 1.0:
        return -math.inf if p == 0.0 else math.inf
    return _STANDARD_NORMAL.inv_cdf(p)


def annualise_sharpe(sr_per_period: float, ppy: float) -> float:
    """Annualised Sharpe = per-period Sharpe · √ppy (i.i.d. returns)."""
    return sr_per_period * math.sqrt(ppy)


def deannualise_sharpe(sr_annual: float, ppy: float) -> float:
    """Per-period Sharpe = annualised Sharpe / √ppy (inverse of `annualise_sharpe`)."""
    return sr_annual / math.sqrt(ppy)


def moments(returns) -> tuple[float, float, float, int]:
    """(sr, γ3, γ4, n) of per-period returns r_1..r_n.

    sr = mean / std(ddof=1) per period (as `metrics.sharpe` with ppy = 1); γ3 = m3 / m2^1.5 and
    γ4 = m4 / m2² from the biased (population) central moments m_k = mean((r − r̄)^k), as in the
    papers (scipy: skew(bias=True), kurtosis(fisher=False, bias=True)). A constant series gives
    (0, 0, 3, n), the normal's shape. ValueError for n < 2 or non-finite returns.
    """
    r = np.asarray(returns, dtype=np.float64).reshape(-1)
    n = int(r.size)
    if n < 2 or not np.all(np.isfinite(r)):
        raise ValueError(f"moments need >= 2 finite returns, got {n}")
    d = r - r.mean()
    m2 = float(np.mean(d**2))
    if m2 == 0.0 or r.max() == r.min():
        return 0.0, 0.0, 3.0, n
    sr = float(r.mean() / np.std(r, ddof=1))
    return sr, float(np.mean(d**3)) / m2**1.5, float(np.mean(d**4)) / m2**2, n


def _sr_variance_factor(sr: float, skew: float, kurtosis: float) -> float:
    v = 1.0 - skew * sr + (kurtosis - 1.0) / 4.0 * sr * sr
    if not v > 0:
        raise ValueError(f"1 − γ3·SR + (γ4−1)/4·SR² = {v} ≤ 0: skew={skew}, kurtosis={kurtosis} "
                         f"(raw, not excess) are inconsistent with sr={sr}")
    return v


def probabilistic_sharpe_ratio(sr: float, n: float, skew: float, kurtosis: float,
                               sr_benchmark: float = 0.0) -> float:
    """PSR(SR*) = Φ( (SR − SR*)·√(n − 1) / √(1 − γ3·SR + (γ4 − 1)/4·SR²) ).

    The probability that the true Sharpe exceeds `sr_benchmark`, given an observed per-period
    `sr` over `n` returns with skewness γ3 and RAW kurtosis γ4. ValueError for n ≤ 1.
    """
    if not n > 1:
        raise ValueError(f"PSR needs n > 1 returns, got {n}")
    v = _sr_variance_factor(sr, skew, kurtosis)
    return norm_cdf((sr - sr_benchmark) * math.sqrt(n - 1.0) / math.sqrt(v))


def expected_max_sharpe(n_trials: int, var_sharpe: float) -> float:
    """E[max of N zero-skill Sharpes] ≈ √V·((1 − γ)·Φ⁻¹(1 − 1/N) + γ·Φ⁻¹(1 − 1/(N·e))).

    γ = Euler–Mascheroni, V = variance of the trials' Sharpes. Same units as √V (per-period V gives
    a per-period answer). 0.0 for N ≤ 1; ValueError for V < 0.
    """
    if var_sharpe < 0:
        raise ValueError(f"var_sharpe={var_sharpe} < 0")
    if n_trials <= 1:
        return 0.0
    z = ((1.0 - EULER_GAMMA) * norm_ppf(1.0 - 1.0 / n_trials)
         + EULER_GAMMA * norm_ppf(1.0 - 1.0 / (n_trials * math.e)))
    return math.sqrt(var_sharpe) * z


@dataclass(frozen=True)
class DeflatedSharpe:
    """Result of `deflated_sharpe_ratio`: dsr = PSR(sr_benchmark); sr_benchmark = E[max] used
    (per period); n_trials and var_trials (ddof=1 variance of the trial Sharpes; 0 if < 2)."""

    dsr: float
    sr_benchmark: float
    n_trials: int
    var_trials: float


def deflated_sharpe_ratio(sr: float, n: float, skew: float, kurtosis: float,
                          trial_sharpes, extra_trials: int = 0) -> DeflatedSharpe:
    """DSR = PSR(SR*) with SR* = expected_max_sharpe(N, var(trial_sharpes, ddof=1)).

    `trial_sharpes` are the per-period Sharpes of EVERY trial tried (the selected one included);
    N = len(trial_sharpes) + `extra_trials`, the trials looked at elsewhere (e.g. the settings
    tried to choose the defaults) whose Sharpes are not at hand: they count in N, and the
    variance is that of the trials at hand. With one trial SR* = 0 and DSR = PSR(0).
    """
    if extra_trials < 0:
        raise ValueError(f"extra_trials={extra_trials} < 0")
    t = np.asarray(trial_sharpes, dtype=np.float64).reshape(-1)
    if t.size == 0 or not np.all(np.isfinite(t)):
        raise ValueError("trial_sharpes must be a non-empty list of finite numbers")
    var = float(np.var(t, ddof=1)) if t.size > 1 else 0.0
    n_trials = int(t.size) + int(extra_trials)
    sr_star = expected_max_sharpe(n_trials, var)
    dsr = probabilistic_sharpe_ratio(sr, n, skew, kurtosis, sr_star)
    return DeflatedSharpe(dsr=dsr, sr_benchmark=sr_star, n_trials=n_trials, var_trials=var)


def min_track_record_length(sr: float, skew: float, kurtosis: float, sr_benchmark: float = 0.0,
                            prob: float = 0.95) -> float:
    """MinTRL = 1 + (1 − γ3·SR + (γ4 − 1)/4·SR²)·(Φ⁻¹(prob) / (SR − SR*))², in periods.

    The number of returns needed for PSR(SR*) ≥ prob at the observed per-period `sr`; inf when
    sr ≤ sr_benchmark.
    """
    if not 0.0 < prob < 1.0:
        raise ValueError(f"prob={prob} is not in (0, 1)")
    if sr <= sr_benchmark:
        return math.inf
    v = _sr_variance_factor(sr, skew, kurtosis)
    return 1.0 + v * (norm_ppf(prob) / (sr - sr_benchmark)) ** 2


def _subset_sharpes(mask, cnt, s1, s2, shift, gmin, gmax) -> np.ndarray:
    """Per-period Sharpe (ddof=1) of each trial over the union of the groups in each mask row."""
    mf = mask.astype(np.float64)
    n = mf @ cnt  # [C]
    mean_c = (mf @ s1) / n[:, None]  # mean of the shifted data, [C, N]
    var = np.maximum((mf @ s2 - n[:, None] * mean_c**2) / (n[:, None] - 1), 0.0)
    lo = np.where(mask[:, :, None], gmin[None], np.inf).min(1)
    hi = np.where(mask[:, :, None], gmax[None], -np.inf).max(1)
    ok = (var > 0) & (hi > lo)
    return np.where(ok, (mean_c + shift) / np.sqrt(np.where(ok, var, 1.0)), 0.0)


def pbo_cscv_detail(perf, n_splits: int = 16) -> tuple[float, np.ndarray]:
    """(PBO, logits) by Combinatorially Symmetric Cross-Validation (Bailey et al. 2017).

    `perf` is [T, N]: per-period returns of N trials over the same T periods. Rows are split into
    S = n_splits contiguous groups (np.array_split: sizes differ by ≤ 1 when S ∤ T). For each of
    the C(S, S/2) choices of S/2 groups as in-sample (the rest out-of-sample): n* = argmax of the
    in-sample per-period Sharpes (first on ties), ω = rank of n* among the out-of-sample Sharpes
    (1 = worst, ties get the average rank) / (N + 1), λ = ln(ω / (1 − ω)).
    PBO = fraction of combinations with λ ≤ 0. Deterministic. Sharpe = mean / std(ddof=1), 0 for
    a constant trial. ValueError for odd S, S < 2, T < S, N < 2 or non-finite values.
    """
    m = np.asarray(perf, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"perf must be a [T, N] matrix, got shape {m.shape}")
    t, n_trials = m.shape
    s = int(n_splits)
    if s < 2 or s % 2:
        raise ValueError(f"n_splits={n_splits} must be even and >= 2")
    if t < s or n_trials < 2:
        raise ValueError(f"perf {m.shape}: need T >= n_splits={s} periods and N >= 2 trials")
    if not np.all(np.isfinite(m)):
        raise ValueError("perf contains NaN or inf")
    shift = m.mean(0)
    groups = np.array_split(m - shift, s)
    raw = np.array_split(m, s)
    cnt = np.array([len(g) for g in groups], dtype=np.float64)
    s1 = np.stack([g.sum(0) for g in groups])
    s2 = np.stack([(g**2).sum(0) for g in groups])
    gmin = np.stack([g.min(0) for g in raw])
    gmax = np.stack([g.max(0) for g in raw])
    combos = np.array(list(itertools.combinations(range(s), s // 2)))
    masks = np.zeros((len(combos), s), dtype=bool)
    masks[np.arange(len(combos))[:, None], combos] = True
    logits = np.empty(len(combos))
    chunk = max(1, (1 << 21) // (s * n_trials))
    for a in range(0, len(combos), chunk):
        mk = masks[a:a + chunk]
        is_sr = _subset_sharpes(mk, cnt, s1, s2, shift, gmin, gmax)
        oos_sr = _subset_sharpes(~mk, cnt, s1, s2, shift, gmin, gmax)
        best = np.argmax(is_sr, axis=1)
        o = oos_sr[np.arange(len(mk)), best][:, None]
        rank = (oos_sr < o).sum(1) + ((oos_sr == o).sum(1) + 1) / 2.0
        omega = rank / (n_trials + 1)
        logits[a:a + chunk] = np.log(omega / (1.0 - omega))
    return float(np.mean(logits <= 0)), logits


def pbo_cscv(perf, n_splits: int = 16) -> float:
    """Probability of Backtest Overfitting by CSCV; see `pbo_cscv_detail`."""
    return pbo_cscv_detail(perf, n_splits)[0]


SPA_MIN_PERIODS = 8  # `spa_test` refuses fewer returns


def stationary_bootstrap_means(x: np.ndarray, reps: int, block: float,
                               rng: np.random.Generator) -> np.ndarray:
    """The means of each column of `x` [n, K] over `reps` stationary-bootstrap resamples of its
    rows, [reps, K] float64.

    A resample (Politis & Romano 1994) is n row indices: the first uniform, each next one a new
    uniform start with probability q = 1/`block`, else the previous index + 1 (mod n, so blocks
    wrap), which gives blocks of geometric length with mean `block` rows. The resamples are
    drawn in chunks of about 2²⁰ indices, so memory stays small for any n.
    """
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    if x.ndim != 2 or n < 1 or reps < 1 or not block >= 1:
        raise ValueError(f"stationary bootstrap: x {x.shape} must be [n >= 1, K], reps={reps} "
                         f">= 1 and block={block} >= 1")
    t = np.arange(n)
    out = np.empty((reps, x.shape[1]))
    chunk = max(1, (1 << 20) // n)
    for a in range(0, reps, chunk):
        r = min(chunk, reps - a)
        starts = rng.integers(0, n, size=(r, n))
        fresh = rng.random((r, n)) < 1.0 / block
        fresh[:, 0] = True
        last = np.maximum.accumulate(np.where(fresh, t, 0), axis=1)  # where each block began
        idx = (np.take_along_axis(starts, last, axis=1) + (t - last)) % n
        counts = np.bincount((np.arange(r)[:, None] * n + idx).ravel(), minlength=r * n)
        out[a:a + r] = counts.reshape(r, n).astype(np.float64) @ x / n
    return out


def bootstrap_long_run_variance(d: np.ndarray, block: float) -> np.ndarray:
    """ω̂²_k = γ̂_0 + 2·Σ_{i=1}^{n−1} κ_i·γ̂_i, the stationary bootstrap's variance of √n·d̄_k
    (Hansen 2005, after Politis & Romano 1994), for each column of `d` [n, K]; [K].

    κ_i = (1 − i/n)(1 − q)^i + (i/n)(1 − q)^(n−i) with q = 1/`block`, and
    γ̂_i = (1/n)·Σ_{t<n−i} (d_t − d̄)(d_{t+i} − d̄), all lags at once by FFT.
    """
    n = d.shape[0]
    x = d - d.mean(0)
    f = np.fft.rfft(x, 2 * n, axis=0)
    gamma = np.fft.irfft(f * np.conj(f), 2 * n, axis=0)[:n] / n  # [n, K], lag 0 … n−1
    i = np.arange(1, n)
    q = 1.0 / block
    kappa = (1 - i / n) * (1 - q) ** i + (i / n) * (1 - q) ** (n - i)
    return np.maximum(gamma[0] + 2.0 * kappa @ gamma[1:], 0.0)


@dataclass(frozen=True)
class SuperiorPredictiveAbility:
    """Result of `spa_test`: Hansen's p-values with the lower, consistent (his recommended one)
    and upper re-centring, lower ≤ consistent ≤ upper; `statistic` = max(max_k √n·d̄_k/ω̂_k, 0);
    the bootstrap's `block` (mean length, periods) and `reps`."""

    lower: float
    consistent: float
    upper: float
    statistic: float
    block: int
    reps: int


def spa_test(benchmark: np.ndarray, models: np.ndarray, reps: int = 1000,
             block: int | None = None, seed: int = 0,
             means: np.ndarray | None = None) -> SuperiorPredictiveAbility:
    """Hansen's (2005) SPA test of H0: no model's mean per-period return beats the benchmark's.

    `benchmark` [n] and `models` [n, K] (or [n]) are per-period returns (higher is better; the
    losses of `arch.bootstrap.SPA` are their negatives). With d_tk = models_tk − benchmark_t,
    T = max(max_k √n·d̄_k/ω̂_k, 0) (ω̂ from `bootstrap_long_run_variance`); each
    stationary-bootstrap resample b (mean block `block`, default ⌊√n⌋ as in `arch`) gives
    T*_b = max(max_k √n·(d̄*_bk − g(d̄_k))/ω̂_k, 0), and p = share of b with T*_b ≥ T. The
    re-centring g is d̄ (upper), max(d̄, 0) (lower) or d̄·1{d̄ ≥ −√(ω̂²/n · 2·ln ln n)}
    (consistent). So p = 1 when no model beats the benchmark in sample, and a model equal to
    it gets p = 1. (`arch` 8.0 neither floors at 0 nor studentizes; with one model and some
    d̄ > 0 it gives the same p.) A constant difference (ω̂ ≤ 1e-9 of the returns' scale) is
    no random quantity: it adds 0 to every T*, and to T +∞ when d̄ is above that tolerance
    (p = 0: the model beats the benchmark on every bar by the same amount), nothing otherwise.
    Deterministic in `seed`; `means` [reps, 1 + K], the resampled means of [benchmark, models]
    (`stationary_bootstrap_means`, drawn once for several tests), replaces `reps` and `seed`.
    ValueError for n < `SPA_MIN_PERIODS`, a shape mismatch or non-finite values.
    """
    b = np.asarray(benchmark, dtype=np.float64).reshape(-1)
    m = np.asarray(models, dtype=np.float64)
    m = m.reshape(-1, 1) if m.ndim == 1 else m
    n = b.size
    if m.ndim != 2 or m.shape[0] != n or m.shape[1] < 1 or n < SPA_MIN_PERIODS:
        raise ValueError(f"spa_test: benchmark [n] and models [n, K] with n >= {SPA_MIN_PERIODS}"
                         f", got {b.shape}"
                         f" and {np.shape(models)}")
    if not (np.all(np.isfinite(b)) and np.all(np.isfinite(m))):
        raise ValueError("spa_test: returns contain NaN or inf")
    block = int(math.sqrt(n)) if block is None else int(block)
    d = m - b[:, None]
    mean = d.mean(0)
    omega = np.sqrt(bootstrap_long_run_variance(d, block))
    tol = 1e-9 * max(float(np.max(np.abs(b))), float(np.max(np.abs(m))), 1e-300)
    random = omega > tol
    scale = np.where(random, omega, 1.0) / math.sqrt(n)
    keep = mean >= -np.sqrt(omega**2 / n * 2.0 * math.log(math.log(n)))
    centres = (np.maximum(mean, 0.0), np.where(keep, mean, 0.0), mean)
    if means is None:
        means = stationary_bootstrap_means(np.column_stack([b, m]), reps, block,
                                           np.random.default_rng(seed))
    if means.shape[1:] != (1 + m.shape[1],):
        raise ValueError(f"spa_test: means {means.shape} are not of [benchmark, models] "
                         f"({1 + m.shape[1]} columns)")
    boot = means[:, 1:] - means[:, :1]  # d̄*: resampled means are linear
    sure = bool(np.any(~random & (mean > tol)))
    stat = math.inf if sure else max(float(np.max(np.where(random, mean / scale, 0.0))), 0.0)
    lower, consistent, upper = (
        float(np.mean(np.maximum(np.max(np.where(random, (boot - g) / scale, 0.0), axis=1),
                                 0.0) >= stat))
        for g in centres)
    return SuperiorPredictiveAbility(lower=lower, consistent=consistent, upper=upper,
                                     statistic=stat, block=block, reps=means.shape[0])
