"""The gradient-boosted-trees baseline: fit, choice on validation, no look at the test block."""

import jax
import numpy as np
from helpers import tiny_config

from rl_trader import env
from rl_trader.evaluate import baseline_rollouts, fit_ridge
from rl_trader.gbm import GBM_ITERATIONS, GBM_LEAVES, GbmFits, fit_gbm
from rl_trader.prepare import prepare
from rl_trader.run_state import forecast_ic


def _planted():
    """Fold 0 of the tiny run with its target replaced by a V shape in the first market
    variable, y = |x₀| less its least-squares fit on every variable (+ a little noise): no
    linear function of the features predicts it (some of them measure volatility, which
    |x₀| is correlated with), a tree does."""
    cfg = tiny_config()
    prep = prepare(cfg)
    f, data = prep.folds[0], prep.fold_data(0)
    x = np.asarray(data.features, np.float64)
    design = np.column_stack([np.ones(len(x)), x])
    v = np.abs(x[:, 0])
    v = v - design @ np.linalg.lstsq(design, v, rcond=None)[0]
    y = v / v.std() + 0.1 * np.random.default_rng(0).normal(size=v.shape)
    data = data.replace(aux_target=jax.numpy.asarray(y, np.float32))
    return cfg, f, data


def test_gbm_finds_a_non_monotone_signal_ridge_cannot_and_chooses_on_validation():
    cfg, f, data = _planted()
    val_len = int(f.val[1] - f.val[0])
    fit = fit_gbm(data, val_len, cfg)
    assert fit.val_sharpe.shape == (len(GBM_LEAVES), len(GBM_ITERATIONS))
    assert np.isfinite(fit.val_sharpe).all()
    best = np.unravel_index(np.argmax(fit.val_sharpe), fit.val_sharpe.shape)  # first on ties
    assert (fit.leaves, fit.iterations) == (GBM_LEAVES[best[0]], GBM_ITERATIONS[best[1]])
    # out of sample, on the test block's bars: the trees see the V, ridge does not
    bars = np.arange(int(data.test[0]), int(data.test[1]))
    y = np.asarray(data.aux_target)[bars]
    assert forecast_ic(np.asarray(fit.forecast.y_hat)[bars], y) > 0.5
    ridge = fit_ridge(data, val_len, cfg)
    ridge_hat = np.asarray(data.features)[bars] @ np.asarray(ridge.beta) + float(ridge.intercept)
    assert abs(forecast_ic(ridge_hat, y)) < 0.2
    # traded through the env as a baseline: its positions follow clip(ŷ / s, −1, 1) of the
    # decision bar, and it reports ŷ as its forecast
    test_len = int(f.test[1] - f.test[0])
    runs = baseline_rollouts(data, data.test[0], test_len, cfg,
                             jax.random.split(jax.random.key(0), 2), val_len, gbm=fit.forecast)
    decided = np.arange(int(data.test[0]) - 1, int(data.test[0]) - 1 + test_len)
    np.testing.assert_allclose(runs["gbm"].forecast, np.asarray(fit.forecast.y_hat)[decided],
                               rtol=1e-6)
    pos = np.asarray(runs["gbm"].position)
    assert np.abs(pos).max() <= 1.0 and len(np.unique(np.round(pos, 4))) > 2  # sized, not signs


def test_gbm_reads_only_train_and_validation_and_is_deterministic():
    """The test block moved, the fit made on the background thread (as an accelerator run
    makes it while training) or when asked for: the same choice and forecasts."""
    cfg, f, data = _planted()
    val_len = int(f.val[1] - f.val[0])
    a = slice(int(f.test[0]), None)
    rng = np.random.default_rng(1)
    moved = data.replace(
        prices=env.Prices(open=data.prices.open.at[a].multiply(1.3),
                          close=data.prices.close.at[a].multiply(0.7)),
        aux_target=data.aux_target.at[a].set(rng.normal(size=data.aux_target[a].shape)))
    background = GbmFits([moved, data], val_len, cfg, background=True)
    fit, later = fit_gbm(data, val_len, cfg), GbmFits([moved], val_len, cfg, background=False)
    for other in (background.result(0), background.result(1), later.result(0)):
        assert (other.leaves, other.iterations) == (fit.leaves, fit.iterations)
        np.testing.assert_array_equal(other.val_sharpe, fit.val_sharpe)
        np.testing.assert_array_equal(np.asarray(other.forecast.y_hat),
                                      np.asarray(fit.forecast.y_hat))  # features unchanged
        assert float(other.forecast.scale) == float(fit.forecast.scale)

