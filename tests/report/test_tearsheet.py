"""Tear-sheet statistics against small hand-computed cases."""

import math

import numpy as np
import pytest

from rl_trader.evaluation.metrics import annual_volatility, max_drawdown, sharpe
from rl_trader.report.tearsheet import (
    Drawdown,
    band,
    beta_correlation,
    drawdown_episodes,
    monthly_table,
    period_returns,
    rolling_sharpe,
    rolling_volatility,
)

R = np.array([0.01, 0.02, 0.03, -0.01])


def test_rolling_sharpe_by_hand():
    # windows of 2: means .015 .025 .01, stds (ddof 1) .01/√2 .01/√2 .04/√2; ppy 4 doubles them
    want = [math.nan, 0.015 / (0.01 / math.sqrt(2)), 0.025 / (0.01 / math.sqrt(2)),
            0.01 / (0.04 / math.sqrt(2))]
    np.testing.assert_allclose(rolling_sharpe(R, 2, 1.0), want)
    np.testing.assert_allclose(rolling_sharpe(R, 2, 4.0), 2 * np.array(want))
    assert np.isnan(rolling_sharpe(R, 5, 1.0)).all()
    np.testing.assert_allclose(rolling_sharpe(R, 4, 1.0)[-1], sharpe(R, 1.0))


def test_rolling_volatility_by_hand_and_as_metrics():
    np.testing.assert_allclose(rolling_volatility(R, 2, 4.0),
                               [math.nan, 0.02 / math.sqrt(2), 0.02 / math.sqrt(2),
                                0.08 / math.sqrt(2)])
    r = np.random.default_rng(0).normal(0, 0.01, 50)
    got = rolling_volatility(r, 10, 252.0)
    assert np.isnan(got[:9]).all()
    np.testing.assert_allclose(got[9:], [annual_volatility(r[i - 9:i + 1], 252.0)
                                         for i in range(9, 50)])


DATES = np.array(["2020-01-30", "2020-01-31", "2020-02-03", "2021-03-01"], "datetime64[ns]")
RET = np.array([0.1, -0.1, 0.05, 0.2])


def test_period_returns_compound_within_the_period():
    months, rets = period_returns(RET, DATES, "M")
    assert months.astype(str).tolist() == ["2020-01", "2020-02", "2021-03"]
    np.testing.assert_allclose(rets, [1.1 * 0.9 - 1, 0.05, 0.2])
    years, rets = period_returns(RET, DATES, "Y")
    assert years.astype(str).tolist() == ["2020", "2021"]
    np.testing.assert_allclose(rets, [1.1 * 0.9 * 1.05 - 1, 0.2])


def test_monthly_table_places_months_and_leaves_gaps_nan():
    years, table = monthly_table(RET, DATES)
    assert years.tolist() == [2020, 2021] and table.shape == (2, 12)
    np.testing.assert_allclose([table[0, 0], table[0, 1], table[1, 2]], [-0.01, 0.05, 0.2])
    assert np.isfinite(table).sum() == 3


def test_period_returns_refuse_bad_dates():
    with pytest.raises(ValueError, match="increasing"):
        period_returns(RET, DATES[::-1], "M")
    with pytest.raises(ValueError, match="differ in length"):
        period_returns(RET[:3], DATES, "M")


def test_drawdown_episodes_by_hand():
    # equity .9 .9 1.08 .54 .81 .891: under water on bars 0–1 (from the start, back at 2) and
    # 3–5 (from the high at bar 2, not recovered)
    r = [-0.1, 0.0, 0.2, -0.5, 0.5, 0.1]
    deep, shallow = drawdown_episodes(r)
    assert deep == Drawdown(peak=2, trough=3, recovery=None, depth=pytest.approx(-0.5), bars=3)
    assert shallow == Drawdown(peak=-1, trough=0, recovery=2, depth=pytest.approx(-0.1), bars=3)
    assert drawdown_episodes(r, top=1) == [deep]
    assert drawdown_episodes([0.01, 0.02]) == []
    x = np.random.default_rng(1).normal(0, 0.02, 500)
    eps = drawdown_episodes(x, top=50)
    assert eps[0].depth == pytest.approx(max_drawdown(x))
    assert all(a.depth <= b.depth for a, b in zip(eps, eps[1:], strict=False))


def test_beta_and_correlation_by_hand():
    b = np.array([0.01, 0.02, 0.03, 0.04])
    assert beta_correlation(2 * b + 0.001, b) == pytest.approx((2.0, 1.0))
    assert beta_correlation(-b, b) == pytest.approx((-1.0, -1.0))
    # r ⟂ b: cov 0
    assert beta_correlation([1.0, -1.0, -1.0, 1.0], [1.0, 1.0, -1.0, -1.0]) == (0.0, 0.0)
    beta, rho = beta_correlation(b, np.full(4, 0.01))
    assert math.isnan(beta) and math.isnan(rho)


def test_band_is_median_and_percentiles():
    mid, lo, hi = band([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    np.testing.assert_allclose(mid, [3.0, 4.0])
    np.testing.assert_allclose(lo, [1.2, 2.2])
    np.testing.assert_allclose(hi, [4.8, 5.8])
