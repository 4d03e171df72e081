"""Volatility targeting's position (the `vol_target` baseline and the agent's prior) by hand
and causal."""

import numpy as np

from rl_trader.data.prior import (
    RATIO_MAX,
    VOL_WINDOW,
    trailing_vol,
    vol_ratio,
    vol_target_fraction,
    vol_target_positions,
    vol_target_scale,
)


def test_vol_target_positions_by_hand_and_causal():
    rng = np.random.default_rng(2)
    n = 30
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n) * np.linspace(1, 3, n)))
    rho = np.diff(np.log(close))  # rho[s - 1] = log(C_s / C_{s−1})
    vol = np.full(n, np.nan)
    for t in range(VOL_WINDOW, n):
        vol[t] = np.std(rho[t - VOL_WINDOW:t], ddof=1)
    np.testing.assert_allclose(trailing_vol(close), vol, rtol=1e-12)
    sigma_star = np.median(vol[VOL_WINDOW:26])
    want = np.where(np.isnan(vol), 0.0, np.minimum(1.0, sigma_star / vol))
    assert vol_target_scale(trailing_vol(close), 0, 26) == sigma_star
    got, star = vol_target_positions(close, 0, 26)
    assert star == sigma_star
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert (want[VOL_WINDOW:] < 1).any() and (want[VOL_WINDOW:] == 1).any()
    later = close.copy()
    later[27:] *= np.array([0.5, 2.0, 1.5])  # perturb the future of bar 26
    moved, _ = vol_target_positions(later, 0, 26)
    np.testing.assert_array_equal(moved[:27], got[:27])
    assert not np.allclose(moved[27:], got[27:])


def test_undefined_and_zero_volatility():
    assert np.isnan(vol_target_scale(np.full(5, np.nan), 0, 5))
    np.testing.assert_array_equal(vol_target_fraction(np.array([np.nan, 0.0, 0.02]), 0.01),
                                  [0.0, 1.0, 0.5])
    np.testing.assert_array_equal(vol_target_fraction(np.array([0.0]), 0.0), [0.0])
    np.testing.assert_array_equal(trailing_vol(np.ones(VOL_WINDOW)), np.full(VOL_WINDOW, np.nan))


def test_the_ratio_gives_vol_targets_position_and_a_scaled_prior():
    vol = np.array([np.nan, 0.0, 0.02, 0.01, 0.004])
    ratio = vol_ratio(vol, 0.01)
    np.testing.assert_array_equal(ratio, [0.0, RATIO_MAX, 0.5, 1.0, 2.5])
    np.testing.assert_array_equal(np.minimum(1.0, ratio), vol_target_fraction(vol, 0.01))
    np.testing.assert_array_equal(np.minimum(1.0, 0.5 * ratio), [0.0, 1.0, 0.25, 0.5, 1.0])
