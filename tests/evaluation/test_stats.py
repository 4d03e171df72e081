"""rl_trader.evaluation.stats: published example, an independent scipy implementation, analytic
properties.

References used here:
- Bailey & López de Prado (2014), "The Deflated Sharpe Ratio", JPM 40(5), numerical example:
  N = 100 trials, V[SR_n] = 1/2 annualised, T = 1250 daily returns (250 a year), best annualised
  SR = 2.5, γ3 = −3, γ4 = 10 → E[max SR] ≈ 0.1132 per day and DSR ≈ 0.9004. (Figures quoted from
  the paper as recalled; a scipy recomputation below reproduces both to 4 decimals.)
- López de Prado's expected-max formula as published with the paper (get_analytical_max_sr, seen
  in stefan-jansen/machine-learning-for-trading 08_ml4t_workflow/01_multiple_testing/
  deflated_sharpe_ratio.py) and vectorbt's approx_exp_max_sharpe / deflated_sharpe_ratio
  (polakowo/vectorbt vectorbt/returns/metrics.py): re-implemented below with scipy.stats.
- CSCV / PBO: Bailey, Borwein, López de Prado & Zhu (2017); the R package mrbcuda/pbo (R/pbo.R)
  for the loop structure. The brute-force reference below uses ω = rank / (N + 1) as in the paper
  (mrbcuda/pbo uses rank / N) and scipy.stats.rankdata for the ranks.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.stats as ss

from rl_trader.data import load_bars
from rl_trader.evaluation import stats as S


# --------------------------------------------------------------- an independent implementation
def ref_psr(sr, n, g3, g4, sr_star=0.0):
    var_factor = 1 - g3 * sr + (g4 - 1) / 4 * sr**2
    return ss.norm.cdf((sr - sr_star) * np.sqrt(n - 1) / np.sqrt(var_factor))


def ref_emax(n, var):
    g = np.euler_gamma
    return np.sqrt(var) * ((1 - g) * ss.norm.ppf(1 - 1 / n) + g * ss.norm.ppf(1 - 1 / (n * np.e)))


def ref_mintrl(sr, g3, g4, sr_star=0.0, prob=0.95):
    return 1 + (1 - g3 * sr + (g4 - 1) / 4 * sr**2) * (ss.norm.ppf(prob) / (sr - sr_star)) ** 2


def ref_pbo(m, s):
    t, n = m.shape
    groups = np.array_split(np.arange(t), s)
    logits = []
    for c in itertools.combinations(range(s), s // 2):
        ins = np.concatenate([groups[i] for i in c])
        oos = np.setdiff1d(np.arange(t), ins)
        sr_is = m[ins].mean(0) / m[ins].std(0, ddof=1)
        sr_oos = m[oos].mean(0) / m[oos].std(0, ddof=1)
        w = ss.rankdata(sr_oos)[np.argmax(sr_is)] / (n + 1)
        logits.append(np.log(w / (1 - w)))
    logits = np.array(logits)
    return float(np.mean(logits <= 0)), logits


# ------------------------------------------------------------------------------- normal helpers
def test_norm_cdf_ppf_against_scipy():
    ps = np.concatenate([np.logspace(-300, -1, 300), np.linspace(0.001, 0.999, 999),
                         1 - np.logspace(-15, -1, 50)])
    for p in ps:
        x = ss.norm.ppf(p)
        assert abs(S.norm_ppf(p) - x) <= 1e-12 * max(1.0, abs(x)), p
    for x in np.linspace(-37, 8, 901):
        assert S.norm_cdf(x) == pytest.approx(ss.norm.cdf(x), rel=1e-12, abs=1e-300)
    assert S.norm_ppf(0.5) == 0.0 and S.norm_cdf(0.0) == 0.5
    assert S.norm_ppf(0.0) == -math.inf and S.norm_ppf(1.0) == math.inf
    with pytest.raises(ValueError):
        S.norm_ppf(1.5)


def test_annualise_roundtrip():
    assert S.annualise_sharpe(0.1, 252) == pytest.approx(0.1 * math.sqrt(252))
    assert S.deannualise_sharpe(S.annualise_sharpe(0.07, 52), 52) == pytest.approx(0.07)


# ------------------------------------------------------------------------- published example
def test_dsr_paper_example():
    sr, t, n, var = 2.5 / math.sqrt(250), 1250, 100, 0.5 / 250
    sr_star = S.expected_max_sharpe(n, var)
    assert sr_star == pytest.approx(0.1132, abs=5e-5)
    assert S.annualise_sharpe(sr_star, 250) == pytest.approx(ref_emax(n, 0.5), rel=1e-12)
    trials = np.random.default_rng(0).normal(size=n)  # trial Sharpes with sample variance = var
    trials = (trials - trials.mean()) / trials.std(ddof=1) * math.sqrt(var)
    out = S.deflated_sharpe_ratio(sr, t, -3.0, 10.0, trials)
    assert out.n_trials == n and out.var_trials == pytest.approx(var, rel=1e-12)
    assert out.sr_benchmark == pytest.approx(sr_star, rel=1e-12)
    assert out.dsr == pytest.approx(0.9004, abs=5e-5)
    assert out.dsr == pytest.approx(ref_psr(sr, t, -3.0, 10.0, ref_emax(n, var)), abs=1e-12)


def test_prior_trials_count_in_n_but_not_in_the_variance():
    """Trials looked at outside the run raise N (and so SR*), not the trial variance."""
    sr, t, var = 2.5 / math.sqrt(250), 1250, 0.5 / 250
    trials = np.random.default_rng(1).normal(size=40)
    trials = (trials - trials.mean()) / trials.std(ddof=1) * math.sqrt(var)
    alone = S.deflated_sharpe_ratio(sr, t, -3.0, 10.0, trials)
    more = S.deflated_sharpe_ratio(sr, t, -3.0, 10.0, trials, extra_trials=60)
    assert more.n_trials == 100 and more.var_trials == pytest.approx(alone.var_trials)
    assert more.sr_benchmark == pytest.approx(S.expected_max_sharpe(100, var), rel=1e-12)
    assert more.dsr < alone.dsr
    with pytest.raises(ValueError):
        S.deflated_sharpe_ratio(sr, t, -3.0, 10.0, trials, extra_trials=-1)


def test_expected_max_of_ten_trials_on_one_year():
    # DESIGN §10: ≈ 1.58 annualised for N = 10 zero-skill trials on one year (V[SR] ≈ 1/T).
    emax = S.annualise_sharpe(S.expected_max_sharpe(10, 1 / 252), 252)
    assert emax == pytest.approx(1.575, abs=0.01)


def test_expected_max_against_monte_carlo():
    rng = np.random.default_rng(1)
    for n in (10, 100):
        sim = rng.normal(size=(20000, n)).max(1).mean()
        assert S.expected_max_sharpe(n, 1.0) == pytest.approx(sim, rel=0.03)


# --------------------------------------------------------------- scipy cross-check on real data
@pytest.fixture(scope="module")
def samples() -> list[np.ndarray]:
    close = np.asarray(load_bars(None).close, dtype=np.float64)
    spx = close[1:] / close[:-1] - 1
    rng = np.random.default_rng(2)
    return [spx, spx[:500], spx[2000:2800], 0.0005 + 0.01 * rng.standard_t(4, 1000),
            rng.lognormal(0.0, 0.5, 300) - 1.1]


def test_moments_psr_mintrl_against_scipy(samples):
    for r in samples:
        sr, g3, g4, n = S.moments(r)
        assert n == r.size
        assert sr == pytest.approx(r.mean() / r.std(ddof=1), rel=1e-12)
        assert g3 == pytest.approx(ss.skew(r, bias=True), rel=1e-10)
        assert g4 == pytest.approx(ss.kurtosis(r, fisher=False, bias=True), rel=1e-10)
        for star in (0.0, 0.02, -0.01):
            assert S.probabilistic_sharpe_ratio(sr, n, g3, g4, star) == pytest.approx(
                ref_psr(sr, n, g3, g4, star), abs=1e-12)
            if sr > star:
                for prob in (0.9, 0.95, 0.99):
                    assert S.min_track_record_length(sr, g3, g4, star, prob) == pytest.approx(
                        ref_mintrl(sr, g3, g4, star, prob), rel=1e-10)
        trials = np.random.default_rng(3).normal(0, 0.03, 40)
        out = S.deflated_sharpe_ratio(sr, n, g3, g4, trials)
        want = ref_psr(sr, n, g3, g4, ref_emax(40, trials.var(ddof=1)))
        assert out.dsr == pytest.approx(want, abs=1e-12)


def test_moments_of_a_constant_and_refusals():
    assert S.moments(np.full(20, 0.001)) == (0.0, 0.0, 3.0, 20)
    with pytest.raises(ValueError):
        S.moments([0.1])
    with pytest.raises(ValueError):
        S.probabilistic_sharpe_ratio(0.1, 1, 0.0, 3.0)
    with pytest.raises(ValueError):  # excess kurtosis passed as raw: 1 − 2·0.5 + ... ≤ 0
        S.probabilistic_sharpe_ratio(0.5, 100, 2.0, -1.0)


# -------------------------------------------------------------------------- analytic properties
def test_psr_dsr_mintrl_properties():
    sr, g3, g4 = 0.08, -0.5, 6.0
    assert S.probabilistic_sharpe_ratio(sr, 300, g3, g4, sr) == 0.5
    psrs = [S.probabilistic_sharpe_ratio(sr, n, g3, g4) for n in (10, 50, 250, 1000, 5000)]
    assert all(a < b for a, b in zip(psrs, psrs[1:], strict=False))
    # fatter tails / more negative skew lower the PSR of a positive Sharpe
    assert S.probabilistic_sharpe_ratio(sr, 250, -2.0, 12.0) < S.probabilistic_sharpe_ratio(
        sr, 250, 0.0, 3.0)
    trials = np.random.default_rng(4).normal(0, 0.05, 200)
    dsr = S.deflated_sharpe_ratio(sr, 250, g3, g4, trials)
    assert dsr.sr_benchmark > 0 and dsr.dsr < S.probabilistic_sharpe_ratio(sr, 250, g3, g4)
    one = S.deflated_sharpe_ratio(sr, 250, g3, g4, [sr])
    assert one.sr_benchmark == 0.0 and one.dsr == S.probabilistic_sharpe_ratio(sr, 250, g3, g4)
    emax = [S.expected_max_sharpe(n, 0.01) for n in (2, 5, 10, 100, 1000, 10**6)]
    assert all(a < b for a, b in zip(emax, emax[1:], strict=False))
    assert S.expected_max_sharpe(1, 0.01) == 0.0 and S.expected_max_sharpe(0, 0.01) == 0.0
    for star, prob in ((0.0, 0.95), (0.03, 0.9), (-0.02, 0.99)):
        n = S.min_track_record_length(sr, g3, g4, star, prob)
        assert S.probabilistic_sharpe_ratio(sr, n, g3, g4, star) == pytest.approx(prob, abs=1e-6)
    assert S.min_track_record_length(0.05, 0.0, 3.0, sr_benchmark=0.05) == math.inf
    assert S.min_track_record_length(-0.1, 0.0, 3.0) == math.inf


# ------------------------------------------------------------------------------------------ PBO
def test_pbo_by_hand_two_splits():
    a = [0.01, 0.03, -0.01, -0.03]  # good in the first half, bad in the second
    b = [-0.02, 0.0, 0.02, 0.0]  # the reverse
    # IS = first half → A best, OOS rank 1 of 2 → ω = 1/3 → λ = −ln 2; symmetric for the other
    pbo, logits = S.pbo_cscv_detail(np.array([a, b]).T, n_splits=2)
    assert pbo == 1.0
    np.testing.assert_allclose(logits, [-math.log(2), -math.log(2)], rtol=1e-12)
    c = [0.01, 0.03, 0.01, 0.03]  # better than d in both halves → ω = 2/3 → λ = +ln 2
    d = [-0.02, 0.0, -0.02, 0.0]
    pbo, logits = S.pbo_cscv_detail(np.array([c, d]).T, n_splits=2)
    assert pbo == 0.0
    np.testing.assert_allclose(logits, [math.log(2), math.log(2)], rtol=1e-12)
    # identical trials: the first wins in-sample, ties out-of-sample at rank 1.5 → λ = 0 → counted
    pbo, logits = S.pbo_cscv_detail(np.array([a, a]).T, n_splits=2)
    assert pbo == 1.0 and np.all(logits == 0.0)


@pytest.mark.parametrize(("t", "n", "s"), [(400, 5, 4), (203, 7, 6), (333, 12, 8), (64, 3, 16)])
def test_pbo_matches_brute_force(t, n, s):
    rng = np.random.default_rng(t + n + s)
    m = rng.normal(0.0, 0.01, (t, n)) + rng.normal(0.0, 0.002, n)
    pbo, logits = S.pbo_cscv_detail(m, n_splits=s)
    want_pbo, want_logits = ref_pbo(m, s)
    assert len(logits) == math.comb(s, s // 2)
    np.testing.assert_allclose(logits, want_logits, rtol=1e-9, atol=1e-12)
    assert pbo == want_pbo
    assert S.pbo_cscv(m, n_splits=s) == pbo  # deterministic


def test_pbo_noise_is_near_half_and_a_real_edge_is_near_zero():
    rng = np.random.default_rng(5)
    noise = [S.pbo_cscv(rng.normal(0.0, 0.01, (800, 30)), n_splits=10) for _ in range(4)]
    assert 0.3 <= float(np.mean(noise)) <= 0.7, noise
    m = rng.normal(0.0, 0.01, (1000, 30))
    m[:, 7] += 0.003  # per-period Sharpe ≈ 0.3 (≈ 4.8 annualised) in every period
    assert S.pbo_cscv(m, n_splits=16) <= 0.02


def test_pbo_constant_trial_and_refusals():
    rng = np.random.default_rng(6)
    m = np.column_stack([np.full(200, 1e-4), rng.normal(0, 0.01, (200, 4))])
    pbo, logits = S.pbo_cscv_detail(m, n_splits=4)  # constant trial has Sharpe 0, not 1e14
    assert np.all(np.isfinite(logits)) and 0.0 <= pbo <= 1.0
    ok = rng.normal(size=(40, 3))
    for bad, s in ((ok, 3), (ok, 0), (ok[:7], 8), (ok[:, :1], 4), (ok[:, 0], 4)):
        with pytest.raises(ValueError):
            S.pbo_cscv(bad, n_splits=s)
    ok[3, 1] = np.nan
    with pytest.raises(ValueError):
        S.pbo_cscv(ok, n_splits=4)


# ------------------------------------------------------------------ SPA on the stationary bootstrap
def test_stationary_bootstrap_means_of_rotations_and_of_iid_draws():
    """A block far longer than the series makes every resample a rotation (the mean itself);
    block 1 is the i.i.d. bootstrap: the resampled means' variance is var(x)/n."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 2))
    rotation = S.stationary_bootstrap_means(x, 20, 1e15, rng)
    np.testing.assert_allclose(rotation, np.broadcast_to(x.mean(0), (20, 2)), rtol=1e-12)
    iid = S.stationary_bootstrap_means(x, 8000, 1, rng)
    np.testing.assert_allclose(iid.var(0) / (x.var(0) / 50), 1.0, atol=0.06)
    with pytest.raises(ValueError, match="block=0.5"):
        S.stationary_bootstrap_means(x, 5, 0.5, rng)


