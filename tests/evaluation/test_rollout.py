"""Rollouts of a policy through the env: evaluation is in returns of equity, whatever the
learning reward."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from rl_trader.baselines.rules import random_decide
from rl_trader.config import REWARDS
from rl_trader.evaluation.rollout import rollout
from rl_trader.run.prepare import prepare
from tests.helpers import tiny_config


def test_evaluation_returns_do_not_depend_on_the_learning_reward():
    cfg = tiny_config()
    prep = prepare(cfg)
    data = prep.fold_data(0)
    start, key = jnp.int32(prep.folds[0].val[0]), jax.random.key(3)
    runs = {}
    for reward in REWARDS:
        c = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, reward=reward))
        runs[reward] = rollout(random_decide(data, c), data, start, 30, c, key)
    base = np.asarray(runs["log"].returns)
    assert np.abs(base).max() > 0  # the random policy trades, so the returns are a test
    for reward in REWARDS:
        np.testing.assert_array_equal(np.asarray(runs[reward].returns), base)
