"""Greedy rollouts of a policy over a segment, through the env: the agent and the baselines alike.

Evaluating segment [a, b) starts flat at the close of bar a−1 and decides at bars a−1 … b−2, so
the returns cover bars a … b−1 exactly and the test blocks of consecutive folds stitch into one
out-of-sample record. Bar a−1 lies in the purge gap; its observation uses only past data.
A policy is a `Decide` function; the agent's is `agent.policy.greedy_decide`, the baselines'
are in `rl_trader.baselines`. All run through `env.step`, so they pay the same costs on the
same fills.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from rl_trader import env
from rl_trader.config import RunConfig, program_config
from rl_trader.data.fold_data import FoldData, market_width


@struct.dataclass
class Aux:
    """What a decision reports besides its target (zeros for the baselines)."""

    market_weights: jax.Array  # [F] VSN selection weights
    portfolio_weights: jax.Array  # [P]
    q: jax.Array  # scalar: the agent's Q of its greedy action (reward units × reward_scale)
    forecast: jax.Array  # scalar: the forecast ŷ_t of the next-bar return (normalised like
    # `FoldData.aux_target`): the agent's aux head (ensemble mean), ridge's fit; 0 for the rest
    prior: jax.Array  # scalar: the position the agent's zero action held (--prior); 0 else


def jit_per_program(*static_argnums: int) -> Callable[[Callable], Callable]:
    """`jax.jit` with `static_argnums`, each `RunConfig` argument replaced by its
    `program_config` first: runs of one process that differ only in their data, fold layout,
    seed or sweep (the gate's markets) share the traced program."""
    def wrap(fn: Callable) -> Callable:
        jitted = jax.jit(fn, static_argnums=static_argnums)

        @functools.wraps(fn)
        def call(*args: object, **kwargs: object) -> object:
            return jitted(*(program_config(a) if isinstance(a, RunConfig) else a
                            for a in args), **kwargs)

        return call

    return wrap


# decide(key, state, portfolio features [P]) -> (target fraction, Aux)
Decide = Callable[[jax.Array, env.EnvState, jax.Array], tuple[jax.Array, Aux]]


@struct.dataclass
class Rollout:
    """Per-bar results of one policy over a segment; leaves [S] (S = b − a)."""

    returns: jax.Array  # simple returns of equity, net of costs (never the learning reward)
    position: jax.Array  # target fraction filled at the bar's open (the overnight gap into
    # the bar is earned by the previous position, so hit rate and exposure are approximate)
    cost: jax.Array  # cost paid at the fill, fraction of equity
    turnover: jax.Array  # traded notional / equity
    market_weights: jax.Array  # [S, F] VSN weights (zeros for baselines)
    portfolio_weights: jax.Array  # [S, P]
    q: jax.Array  # the agent's Q of its greedy action at the decision (0 for baselines)
    forecast: jax.Array  # ŷ of the next-bar return at the decision (`Aux.forecast`)
    reward: jax.Array  # the learning reward of the step × reward_scale (Q's units)
    prior: jax.Array  # the prior the target was chosen around (`Aux.prior`)


def rollout(decide: Decide, data: FoldData, start: jax.Array, length: int, cfg: RunConfig,
            key: jax.Array) -> Rollout:
    """Run `decide` from flat at bar start−1 for `length` steps (static)."""
    state = env.reset(start - 1, start - 1 + length)

    def body(carry, k):
        state = carry
        port = env.portfolio_features(state, data.prices)
        target, aux = decide(k, state, port)
        new, out = env.step(state, target, data.prices, cfg.env)
        return new, Rollout(returns=jnp.expm1(out.log_growth), position=target, cost=out.cost,
                            turnover=out.turnover, market_weights=aux.market_weights,
                            portfolio_weights=aux.portfolio_weights, q=aux.q,
                            forecast=aux.forecast,
                            reward=out.reward * cfg.agent.reward_scale, prior=aux.prior)

    _, result = jax.lax.scan(body, state, jax.random.split(key, length))
    return result


def decision_targets(aux_target: jax.Array | np.ndarray, start: int | jax.Array,
                     length: int) -> np.ndarray | jax.Array:
    """What each decision of `rollout(…, start, length)` forecasts: the next-bar target
    `aux_target` [T] of its bar, start − 1 … start + length − 2 ([length]). A host (numpy)
    array for an integer `start`; for a traced one (inside `jit`) a jax array, with bars past
    the end (a shape bucket's padding) clamped to the last."""
    if isinstance(start, jax.Array):
        bars = start - 1 + jnp.arange(length)
        return aux_target[jnp.clip(bars, 0, aux_target.shape[0] - 1)]
    return np.asarray(aux_target)[start - 1:start - 1 + length]


def no_aux(data: FoldData, cfg: RunConfig) -> Aux:
    """The `Aux` of a policy without a network (the baselines): no VSN weights, no Q, no
    forecast."""
    return Aux(market_weights=jnp.zeros(market_width(data)),
               portfolio_weights=jnp.zeros(len(env.PORTFOLIO_NAMES)), q=jnp.float32(0.0),
               forecast=jnp.float32(0.0), prior=jnp.float32(0.0))