def test_the_resampled_means_vary_as_the_long_run_variance_says():
    """Politis & Romano's kernel is the stationary bootstrap's own variance of √n·x̄*: on an
    autocorrelated series the resampled means (drawn in chunks: 4,000 × 600 indices) agree
    with `bootstrap_long_run_variance` to sampling error (~2 %), for short and long blocks."""
    rng = np.random.default_rng(1)
    e = rng.normal(size=600)
    x = np.convolve(e, np.ones(4), "valid")[:, None]
    n = x.shape[0]
    for block in (2.0, 25.0):
        means = S.stationary_bootstrap_means(x, 4000, block, np.random.default_rng(2))
        ratio = n * means[:, 0].var() / S.bootstrap_long_run_variance(x, block)[0]
        assert abs(ratio - 1) < 0.08, (block, ratio)


def test_long_run_variance_is_the_kernel_sum_and_the_ar1_limit():
    rng = np.random.default_rng(2)
    d = rng.normal(size=(60, 2))
    n, q = 60, 1 / 7
    x = d - d.mean(0)
    brute = np.array([
        sum(((1 - i / n) * (1 - q) ** i + (i / n) * (1 - q) ** (n - i)) * (x[:n - i, k] @ x[i:, k])
            / n * (1 if i == 0 else 2) for i in range(n)) for k in range(2)])
    np.testing.assert_allclose(S.bootstrap_long_run_variance(d, 7), brute, rtol=1e-10)
    np.testing.assert_allclose(S.bootstrap_long_run_variance(d, 1), x.var(0), rtol=1e-12)
    e = rng.normal(size=40_000)
    ar = np.empty_like(e)
    ar[0] = e[0]
    for t in range(1, e.size):
        ar[t] = 0.5 * ar[t - 1] + e[t]
    lrv = S.bootstrap_long_run_variance(ar[:, None], 200)[0]
    assert abs(lrv / 4.0 - 1) < 0.15  # σ²/(1 − φ)² = 4


