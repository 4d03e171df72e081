"""rl_trader.evaluation.metrics against empyrical-reloaded on real S&P 500 returns, plus hand
cases."""

from __future__ import annotations

import json
import math

import empyrical
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl_trader.data import load_bars
from rl_trader.evaluation import metrics as M

TOL = 1e-10


@pytest.fixture(scope="module")
def spx() -> tuple[np.ndarray, float]:
    bars = load_bars(None)
    close = np.asarray(bars.close, dtype=np.float64)
    return close[1:] / close[:-1] - 1.0, bars.periods_per_year()


# whole sample, the 2008 crash, a calm bull stretch, a short window, the first 2 years
RANGES = [slice(None), slice(2200, 2600), slice(3500, 4500), slice(100, 160), slice(0, 504)]


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TOL, abs_tol=TOL)


@pytest.mark.parametrize("sl", RANGES)
def test_against_empyrical(spx, sl):
    rets, ppy = spx
    r = rets[sl]
    assert ppy == 252.0
    ann = {"annualization": ppy}
    cases = {
        "sharpe": (float(M.sharpe(r, ppy)), empyrical.sharpe_ratio(r, **ann)),
        "sortino": (M.sortino(r, ppy), empyrical.sortino_ratio(r, required_return=0, **ann)),
        "max_drawdown": (M.max_drawdown(r), empyrical.max_drawdown(r)),
        "cagr": (M.cagr(r, ppy), empyrical.annual_return(r, **ann)),
        "cagr_alias": (M.cagr(r, ppy), empyrical.cagr(r, **ann)),
        "volatility": (M.annual_volatility(r, ppy), empyrical.annual_volatility(r, **ann)),
        "calmar": (M.calmar(r, ppy), empyrical.calmar_ratio(r, **ann)),
    }
    for name, (ours, ref) in cases.items():
        assert np.isfinite(ref), name
        assert close(ours, float(ref)), (name, ours, ref)


def test_a_strategy_with_flat_bars_matches_empyrical(spx):
    """Returns of a long/flat rule (zeros while flat) and a long/short rule, net of a cost."""
    rets, ppy = spx
    r = rets[1000:2000]
    pos = np.where(np.arange(r.size) % 7 < 4, 1.0, 0.0)
    for p in (pos, 2 * pos - 1):
        strat = p * r - 0.0005 * np.abs(np.diff(p, prepend=0.0))
        assert close(float(M.sharpe(strat, ppy)), empyrical.sharpe_ratio(strat, annualization=ppy))
        assert close(M.sortino(strat, ppy), empyrical.sortino_ratio(strat, annualization=ppy))
        assert close(M.max_drawdown(strat), empyrical.max_drawdown(strat))
        assert close(M.calmar(strat, ppy), empyrical.calmar_ratio(strat, annualization=ppy))


def test_sharpe_in_jit_matches_numpy(spx):
    rets, ppy = spx
    f = jax.jit(lambda x: M.sharpe(x, ppy))
    for sl in RANGES:
        r = rets[sl]
        assert abs(float(f(jnp.asarray(r, dtype=jnp.float32))) - float(M.sharpe(r, ppy))) < 1e-5
    batch = np.stack([rets[:500], rets[500:1000]])  # reduces over the last axis
    np.testing.assert_allclose(np.asarray(f(jnp.asarray(batch, jnp.float32))),
                               [M.sharpe(batch[0], ppy), M.sharpe(batch[1], ppy)], atol=1e-5)


def test_zero_variance_and_short_inputs():
    for r in (np.zeros(50), np.full(50, 0.001), np.full(7, 1e-3 / 3)):
        assert float(M.sharpe(r, 252)) == 0.0
        assert float(jax.jit(lambda x: M.sharpe(x, 252))(jnp.asarray(r, jnp.float32))) == 0.0
    assert float(M.sharpe(np.array([0.01]), 252)) == 0.0
    assert M.sortino(np.full(10, 0.001), 252) == 0.0  # no downside: 0 by convention
    assert M.calmar(np.full(10, 0.001), 252) == 0.0  # no drawdown: 0 by convention
    assert M.max_drawdown(np.full(10, 0.001)) == 0.0
    assert M.annual_volatility(np.array([0.1]), 252) == 0.0
    assert M.cagr(np.array([]), 252) == 0.0 and M.cagr(np.array([-1.0, 0.5]), 252) == -1.0


def test_unit_volatility_has_the_per_period_sharpe_as_its_mean(spx):
    r = spx[0][:500]
    assert M.unit_volatility(r).mean() == pytest.approx(float(M.sharpe(r, 1.0)), rel=1e-12)
    assert np.std(M.unit_volatility(r), ddof=1) == pytest.approx(1.0, rel=1e-12)
    for constant in (np.full(9, 0.1), np.zeros(9), np.ones(1)):  # sharpe 0: no spread
        np.testing.assert_array_equal(M.unit_volatility(constant), np.zeros_like(constant))


def test_drawdown_and_cagr_by_hand():
    r = np.array([0.10, -0.20, 0.05, 0.50, -0.10])
    # equity 1, 1.1, 0.88, 0.924, 1.386, 1.2474: worst 0.88 / 1.1 − 1 = −0.2
    assert M.max_drawdown(r) == pytest.approx(-0.2, abs=1e-15)
    assert M.max_drawdown(np.array([-0.1, 0.05])) == pytest.approx(-0.1)  # start counts as peak
    assert M.cagr(r, 5) == pytest.approx(1.2474 - 1)  # 5 periods = exactly one year
    assert M.cagr(np.array([0.21, 0.0]), 1) == pytest.approx(1.21**0.5 - 1)
    assert M.calmar(r, 5) == pytest.approx(0.2474 / 0.2)


