"""Greedy rollouts: the seed ensemble's position, and returns independent of the reward."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from helpers import init_params, tiny_config

from rl_trader import env
from rl_trader.config import REWARDS
from rl_trader.evaluate import greedy_decide, random_decide, rollout
from rl_trader.experiment import prepare
from rl_trader.market import make_fold_data, observe
from rl_trader.networks import QNetwork
from rl_trader.population import stack


def test_ensemble_position_is_the_mean_of_its_members_targets():
    cfg = tiny_config()
    prep = prepare(cfg)
    data = make_fold_data(prep.bars.open, prep.bars.close, prep.features, prep.folds[0],
                          cfg.features.clip)
    net = QNetwork(cfg.net, len(cfg.env.magnitudes))
    start = int(prep.folds[0].val[0])
    state = env.reset(start, start + 10)
    port = env.portfolio_features(state, data.prices)
    obs = observe(data, state.t, port, cfg.features.lookback)
    members = [init_params(net, obs, seed=s) for s in range(3)]
    key = jax.random.key(0)

    def decide(params):
        target, w_m, w_p = greedy_decide(stack(params), data, cfg)(key, state, port)
        return float(target), np.asarray(w_m), np.asarray(w_p)

    alone = [decide([p]) for p in members]
    assert len({t for t, _, _ in alone}) > 1  # the members disagree, so the mean is a test
    target, w_m, w_p = decide(members)
    np.testing.assert_allclose(target, np.mean([t for t, _, _ in alone]), rtol=1e-6)
    np.testing.assert_allclose(w_m, np.mean([w for _, w, _ in alone], 0), rtol=1e-5)
    np.testing.assert_allclose(w_p, np.mean([w for _, _, w in alone], 0), rtol=1e-5)
    assert decide([members[0]] * 2)[0] == alone[0][0]  # identical members: one agent's target


def test_evaluation_returns_do_not_depend_on_the_learning_reward():
    cfg = tiny_config()
    prep = prepare(cfg)
    data = make_fold_data(prep.bars.open, prep.bars.close, prep.features, prep.folds[0],
                          cfg.features.clip)
    start, key = jnp.int32(prep.folds[0].val[0]), jax.random.key(3)
    runs = {}
    for reward in REWARDS:
        c = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, reward=reward))
        runs[reward] = rollout(random_decide(data, c), data, start, 30, c, key)
    base = np.asarray(runs["log"].returns)
    assert np.abs(base).max() > 0  # the random policy trades, so the returns are a test
    for reward in REWARDS:
        np.testing.assert_array_equal(np.asarray(runs[reward].returns), base)
