"""The baselines' suite: every baseline over one segment, the fitted ones only where there is a
train and validation block to fit them on."""

import dataclasses

import jax
import numpy as np

from rl_trader.baselines.suite import BASELINES, FITTED_BASELINES, baseline_rollouts
from rl_trader.run.prepare import prepare
from tests.helpers import tiny_config


def test_new_bars_get_the_baselines_that_need_no_fit_and_the_same_rollouts():
    """With `val_steps` None (a backtest's new bars) ridge, gbm and vol_target are left out and
    the others trade as in scoring; the random policy runs once per key ([R, steps]); gbm is
    left out without its forecast."""
    cfg = tiny_config()
    cfg = dataclasses.replace(cfg, features=dataclasses.replace(cfg.features, tree_forecast="off"),
                              env=dataclasses.replace(cfg.env, view="excess"))
    prep = prepare(cfg)
    data = prep.fold_data(0)
    keys = jax.random.split(jax.random.key(0), 3)
    scored = baseline_rollouts(data, data.test[0], prep.test_steps, cfg, keys, prep.val_steps)
    new = baseline_rollouts(data, data.test[0], prep.test_steps, cfg, keys, None)
    assert set(scored) == set(BASELINES) - {"gbm"}
    assert set(new) == set(BASELINES) - set(FITTED_BASELINES)
    assert scored["random"].returns.shape == (3, prep.test_steps)
    assert np.abs(np.asarray(scored["vol_target"].returns)).max() > 0
    for name, r in new.items():  # two programs of the same rollouts: XLA may fuse differently
        np.testing.assert_allclose(np.asarray(r.returns), np.asarray(scored[name].returns),
                                   rtol=1e-5, atol=1e-9)