def test_spa_one_model_is_the_bootstrap_t_test():
    """With one model the SPA p is the bootstrap's one-sided p of the mean difference, close to
    1 − Φ(√n·d̄/ω̂) for i.i.d. differences; the three re-centrings agree when d̄ > 0."""
    rng = np.random.default_rng(3)
    bench = rng.normal(0.0, 0.01, 1000)
    model = bench + rng.normal(0.0005, 0.01, 1000)
    res = S.spa_test(bench, model, reps=4000, block=1, seed=0)
    assert res.statistic > 0 and res.lower == res.consistent == res.upper
    assert abs(res.consistent - (1 - ss.norm.cdf(res.statistic))) < 0.02
    assert S.spa_test(bench, model, reps=4000, block=1, seed=0) == res  # deterministic


def test_spa_p_values_are_ordered_and_equal_models_get_one():
    rng = np.random.default_rng(4)
    bench = rng.normal(0, 1, 300)
    for shift in (-0.3, -0.05, 0.0, 0.05):
        models = bench[:, None] + rng.normal(0, 1, (300, 3)) + np.array([shift, -0.2, -1.0])
        r = S.spa_test(bench, models, reps=300, seed=1)
        assert 0 <= r.lower <= r.consistent <= r.upper <= 1
    for worse in (bench, bench - 0.5 + rng.normal(0, 1, 300)):  # no model ahead in sample: 1
        r = S.spa_test(bench, worse, reps=100, seed=0)
        assert (r.lower, r.consistent, r.upper, r.statistic) == (1.0, 1.0, 1.0, 0.0)
    skilled = S.spa_test(bench, np.stack([bench + 0.3 + rng.normal(0, 0.5, 300),
                                          bench - 1.0], axis=1), reps=300, seed=0)
    assert skilled.consistent == 0.0


