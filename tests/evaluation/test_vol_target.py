"""Volatility targeting (the `vol_target` baseline) by hand and causal."""


import jax.numpy as jnp
import numpy as np

from rl_trader.baselines.rules import vol_target_positions
from rl_trader.evaluation.vol_target import VOL_WINDOW, trailing_vol, vol_target_scale


def test_vol_target_positions_by_hand_and_causal():
    rng = np.random.default_rng(2)
    n = 30
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n) * np.linspace(1, 3, n)))
    rho = np.diff(np.log(close))  # rho[s - 1] = log(C_s / C_{s−1})
    vol = np.full(n, np.nan)
    for t in range(VOL_WINDOW, n):
        vol[t] = np.std(rho[t - VOL_WINDOW:t], ddof=1)
    np.testing.assert_allclose(np.asarray(trailing_vol(jnp.asarray(close))), vol, rtol=1e-4)
    train = jnp.asarray([0, 26])
    sigma_star = np.median(vol[VOL_WINDOW:26])
    want = np.where(np.isnan(vol), 0.0, np.minimum(1.0, sigma_star / vol))
    np.testing.assert_allclose(float(vol_target_scale(jnp.asarray(close), train)), sigma_star,
                               rtol=1e-4)
    got = np.asarray(vol_target_positions(jnp.asarray(close), train))
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert (want[VOL_WINDOW:] < 1).any() and (want[VOL_WINDOW:] == 1).any()
    later = close.copy()
    later[27:] *= np.array([0.5, 2.0, 1.5])  # perturb the future of bar 26
    moved = np.asarray(vol_target_positions(jnp.asarray(later), train))
    np.testing.assert_array_equal(moved[:27], got[:27])
    assert not np.allclose(moved[27:], got[27:])
