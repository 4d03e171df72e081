"""Tests for rl_trader.data.features: causality, the train-only normaliser, shapes, hand checks."""

from __future__ import annotations

import numpy as np
import pytest

from rl_trader.data.features import (
    compute_features,
    fit_normaliser,
    next_bar_log_return,
    normalise,
)
from rl_trader.errors import InputError


def make_ohlcv(n: int, rng: np.random.Generator, start_price: float = 100.0) -> tuple:
    """A valid random-walk OHLCV series: positive prices, high >= max(o, c), low <= min(o, c)."""
    close = start_price * np.exp(np.cumsum(rng.normal(0.0, 0.01, n)))
    prev = np.concatenate([[start_price], close[:-1]])
    open_ = prev * np.exp(rng.normal(0.0, 0.003, n))
    return _bars_from(open_, close, rng)


def _bars_from(open_: np.ndarray, close: np.ndarray, rng: np.random.Generator) -> tuple:
    n = len(close)
    high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0.0, 0.005, n)))
    low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0.0, 0.005, n)))
    volume = rng.lognormal(15.0, 0.5, n) * (rng.random(n) > 0.05)  # some zero-volume bars
    return open_, high, low, close, volume


def _perturb_after(bars: tuple, t: int, rng: np.random.Generator) -> tuple:
    """Replace every bar > t by fresh random (still valid) bars; bars <= t untouched."""
    o, h, lo, c, v = (a.copy() for a in bars)
    m = len(c) - t - 1
    if m == 0:
        return o, h, lo, c, v
    scale = np.exp(rng.normal(0.0, 0.5))
    c2 = c[t] * scale * np.exp(np.cumsum(rng.normal(0.0, 0.03, m)))
    o2 = c2 * np.exp(rng.normal(0.0, 0.02, m))
    o2n, h2, l2, c2n, v2 = _bars_from(o2, c2, rng)
    o[t + 1:], h[t + 1:], lo[t + 1:], c[t + 1:] = o2n, h2, l2, c2n
    v[t + 1:] = v2 * np.exp(rng.normal(0.0, 1.0))
    return o, h, lo, c, v


def test_features_are_causal_under_perturbation_of_future_bars():
    rng = np.random.default_rng(0)
    bars = make_ohlcv(800, rng)
    base = compute_features(*bars).values
    ts = rng.choice(np.arange(0, 799), size=20, replace=False)
    ts = np.concatenate([ts, [0, 250, 251, 252, 798]])
    for t in ts:
        pert = _perturb_after(bars, int(t), rng)
        assert not np.array_equal(pert[3], bars[3]) or t == 799
        out = compute_features(*pert).values
        np.testing.assert_array_equal(out[: t + 1], base[: t + 1], err_msg=f"t={t}")
        if t >= 260:  # the perturbation is visible after t (so the test can fail)
            assert not np.array_equal(out[t + 1:], base[t + 1:])


def test_shapes_dtypes_names_and_finite_even_with_degenerate_bars():
    rng = np.random.default_rng(1)
    o, h, lo, c, v = make_ohlcv(600, rng)
    h[100:130] = lo[100:130] = o[100:130] = c[100:130] = 50.0  # flat bars: high == low
    v[:] = 0.0  # no volume at all
    f = compute_features(o, h, lo, c, v)
    n_feat = f.values.shape[1]
    assert f.values.shape == (600, n_feat) and f.values.dtype == np.float32
    assert 16 <= n_feat <= 24 and len(f.names) == n_feat == len(set(f.names))
    assert all(n.replace("_", "").isalnum() and n == n.lower() for n in f.names)
    assert np.all(np.isfinite(f.values))
    assert np.all(f.values[: f.first_valid] == 0.0)
    assert f.first_valid >= 200
    np.testing.assert_array_equal(f.values[:, f.names.index("volume_z")], 0.0)
    assert np.all(np.abs(f.values[f.first_valid:, f.names.index("rsi_14")]) <= 1.0)
    assert np.all(f.values[f.first_valid:, f.names.index("drawdown")] <= 0.0)


