"""The planted-signal oracle through the env."""

import dataclasses

import jax
import numpy as np

from rl_trader.baselines.oracle import oracle_rollout
from rl_trader.run.prepare import prepare
from tests.helpers import tiny_config


def test_oracle_holds_the_markets_oracle_position_of_the_decision_bar():
    cfg = tiny_config()
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data,
                                                            path="synthetic:vol_regime:1200:1"))
    prep = prepare(cfg)
    f = prep.folds[1]
    data = prep.fold_data(1)
    start, length = f.test[0], f.test[1] - f.test[0]
    out = oracle_rollout(jax.numpy.asarray(prep.oracle_position, jax.numpy.float32), data,
                         data.test[0], length, cfg)
    # decided at the close of bars start−1 … end−2, each filled at the next open
    np.testing.assert_array_equal(out.position, prep.oracle_position[start - 1:f.test[1] - 1])
    assert set(np.unique(out.position)) == {0.25, 1.0}
