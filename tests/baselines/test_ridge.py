"""The ridge baseline: closed form, a planted signal, a penalty chosen without the test block."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from rl_trader import env
from rl_trader.baselines.ridge import RIDGE_ALPHAS, fit_ridge, ridge_solve
from rl_trader.baselines.suite import baseline_rollouts
from rl_trader.evaluation.metrics import sharpe
from rl_trader.evaluation.rollout import decision_targets
from rl_trader.run.prepare import prepare
from rl_trader.run.run_state import forecast_ic
from tests.helpers import tiny_config


def _fold(cfg, k=0):
    prep = prepare(cfg)
    f = prep.folds[k]
    data = prep.fold_data(k)
    return prep, f, data


def test_ridge_closed_form_matches_lstsq():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3))
    y = x @ np.array([0.5, -1.0, 0.2]) + 0.3 + 0.1 * rng.normal(size=40)
    ones = np.ones(40)
    beta, b = ridge_solve(jnp.asarray(x), jnp.asarray(y), jnp.asarray(ones), jnp.float32(0.0))
    want = np.linalg.lstsq(np.column_stack([ones, x]), y, rcond=None)[0]
    np.testing.assert_allclose([float(b), *np.asarray(beta)], want, rtol=1e-4, atol=1e-5)
    # α > 0 on a subset of rows: the augmented least-squares problem on the centred rows
    w = (np.arange(40) % 3 != 0).astype(float)
    alpha = 7.0
    xs, ys = x[w == 1], y[w == 1]
    xc, yc = xs - xs.mean(0), ys - ys.mean()
    want_beta = np.linalg.lstsq(np.vstack([xc, np.sqrt(alpha) * np.eye(3)]),
                                np.concatenate([yc, np.zeros(3)]), rcond=None)[0]
    beta, b = ridge_solve(jnp.asarray(x), jnp.asarray(y), jnp.asarray(w), jnp.float32(alpha))
    np.testing.assert_allclose(np.asarray(beta), want_beta, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(float(b), ys.mean() - xs.mean(0) @ want_beta, rtol=1e-4)


def test_ridge_recovers_a_planted_signal_and_both_stay_within_one_equity():
    cfg = tiny_config()
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data,
                                                            path="synthetic:ar1_strong:1200:1"))
    _, f, data = _fold(cfg)
    val_len, test_len = f.val[1] - f.val[0], f.test[1] - f.test[0]
    fit = fit_ridge(data, val_len, cfg)
    assert float(fit.val_sharpe.max()) > 0
    runs = baseline_rollouts(data, data.test[0], test_len, cfg, jax.random.split(
        jax.random.key(0), 2), val_len)
    assert float(sharpe(runs["ridge"].returns, 252.0)) > 1.0
    # ridge reports its forecast ŷ_t = x_tᵀβ + b of each decision bar; it predicts the target
    bars = np.arange(int(data.test[0]) - 1, int(data.test[0]) - 1 + test_len)
    np.testing.assert_allclose(runs["ridge"].forecast, np.asarray(data.features)[bars]
                               @ np.asarray(fit.beta) + float(fit.intercept), rtol=1e-4,
                               atol=1e-6)
    # each decision's target is its bar's next close-to-close log return (over one train
    # scale): checked against the prices, an independent definition
    target = decision_targets(data.aux_target, int(data.test[0]), test_len)
    close = np.asarray(data.prices.close, np.float64)
    log_ret = np.log(close[bars + 1] / close[bars])
    unclipped = np.abs(target) < 0.99 * cfg.features.clip
    ratio = target[unclipped] / log_ret[unclipped]
    assert unclipped.mean() > 0.9 and np.std(ratio) < 1e-4 * np.mean(ratio)
    assert forecast_ic(runs["ridge"].forecast, target) > 0.1
    assert np.all(np.asarray(runs["vol_target"].forecast) == 0)  # no forecast
    for name in ("ridge", "vol_target"):
        pos = np.asarray(runs[name].position)
        assert np.abs(pos).max() <= 1.0 and np.abs(pos).max() > 0
    assert np.asarray(runs["vol_target"].position).min() >= 0  # long only


def test_ridge_penalty_and_fit_ignore_the_test_block():
    cfg = tiny_config()
    _, f, data = _fold(cfg)
    val_len = f.val[1] - f.val[0]
    a = slice(f.test[0], None)
    rng = np.random.default_rng(1)
    moved = data.replace(
        prices=env.Prices(open=data.prices.open.at[a].multiply(1.3),
                          close=data.prices.close.at[a].multiply(0.7)),
        features=data.features.at[a].set(rng.normal(size=data.features[a].shape)),
        aux_target=data.aux_target.at[a].set(rng.normal(size=data.aux_target[a].shape)))
    fit, fit2 = fit_ridge(data, val_len, cfg), fit_ridge(moved, val_len, cfg)
    assert fit.val_sharpe.shape == (len(RIDGE_ALPHAS),)
    assert len(set(np.asarray(fit.val_sharpe).tolist())) > 1  # the penalty matters
    for x, y in zip(jax.tree.leaves(fit), jax.tree.leaves(fit2), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