def test_short_series_is_all_zero_and_finite():
    o, h, lo, c, v = make_ohlcv(30, np.random.default_rng(2))
    f = compute_features(o, h, lo, c, v)
    assert f.values.shape[0] == 30 and np.all(f.values == 0.0)


def test_bad_inputs_are_refused():
    o, h, lo, c, v = make_ohlcv(50, np.random.default_rng(3))
    with pytest.raises(InputError, match="close"):
        compute_features(o, h, lo, np.where(np.arange(50) == 7, -1.0, c), v)
    with pytest.raises(InputError, match="volume"):
        compute_features(o, h, lo, c, -v)
    with pytest.raises(InputError, match="high"):
        compute_features(o, h[:-1], lo, c, v)


def test_hand_computed_ret_1_close_loc_and_gap():
    n = 260
    c = np.full(n, 100.0)
    o, h, lo, v = c.copy(), c.copy(), c.copy(), np.ones(n)
    t = n - 2  # a bar past the warm-up
    o[t], h[t], lo[t], c[t] = 101.0, 104.0, 99.0, 103.0
    o[t + 1], h[t + 1], lo[t + 1], c[t + 1] = 102.0, 102.0, 102.0, 102.0  # high == low
    f = compute_features(o, h, lo, c, v)
    assert f.first_valid <= t
    col = {name: f.values[:, i] for i, name in enumerate(f.names)}
    np.testing.assert_allclose(col["ret_1"][t], np.log(103.0 / 100.0), rtol=1e-6)
    np.testing.assert_allclose(col["ret_1"][t + 1], np.log(102.0 / 103.0), rtol=1e-6)
    np.testing.assert_allclose(col["close_loc"][t], (103.0 - 99.0) / (104.0 - 99.0), rtol=1e-6)
    assert col["close_loc"][t + 1] == 0.5
    np.testing.assert_allclose(col["gap"][t], np.log(101.0 / 100.0), rtol=1e-6)
    np.testing.assert_allclose(col["gap"][t + 1], np.log(102.0 / 103.0), rtol=1e-6)
    np.testing.assert_allclose(col["range"][t], np.log(104.0 / 99.0), rtol=1e-6)
    assert col["ret_1"][t - 1] == 0.0 and col["vol_5"][t - 1] == 0.0


def test_normaliser_uses_only_the_train_rows():
    rng = np.random.default_rng(4)
    x = rng.normal(3.0, 2.0, size=(500, 6)).astype(np.float32)
    x[:, 5] = 7.0  # a constant feature
    start, end = 100, 300
    norm = fit_normaliser(x, start, end)
    assert norm.mean.dtype == np.float32 and norm.std.dtype == np.float32
    assert norm.mean.shape == norm.std.shape == (6,)
    y = x.copy()
    y[:start] = rng.normal(50.0, 9.0, size=(start, 6))
    y[end:] = rng.normal(-50.0, 9.0, size=(500 - end, 6))
    norm2 = fit_normaliser(y, start, end)
    np.testing.assert_array_equal(norm2.mean, norm.mean)
    np.testing.assert_array_equal(norm2.std, norm.std)
    z = x.copy()
    z[start + 10, :5] += 10.0  # inside the train rows: stats change
    norm3 = fit_normaliser(z, start, end)
    assert np.all(norm3.mean[:5] != norm.mean[:5]) and np.all(norm3.std[:5] != norm.std[:5])
    assert norm.std[5] == 1.0 and norm.mean[5] == 7.0  # constant: std 1, normalises to 0

    out = normalise(x, norm, clip=100.0)
    assert out.dtype == np.float32 and out.shape == x.shape
    np.testing.assert_allclose(out[start:end, :5].mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(out[start:end, :5].std(axis=0), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(out[:, 5], 0.0)
    clipped = normalise(y, norm, clip=2.0)
    assert clipped.max() == 2.0 and clipped.min() == -2.0
    with pytest.raises(ValueError):
        fit_normaliser(x, 300, 300)


def test_next_bar_log_return():
    c = np.array([100.0, 110.0, 99.0, 99.0])
    r = next_bar_log_return(c)
    assert r.dtype == np.float32 and r.shape == (4,)
    np.testing.assert_allclose(r, [np.log(1.1), np.log(99 / 110), 0.0, 0.0], rtol=1e-6)
