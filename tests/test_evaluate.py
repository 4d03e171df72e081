"""The agent's greedy policy as a seed ensemble: the position is the mean of the members'."""

import jax
import numpy as np
from helpers import init_params, tiny_config

from rl_trader import env
from rl_trader.evaluate import greedy_decide
from rl_trader.market import observe
from rl_trader.networks import QNetwork
from rl_trader.population import stack
from rl_trader.prepare import prepare


def test_ensemble_position_is_the_mean_of_its_members_targets():
    cfg = tiny_config()
    prep = prepare(cfg)
    data = prep.fold_data(0)
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
