"""Greedy rollouts of the agent and of baselines over a segment, through the same env.

Evaluating segment [a, b) starts flat at the close of bar a−1 and decides at bars a−1 … b−2, so
the returns cover bars a … b−1 exactly and the test blocks of consecutive folds stitch into one
out-of-sample record. Bar a−1 lies in the purge gap; its observation uses only past data.
Baselines run through `env.step` too, so they pay the same costs on the same fills.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
from flax import struct

from rl_trader import env
from rl_trader.config import RunConfig
from rl_trader.market import FoldData, observe
from rl_trader.networks import QNetwork

# decide(key, state, portfolio features [P]) -> (target fraction, market weights [F], port w [P])
Decide = Callable[[jax.Array, env.EnvState, jax.Array], tuple[jax.Array, jax.Array, jax.Array]]


@struct.dataclass
class Rollout:
    """Per-bar results of one policy over a segment; leaves [S] (S = b − a)."""

    returns: jax.Array  # simple returns of equity, net of costs
    position: jax.Array  # target fraction filled at the bar's open (the overnight gap into
    # the bar is earned by the previous position, so hit rate and exposure are approximate)
    cost: jax.Array  # cost paid at the fill, fraction of equity
    turnover: jax.Array  # traded notional / equity
    market_weights: jax.Array  # [S, F] VSN weights (zeros for baselines)
    portfolio_weights: jax.Array  # [S, P]


def rollout(decide: Decide, data: FoldData, start: jax.Array, length: int, cfg: RunConfig,
            key: jax.Array) -> Rollout:
    """Run `decide` from flat at bar start−1 for `length` steps (static)."""
    state = env.reset(start - 1, start - 1 + length)

    def body(carry, k):
        state = carry
        port = env.portfolio_features(state, data.prices)
        target, w_m, w_p = decide(k, state, port)
        new, out = env.step(state, target, data.prices, cfg.env)
        return new, Rollout(returns=jnp.expm1(out.reward), position=target, cost=out.cost,
                            turnover=out.turnover, market_weights=w_m, portfolio_weights=w_p)

    _, result = jax.lax.scan(body, state, jax.random.split(key, length))
    return result


def greedy_decide(params, data: FoldData, cfg: RunConfig) -> Decide:
    """The agent's greedy policy. `params` stack an ensemble of S agents on a leading axis;
    each takes its greedy action (argmax per branch) and the position is their mean target,
    p* = (1/S) Σ_s p*_s (S = 1: a single agent). VSN weights are averaged likewise."""
    net = QNetwork(cfg.net, len(cfg.env.magnitudes))
    apply = jax.vmap(net.apply, in_axes=(0, None))

    def decide(key, state, port):
        del key
        q = apply(params, observe(data, state.t, port, cfg.features.lookback))
        targets = env.target_fraction(jnp.argmax(q.q_direction, -1),
                                      jnp.argmax(q.q_magnitude, -1), cfg.env)
        return targets.mean(), q.market_weights.mean(0), q.portfolio_weights.mean(0)

    return decide


def _no_weights(data: FoldData, cfg: RunConfig) -> tuple[jax.Array, jax.Array]:
    return (jnp.zeros(data.features.shape[1]),
            jnp.zeros(len(env.PORTFOLIO_NAMES)))


def constant_decide(fraction: float, data: FoldData, cfg: RunConfig) -> Decide:
    """Hold a constant signed fraction of equity (1.0: buy-and-hold; 0.0: flat)."""
    w_m, w_p = _no_weights(data, cfg)
    return lambda key, state, port: (jnp.float32(fraction), w_m, w_p)


def momentum_decide(k: int, data: FoldData, cfg: RunConfig) -> Decide:
    """Full long/short by the sign of the past k-bar return: sign(C_t / C_{t−k} − 1)."""
    w_m, w_p = _no_weights(data, cfg)

    def decide(key, state, port):
        past = data.prices.close[jnp.maximum(state.t - k, 0)]
        return jnp.sign(data.prices.close[state.t] - past).astype(jnp.float32), w_m, w_p

    return decide


def random_decide(data: FoldData, cfg: RunConfig) -> Decide:
    """Uniformly random (direction, magnitude) each bar."""
    w_m, w_p = _no_weights(data, cfg)
    n_mag = len(cfg.env.magnitudes)

    def decide(key, state, port):
        kd, km = jax.random.split(key)
        d = jax.random.randint(kd, (), 0, env.N_DIRECTIONS)
        m = jax.random.randint(km, (), 0, n_mag)
        return env.target_fraction(d, m, cfg.env), w_m, w_p

    return decide


BASELINES = ("buy_and_hold", "flat", "momentum_20", "random")


@partial(jax.jit, static_argnums=(2, 3))
def baseline_rollouts(data: FoldData, start: jax.Array, length: int, cfg: RunConfig,
                      random_keys: jax.Array) -> dict[str, Rollout]:
    """Buy-and-hold, flat, 20-bar momentum, and the random policy once per key (leaves of
    `random` get a leading [R] axis), over the same segment with the same costs."""
    fixed = {"buy_and_hold": constant_decide(1.0, data, cfg),
             "flat": constant_decide(0.0, data, cfg),
             "momentum_20": momentum_decide(20, data, cfg)}
    out = {name: rollout(d, data, start, length, cfg, random_keys[0]) for name, d in fixed.items()}
    out["random"] = jax.vmap(lambda k: rollout(random_decide(data, cfg), data, start, length,
                                               cfg, k))(random_keys)
    return out


def oracle_decide(position: jax.Array, data: FoldData, cfg: RunConfig) -> Decide:
    """Planted-signal oracle: the known target position[t] [T] (signed fraction of equity,
    `SyntheticMarket.oracle_position`) at the close of bar t."""
    w_m, w_p = _no_weights(data, cfg)
    return lambda key, state, port: (position[state.t].astype(jnp.float32), w_m, w_p)


@partial(jax.jit, static_argnums=(3, 4))
def oracle_rollout(position: jax.Array, data: FoldData, start: jax.Array, length: int,
                   cfg: RunConfig) -> Rollout:
    """The oracle's rollout over [start, start + length), same fills and costs as the agent."""
    return rollout(oracle_decide(position, data, cfg), data, start, length, cfg,
                   jax.random.PRNGKey(0))
