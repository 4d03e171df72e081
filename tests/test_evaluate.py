"""Decisions of the evaluated policies: the agent's seed ensemble, the planted-signal oracle."""

import dataclasses

import jax
import numpy as np
from helpers import init_params, tiny_config

from rl_trader import env
from rl_trader.evaluate import greedy_decide, oracle_rollout
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


def test_oracle_holds_the_markets_oracle_position_of_the_decision_bar():
    cfg = tiny_config()
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data,
                                                            path="synthetic:vol_regime:1200:1"))
    prep = prepare(cfg)
    f = prep.folds[1]
    data = make_fold_data(prep.bars.open, prep.bars.close, prep.features, f, cfg.features.clip)
    start, length = f.test[0], f.test[1] - f.test[0]
    out = oracle_rollout(jax.numpy.asarray(prep.oracle_position, jax.numpy.float32), data,
                         data.test[0], length, cfg)
    # decided at the close of bars start−1 … end−2, each filled at the next open
    np.testing.assert_array_equal(out.position, prep.oracle_position[start - 1:f.test[1] - 1])
    assert set(np.unique(out.position)) == {0.25, 1.0}