def test_hit_rate_exposure_trades_turnover_by_hand():
    pos = np.array([0.0, 1.0, 1.0, -1.0, -1.0, 0.0, 0.5, 0.5])
    ret = np.array([0.3, 0.01, -0.02, 0.03, 0.0, -0.5, 0.02, -0.01])
    # in market on bars 1,2,3,4,6,7 → positive returns on 1,3,6 → 3/6
    assert M.hit_rate(ret, pos) == 0.5
    assert M.hit_rate(ret, np.zeros(8)) == 0.0
    assert M.exposure(pos) == pytest.approx(5.0 / 8.0)
    # 0→0 (no), 0→1, 1→1, 1→−1, −1→−1, −1→0, 0→0.5, 0.5→0.5: 4 trades
    assert M.n_trades(pos) == 4
    assert M.n_trades(np.array([1.0, 1.0])) == 1  # the opening trade from flat counts
    assert M.n_trades(np.zeros(5)) == 0 and M.n_trades(np.array([])) == 0
    traded = np.abs(np.diff(pos, prepend=0.0))  # [0, 1, 0, 2, 0, 1, .5, 0] → mean 0.5625
    assert M.turnover(traded, 252) == pytest.approx(0.5625 * 252)
    assert M.turnover(np.array([]), 252) == 0.0
    with pytest.raises(ValueError):
        M.hit_rate(ret, pos[:-1])


def test_performance_dict(spx):
    rets, ppy = spx
    r = rets[:1000]
    pos = np.ones_like(r)
    perf = M.performance(r, pos, np.abs(np.diff(pos, prepend=0.0)), ppy)
    assert tuple(perf) == M.PERFORMANCE_KEYS == (
        "sharpe", "sortino", "max_drawdown", "calmar", "cagr", "volatility", "turnover",
        "hit_rate", "exposure", "n_trades")
    assert all(type(v) is float and math.isfinite(v) for v in perf.values())
    json.dumps(perf, allow_nan=False)
    assert perf["sharpe"] == float(M.sharpe(r, ppy))
    assert perf["exposure"] == 1.0 and perf["n_trades"] == 1.0
    assert perf["turnover"] == pytest.approx(ppy / 1000)
    assert perf["hit_rate"] == pytest.approx(np.mean(r > 0))
    flat = M.performance(np.zeros(30), np.zeros(30), np.zeros(30), ppy)
    assert all(v == 0.0 for v in flat.values())
    json.dumps(flat, allow_nan=False)
    with pytest.raises(ValueError):
        M.performance(np.array([0.1, np.nan]), np.ones(2), np.zeros(2), ppy)


def test_geometric_mean_positive():
    assert M.geometric_mean_positive([1.0, 4.0]) == pytest.approx(2.0)
    assert M.geometric_mean_positive([1.0, -1.0]) is None
    assert M.geometric_mean_positive([]) is None


def test_sharpe_of_a_padded_series_counts_only_the_valid_returns():
    rng = np.random.default_rng(3)
    r = rng.normal(0.001, 0.01, 300)
    padded = np.concatenate([r, np.full(84, r[-1])])  # edge padding, as a shape bucket's
    want = M.sharpe(r, 252)
    np.testing.assert_allclose(M.sharpe(padded, 252, valid=300), want, rtol=1e-12)
    traced = jax.jit(lambda x, n: M.sharpe(x, 252, valid=n))(jnp.asarray(padded, jnp.float32), 300)
    np.testing.assert_allclose(traced, want, rtol=1e-4)
    assert M.sharpe(np.r_[1.0, 2.0, 3.0], 252, valid=1) == 0.0  # < 2 valid returns
    assert M.sharpe(np.r_[0.01, 0.01, 5.0], 252, valid=2) == 0.0  # constant where valid


def test_information_coefficient_is_pearson_on_the_host_and_under_jit():
    rng = np.random.default_rng(4)
    y = rng.normal(size=200)
    f = 0.3 * y + rng.normal(size=200)
    want = np.corrcoef(f, y)[0, 1]
    np.testing.assert_allclose(M.information_coefficient(f, y), want, rtol=1e-12)
    pad = np.r_[f, rng.normal(size=56) * 100], np.r_[y, rng.normal(size=56)]
    np.testing.assert_allclose(M.information_coefficient(*pad, valid=200), want, rtol=1e-12)
    traced = jax.jit(lambda a, b, n: M.information_coefficient(a, b, n))(
        jnp.asarray(pad[0], jnp.float32), jnp.asarray(pad[1], jnp.float32), 200)
    np.testing.assert_allclose(traced, want, rtol=1e-4)
    assert np.isnan(M.information_coefficient(np.full(5, 0.1), y[:5]))  # constant forecast
    assert np.isnan(M.information_coefficient(f[:5], np.r_[y[:4], 9.0], valid=1))


def test_prior_figures_by_hand():
    """p = [0.5, 1, 1], π = [0.5, 0.5, 0.75]: residuals 0, .5, .25 (mean |u| 0.25); target
    moves .5, .5, 0 and prior moves .5, 0, .25 from flat: (1/3 − 0.25)·252 = 21 a year added."""
    got = M.prior_figures(np.array([0.5, 1.0, 1.0]), np.array([0.5, 0.5, 0.75]), "vol_target",
                          252)
    assert got["prior"] == "vol_target"
    assert got["prior_mean"] == pytest.approx(1.75 / 3)
    assert got["mean_abs_residual"] == pytest.approx(0.25)
    assert got["turnover_added"] == pytest.approx((1.0 / 3 - 0.25) * 252)
    with pytest.raises(ValueError, match="differ in length"):
        M.prior_figures(np.zeros(2), np.zeros(3), "flat", 252)
