"""On-device replay of endogenous transitions, with n-step returns formed at sample time.

The market is exogenous, so a stored step holds only what the agent changed: the pre-step env
state (the whole `env.EnvState`, so a field added to it later is carried with no change here;
its bar `t` indexes the market), the action, the reward, the portfolio features after the step
and the episode flags: 66 bytes with today's 8-scalar state (it was 58 with the pre-step
features instead of the state). Observations are gathered from the fold's market arrays, and the
pre-step portfolio features derived from the state (`env.portfolio_features`), when a batch is
sampled. The pre-step state is what a full-action backup steps the env from; the post-step
features are kept because they are the n-step bootstrap's input and could otherwise only be had
by stepping the env again.

Layout: a time-major ring `[capacity, n_envs]` per field, one row per parallel env step. An
n-step window starting at row i of env j reads rows i … i+n−1 of column j and stops at the
first step flagged `last` (episode end), so no return crosses an episode or segment boundary:

    alive_k = Π_{j<k} (1 − last_j)
    G       = Σ_k γ^k · r_k · alive_k
    m       = Σ_k alive_k − 1                 (the last step inside the episode)
    bootstrap from (t_m + 1, portfolio_t[m]) with discount γ^{m+1} · (1 − terminated_m)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from rl_trader.env import EnvState


@struct.dataclass
class Step:
    """One env step as stored (leaves have leading axes [capacity, n_envs] inside `Replay`)."""

    state_tm1: EnvState  # env state at the close of bar t, where the action was chosen
    direction: jax.Array  # int32
    magnitude: jax.Array  # int32
    reward: jax.Array  # float32: scaled log growth over t → t+1
    portfolio_t: jax.Array  # float32 [P]: portfolio features at bar t+1
    terminated: jax.Array  # bool: ruin at t+1 (no bootstrap)
    last: jax.Array  # bool: the episode ended at t+1 (truncated or terminated)


@struct.dataclass
class Replay:
    data: Step  # leaves [capacity, n_envs, ...]
    pos: jax.Array  # int32: next row to write
    size: jax.Array  # int32: rows written so far (≤ capacity)


@struct.dataclass
class NStep:
    """A sampled batch of n-step transitions (endogenous parts; leaves [B, ...])."""

    state_tm1: EnvState  # pre-step env state of the window's first step (its bar: `.t`)
    direction_tm1: jax.Array
    magnitude_tm1: jax.Array
    return_t: jax.Array  # Σ γ^k r_k over the window
    discount_t: jax.Array  # γ^{m+1} (1 − terminated)
    bar_t: jax.Array  # bar of the bootstrap observation
    portfolio_t: jax.Array


def init(example: Step, capacity: int, n_envs: int) -> Replay:
    """An empty ring shaped after one unbatched `example` step."""
    data = jax.tree.map(lambda x: jnp.zeros((capacity, n_envs) + jnp.shape(x),
                                            jnp.asarray(x).dtype), example)
    return Replay(data=data, pos=jnp.int32(0), size=jnp.int32(0))


def add(replay: Replay, steps: Step) -> Replay:
    """Write one row (leaves [n_envs, ...]) at `pos`."""
    data = jax.tree.map(lambda buf, x: buf.at[replay.pos].set(x), replay.data, steps)
    capacity = replay.data.direction.shape[0]
    return Replay(data=data, pos=(replay.pos + 1) % capacity,
                  size=jnp.minimum(replay.size + 1, capacity))


def sample(replay: Replay, key: jax.Array, batch_size: int, n_step: int,
           gamma: float | jax.Array) -> NStep:
    """Uniform n-step windows over fully written rows; requires size ≥ n_step."""
    capacity, n_envs = replay.data.direction.shape
    k_row, k_env = jax.random.split(key)
    n_start = jnp.maximum(replay.size - n_step + 1, 1)
    oldest = (replay.pos - replay.size) % capacity
    start = oldest + jax.random.randint(k_row, (batch_size,), 0, n_start)
    env = jax.random.randint(k_env, (batch_size,), 0, n_envs)
    rows = (start[:, None] + jnp.arange(n_step)[None, :]) % capacity  # [B, n]
    win = jax.tree.map(lambda buf: buf[rows, env[:, None]], replay.data)  # leaves [B, n, ...]

    last = win.last.astype(jnp.float32)
    alive = jnp.cumprod(jnp.concatenate([jnp.ones_like(last[:, :1]), 1.0 - last[:, :-1]], 1),
                        axis=1)
    powers = gamma ** jnp.arange(n_step, dtype=jnp.float32)
    ret = jnp.sum(win.reward * alive * powers, axis=1)
    m = jnp.sum(alive, axis=1).astype(jnp.int32) - 1
    at_m = jax.tree.map(lambda x: jnp.take_along_axis(
        x, m.reshape((-1, 1) + (1,) * (x.ndim - 2)), axis=1)[:, 0], win)
    discount = gamma ** (m + 1).astype(jnp.float32) * (1.0 - at_m.terminated)
    first = jax.tree.map(lambda x: x[:, 0], win)
    return NStep(state_tm1=first.state_tm1, direction_tm1=first.direction,
                 magnitude_tm1=first.magnitude, return_t=ret, discount_t=discount,
                 bar_t=at_m.state_tm1.t + 1, portfolio_t=at_m.portfolio_t)
