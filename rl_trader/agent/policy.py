"""The agent's greedy policy over an ensemble of members, as a `Decide` for `evaluation.rollout`."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rl_trader import env
from rl_trader.agent import model_head
from rl_trader.agent.learner import branch_mask
from rl_trader.agent.networks import make_network
from rl_trader.config import RunConfig
from rl_trader.data.fold_data import FoldData, observe
from rl_trader.evaluation.rollout import Aux, Decide


def greedy_decide(params, data: FoldData, cfg: RunConfig) -> Decide:
    """The agent's greedy policy. `params` stack an ensemble of S agents on a leading axis.

    Generic head: each member takes its greedy action (argmax per branch) and the position is
    their mean target, p* = (1/S) Σ_s p*_s (S = 1: a single agent); the reported Q of the
    greedy action is Q(s, â) = mean over the active branches b of Q_b(s, â_b) (the value the
    learner bootstraps from), averaged over the members.
    Model head: the members' assembled Q over the K positions (`model_head.assemble`, linear in
    the forecasts and the continuation, so this averages those) is averaged, and the
    ensemble holds the best position of that mean, p* = a_k*, k* = argmax_k (1/S) Σ_s Q_s(a_k).
    VSN weights and the forecast ŷ (the aux head, μ̂ for the model head) are averaged too."""
    net = make_network(cfg.net, len(cfg.env.magnitudes))
    apply = jax.vmap(net.apply, in_axes=(0, None))
    model = cfg.net.q_head == "model"

    def decide(key, state, port):
        del key
        q = apply(params, observe(data, state.t, port, cfg.features))
        aux = Aux(market_weights=q.market_weights.mean(0),
                  portfolio_weights=q.portfolio_weights.mean(0), q=jnp.float32(0.0),
                  forecast=q.aux.mean())
        if model:
            n = q.aux.shape[0]
            q_pos = model_head.assemble(q, jnp.full((n,), port[0]),
                                     jnp.full((n,), data.return_scale[state.t]), cfg.env,
                                     cfg.agent.reward_scale).mean(0)
            best = jnp.argmax(q_pos)
            return model_head.position_fractions(cfg.env)[best], aux.replace(q=q_pos[best])
        d, m = jnp.argmax(q.q_direction, -1), jnp.argmax(q.q_magnitude, -1)
        targets = env.target_fraction(d, m, cfg.env)
        q_dir = jnp.take_along_axis(q.q_direction, d[:, None], -1)[:, 0]
        q_mag = jnp.take_along_axis(q.q_magnitude, m[:, None], -1)[:, 0]
        mag_active = jax.vmap(branch_mask)(d)[:, 1]
        q_greedy = jnp.where(mag_active > 0, 0.5 * (q_dir + q_mag), q_dir)
        return targets.mean(), aux.replace(q=q_greedy.mean())

    return decide


