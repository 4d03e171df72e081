"""The baselines' suite: `vol_target`'s validation returns are its rollout's on the block."""

import jax
import numpy as np

from rl_trader.baselines.suite import baseline_rollouts, vol_target_val_returns
from rl_trader.evaluation.metrics import edge_t, sharpe_of
from rl_trader.run.prepare import prepare
from rl_trader.run.scoring import vol_target_validation
from tests.helpers import tiny_config


def test_vol_target_val_returns_are_its_validation_rollouts():
    """The validation block traded as the test blocks are (`baseline_rollouts` from the block's
    first decision); the bars after the block (a shape bucket's padding) change nothing, and
    the validation Sharpe is taken over the block's bars as the agent's is."""
    prep = prepare(tiny_config())
    data = prep.fold_data(0)
    val_len = prep.val_len
    runs = baseline_rollouts(data, data.val[0], val_len, prep.cfg,
                             jax.random.split(jax.random.key(0), 2), prep.val_steps)
    want = np.asarray(runs["vol_target"].returns)
    got = np.asarray(vol_target_val_returns(data, prep.val_steps, prep.cfg))
    assert prep.val_steps > val_len and got.shape == (prep.val_steps,)
    # two programs of the same rollout: XLA may fuse the float32 step differently
    np.testing.assert_allclose(got[:val_len], want, rtol=1e-5, atol=1e-9)
    assert np.abs(want).max() > 0
    agent = np.random.default_rng(0).normal(size=val_len)
    sharpe, t, returns = vol_target_validation(prep, data, agent)
    block = got[:val_len].astype(np.float64)
    np.testing.assert_array_equal(returns, block)
    assert sharpe == sharpe_of(block, prep.periods_per_year) != 0.0
    assert t == edge_t(agent, block)
