"""The agent's greedy policy over an ensemble of members, as a `Decide` for `evaluation.rollout`."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rl_trader.agent.heads import make_head
from rl_trader.config import RunConfig
from rl_trader.data.fold_data import FoldData, bar_context, observe
from rl_trader.evaluation.rollout import Aux, Decide


def greedy_decide(params, data: FoldData, cfg: RunConfig) -> Decide:
    """The agent's greedy policy. `params` stack an ensemble of S agents on a leading axis
    (S = 1: a single agent); the Q-head chooses the ensemble's target from its members'
    outputs (`Head.greedy`: the model head the best position of their mean Q, the generic head
    the mean of their greedy targets). VSN weights and the forecast ŷ (the aux head, μ̂ for the
    model head) are the members' means."""
    head = make_head(cfg)
    apply = jax.vmap(head.network.apply, in_axes=(0, None))

    def decide(key, state, port):
        del key
        out = apply(params, observe(data, state.t, port, cfg.features))
        ctx = bar_context(data, state.t, cfg.env)
        target, q = head.greedy(out, port[0], ctx)
        return target, Aux(market_weights=out.market_weights.mean(0),
                           portfolio_weights=out.portfolio_weights.mean(0),
                           q=jnp.asarray(q, jnp.float32), forecast=out.aux.mean(),
                           prior=ctx.prior)

    return decide