def test_spa_size_under_the_null():
    """On zero-mean differences p is about uniform: p < 0.1 in about 10 % of 200 data sets."""
    rng = np.random.default_rng(5)
    ps = [S.spa_test(np.zeros(250), rng.normal(0, 1, 250), reps=200, seed=s).consistent
          for s in range(200)]
    assert 0.04 <= np.mean(np.array(ps) < 0.1) <= 0.17


@pytest.mark.parametrize(("bench", "models", "match"), [
    (np.zeros(5), np.zeros(5), "n >= 8"),
    (np.zeros(20), np.zeros((19, 2)), "n >= 8"),
    (np.zeros(20), np.r_[np.zeros(19), np.nan], "NaN"),
])
def test_spa_refuses_bad_input(bench, models, match):
    with pytest.raises(ValueError, match=match):
        S.spa_test(bench, models)


def test_spa_on_shared_resamples_is_the_same_test():
    rng = np.random.default_rng(6)
    bench, model = rng.normal(0, 1, (2, 100))
    means = S.stationary_bootstrap_means(np.column_stack([bench, model]), 50, 10,
                                         np.random.default_rng(3))
    assert S.spa_test(bench, model, 50, 10, seed=3) == S.spa_test(bench, model, block=10,
                                                                    means=means)
    with pytest.raises(ValueError, match="not of"):
        S.spa_test(bench, np.column_stack([model, model]), block=10, means=means)


def test_constant_differences_are_certain_not_random():
    """A model ahead of the benchmark by the same amount on every bar beats it (p = 0), also
    beside a noisy model; rounding-level differences are no lead (p = 1)."""
    rng = np.random.default_rng(7)
    bench = rng.normal(0, 0.01, 300)
    noisy = bench + rng.normal(0, 0.01, 300)
    ahead = S.spa_test(bench, np.column_stack([noisy, bench + 1e-4]), reps=200)
    assert (ahead.consistent, ahead.statistic) == (0.0, math.inf)
    rounding = S.spa_test(bench, bench + 1e-18 * rng.normal(size=300), reps=200)
    assert rounding.consistent == 1.0

