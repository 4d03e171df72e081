"""The agent's greedy policy over an ensemble (`agent.policy.greedy_decide`): each head's
choice, its reported Q and forecast."""

import dataclasses

import jax
import numpy as np

from rl_trader import env
from rl_trader.agent import model_head
from rl_trader.agent.heads import make_head
from rl_trader.agent.policy import greedy_decide
from rl_trader.data.fold_data import observe
from rl_trader.run.prepare import prepare
from rl_trader.training.population import stack
from tests.helpers import init_params, tiny_config


def decision_at_validation(cfg):
    """(data, network, env state, portfolio features, observation) of fold 0's first
    validation decision under `cfg`."""
    prep = prepare(cfg)
    data = prep.fold_data(0)
    net = make_head(cfg).network
    start = int(prep.folds[0].val[0])
    state = env.reset(start, start + 10)
    port = env.portfolio_features(state, data.prices)
    return data, net, state, port, observe(data, state.t, port, cfg.features)


def test_ensemble_position_is_the_mean_of_its_members_targets():
    cfg = tiny_config(generic=True)
    data, net, state, port, obs = decision_at_validation(cfg)
    members = [init_params(net, obs, seed=s) for s in (0, 3, 4)]
    key = jax.random.key(0)

    @jax.jit
    def greedy(stacked):
        return greedy_decide(stacked, data, cfg)(key, state, port)

    def decide(params):
        target, aux = greedy(stack(params))
        return (float(target), np.asarray(aux.market_weights), np.asarray(aux.portfolio_weights),
                float(aux.q))

    alone = [decide([p]) for p in members]
    assert len({a[0] for a in alone}) > 1  # the members disagree, so the mean is a test
    target, w_m, w_p, q = decide(members)
    forecasts = [float(jax.jit(net.apply)(p, obs).aux) for p in members]
    _, aux = greedy(stack(members))
    np.testing.assert_allclose(float(aux.forecast), np.mean(forecasts), rtol=1e-5)
    np.testing.assert_allclose(target, np.mean([a[0] for a in alone]), rtol=1e-6)
    np.testing.assert_allclose(w_m, np.mean([a[1] for a in alone], 0), rtol=1e-5)
    np.testing.assert_allclose(w_p, np.mean([a[2] for a in alone], 0), rtol=1e-5)
    np.testing.assert_allclose(q, np.mean([a[3] for a in alone]), rtol=1e-5)
    assert decide([members[0]] * 2)[0] == alone[0][0]  # identical members: one agent's target


def test_greedy_q_is_the_bdq_value_of_the_greedy_action():
    """Q(s, â) = Q_dir(â_dir) when flat, else the mean of the two branches' greedy values."""
    cfg = tiny_config(generic=True)
    data, net, state, port, obs = decision_at_validation(cfg)
    apply = jax.jit(net.apply)
    greedy = jax.jit(lambda p: greedy_decide(p, data, cfg)(jax.random.key(0), state, port))
    for seed in range(4):
        params = init_params(net, obs, seed=seed)
        out = apply(params, obs)
        d, m = int(np.argmax(out.q_direction)), int(np.argmax(out.q_magnitude))
        want = (out.q_direction[d] if d == env.FLAT
                else 0.5 * (out.q_direction[d] + out.q_magnitude[m]))
        _, aux = greedy(stack([params]))
        np.testing.assert_allclose(float(aux.q), float(want), rtol=1e-5, atol=1e-6)


def test_model_head_ensemble_holds_the_best_position_of_its_mean_q():
    """The model head: each member's Q over the K positions is assembled from its forecasts,
    the env's cost of moving from the held position and its continuation; the ensemble holds
    the argmax of the members' mean Q and reports that Q and the mean forecast μ̂ (on the flat
    prior: the trusted view around vol_target is tests/agent/test_model_head.py's)."""
    cfg = tiny_config()  # the default head: model
    cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, prior="flat", view="excess"))
    assert cfg.net.q_head == "model" and cfg.env.reward == "mean_variance"
    kappa = 100.0 * cfg.env.risk_aversion
    data, net, state, port, obs = decision_at_validation(cfg)
    s = float(data.return_scale[state.t])
    members = [init_params(net, obs, seed=k) for k in range(3)]
    fractions = np.asarray(model_head.position_fractions(cfg.env), np.float64)
    cost_rate = (cfg.env.commission_bps + cfg.env.slippage_bps) * 1e-4
    apply = jax.jit(net.apply)
    qs = []
    for p in members:
        out = apply(p, obs)
        mu, m2 = s * float(out.aux), s * s * float(out.second_moment)
        w = np.asarray(model_head.continuation(out), np.float64)
        q = [100.0 * (a * (mu + 0.5 * m2) - 0.5 * kappa * a * a * m2 - cost_rate * abs(a - 0.0))
             + c
             for a, c in zip(fractions, w, strict=True)]
        qs.append(q)
    mean_q = np.mean(qs, 0)
    target, aux = jax.jit(lambda p: greedy_decide(p, data, cfg)(jax.random.key(0), state, port))(
        stack(members))
    assert float(target) == fractions[int(np.argmax(mean_q))]
    np.testing.assert_allclose(float(aux.q), mean_q.max(), rtol=1e-4)
    np.testing.assert_allclose(float(aux.forecast),
                               np.mean([float(apply(p, obs).aux) for p in members]), rtol=1e-5)
