"""The baselines' suite: `vol_target`'s validation Sharpe is its rollout's on the block."""

import jax
import numpy as np

from rl_trader.baselines.suite import baseline_rollouts, vol_target_val_sharpe
from rl_trader.evaluation.metrics import sharpe
from rl_trader.run.prepare import prepare
from tests.helpers import tiny_config


def test_vol_target_val_sharpe_is_its_validation_rollouts():
    """The validation block traded as the test blocks are (`baseline_rollouts` from the block's
    first decision), its Sharpe over the block's bars only: bars after the block (a shape
    bucket's padding) change nothing."""
    prep = prepare(tiny_config())
    data = prep.fold_data(0)
    val_len = int(data.val[1] - data.val[0])
    runs = baseline_rollouts(data, data.val[0], val_len, prep.cfg,
                             jax.random.split(jax.random.key(0), 2), prep.val_steps)
    want = float(sharpe(np.asarray(runs["vol_target"].returns, np.float64), 1.0))
    got = float(vol_target_val_sharpe(data, prep.val_steps, prep.cfg))
    assert want != 0.0
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert prep.val_steps > val_len
    np.testing.assert_allclose(float(vol_target_val_sharpe(data, val_len, prep.cfg)), got,
                               rtol=1e-5)
