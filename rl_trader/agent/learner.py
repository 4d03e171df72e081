"""What every Q-head's learner shares: state, optimiser, target EMA, full-action backups, ε.

The target network follows the online one by a Polyak EMA over the whole parameter tree in one
call, `optax.incremental_update(params, target_params, tau)` (`target_update`, every gradient
step in `apply_loss`); nothing is sliced, filtered or listed, so a module added later is
covered with no change here.

Full-action (counterfactual) backups (action augmentation, Huang 2018). The market is
exogenous, so from a stored pre-state s_{t−1} the env's own step gives the reward r(a) and the
next state s'_a of every distinct position a ∈ {flat} ∪ {short, long} × M (K = 2M + 1
positions, `position_actions`; `counterfactual_step`, `full_action_backups`). The backup is
one step: beyond s'_a the path depends on the policy, not on the market alone, so an n-step
counterfactual return would need the policy's own later actions from states that were never
visited; n-step returns apply to the taken path only. The K next observations share one
market row and window, so the network's market part is computed once per sample
(`apply_positions`; the model head, which reads no portfolio, runs its network once per
sample, `model_head.next_state_outputs`).

A Q-head (`Head`) is its network and four functions: ε-greedy exploration, a gradient step,
the ensemble's greedy choice and the members' Q-values for `predict`. `heads.make_head(cfg)`
builds the one `NetConfig.q_head` names; the heads' own losses are in `model_head` and
`generic_head`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from rl_trader import env
from rl_trader.agent.optimizer import clipped_adamw, raveled_by_default
from rl_trader.config import SWEEPABLE, AgentConfig, EnvConfig, RunConfig
from rl_trader.data.fold_data import BarContext, FoldData, Obs, bar_context, observe_batch
from rl_trader.env import FLAT


@struct.dataclass
class TrainState:
    """Learner state: online and target params, optimiser state, update count."""

    params: chex.ArrayTree
    target_params: chex.ArrayTree
    opt_state: optax.OptState
    step: jax.Array  # int32: gradient updates done


@struct.dataclass
class HParams:
    """Hyper-parameters that may differ between members of a vmapped population: one traced
    float32 scalar per sweepable config field (`config.SWEEPABLE`, declared with
    `option(sweep=True)`), so one compiled program serves a whole sweep. `tau` stays a static
    Python float. A test keeps the fields equal to `config.SWEEPABLE`."""

    learning_rate: jax.Array
    weight_decay: jax.Array
    obs_noise: jax.Array
    gamma: jax.Array
    aux_weight: jax.Array
    eps_end: jax.Array
    eps_decay_fraction: jax.Array

    @staticmethod
    def from_config(cfg: AgentConfig) -> HParams:
        """Every sweepable field of `cfg` as a float32 scalar (on the host: no device
        program)."""
        return HParams(**{name: np.float32(getattr(cfg, name)) for name in SWEEPABLE})


@struct.dataclass
class LossInfo:
    loss: jax.Array
    td_abs: jax.Array  # mean |δ| over active branches
    aux_loss: jax.Array
    q_mean: jax.Array
    grad_norm: jax.Array = 0.0  # global norm of the gradient (set by `update`)


def make_optimizer(cfg: AgentConfig, hp: HParams) -> optax.GradientTransformation:
    """Global-norm clip → Adam with decoupled weight decay λ on the kernels, with η and λ from
    `hp` (traced scalars), on the raveled params on a CPU and leaf by leaf on an accelerator
    (`optimizer.clipped_adamw`, `optimizer.raveled_by_default`). The state depends on neither
    η nor λ, so a population may share one optimiser structure."""
    return clipped_adamw(cfg.max_grad_norm, hp.learning_rate, hp.weight_decay,
                         raveled=raveled_by_default())


def init_train_state(params: chex.ArrayTree, cfg: AgentConfig) -> TrainState:
    """Fresh learner state; the target starts equal to the online params. (The optimiser state
    does not depend on the hyper-parameters, so the config's serve to build it.)"""
    tx = make_optimizer(cfg, HParams.from_config(cfg))
    return TrainState(params=params, target_params=jax.tree.map(jnp.array, params),
                      opt_state=tx.init(params), step=jnp.int32(0))


def target_update(params: chex.ArrayTree, target_params: chex.ArrayTree,
                  tau: float) -> chex.ArrayTree:
    """θ̄ ← τ·θ + (1 − τ)·θ̄ over the whole tree, in one call."""
    return optax.incremental_update(params, target_params, tau)


def huber(x: jax.Array, delta: float) -> jax.Array:
    """Huber loss: ½x² for |x| ≤ δ, δ(|x| − ½δ) beyond."""
    ax = jnp.abs(x)
    quad = jnp.minimum(ax, delta)
    return 0.5 * quad**2 + delta * (ax - quad)


# --- full-action (counterfactual) backups ---------------------------------------------------

SHORT, LONG = FLAT - 1, FLAT + 1


def position_actions(n_magnitudes: int) -> tuple[jax.Array, jax.Array]:
    """The K = 2M + 1 distinct positions as (direction [K], magnitude [K]) int32: index 0 flat,
    1 … M short × magnitudes 0 … M−1, M + 1 … 2M long × magnitudes 0 … M−1."""
    mags = jnp.arange(n_magnitudes, dtype=jnp.int32)
    direction = jnp.concatenate([jnp.full((1,), FLAT), jnp.full((n_magnitudes,), SHORT),
                                 jnp.full((n_magnitudes,), LONG)]).astype(jnp.int32)
    return direction, jnp.concatenate([jnp.zeros((1,), jnp.int32), mags, mags])


def counterfactual_step(state_tm1: env.EnvState, prices: env.Prices, env_cfg: EnvConfig,
                        reward_scale: float, gamma: jax.Array,
                        prior_tm1: jax.Array | float = 0.0
                        ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Step the env from one pre-state (at bar t−1, where the zero action holds `prior_tm1`;
    0 under --prior flat) with each of the K positions.

    Returns the next portfolio features [K, P] at bar t, the scaled rewards r_t(a) [K] and the
    discounts γ·(1 − terminated_a) [K] (truncation is not termination: it bootstraps).
    """
    chex.assert_rank(state_tm1.t, 0)
    direction, magnitude = position_actions(len(env.action_sizes(env_cfg)))
    target = env.target_fraction(direction, magnitude, env_cfg, prior_tm1)
    new, out = jax.vmap(env.step, in_axes=(None, 0, None, None))(state_tm1, target, prices,
                                                                 env_cfg)
    portfolio_t = jax.vmap(env.portfolio_features, in_axes=(0, None))(new, prices)
    return portfolio_t, out.reward * reward_scale, gamma * (1.0 - out.terminated)


@struct.dataclass
class Backups:
    """The full-action backups of a batch of B pre-states at bars t−1: every position a's next
    state at bar t (`full_action_backups`)."""

    obs_t: Obs  # the K next observations: market [B, F], window [B, L, F], portfolio [B, K, P]
    position_tm1: jax.Array  # [B] signed fraction held at t−1
    position_t: jax.Array  # [B, K] signed fraction held after each position a
    ctx_tm1: BarContext  # [B] the bar t−1's return scale, drift and prior (`bar_context`)
    ctx_t: BarContext  # [B] and bar t's
    r_t: jax.Array  # [B, K] scaled rewards r_t(a)
    discount_t: jax.Array  # [B, K] γ·(1 − terminated_a)


def full_action_backups(state_tm1: env.EnvState, obs_tm1: Obs, fold: FoldData, cfg: RunConfig,
                        gamma: jax.Array) -> Backups:
    """`Backups` of pre-states `state_tm1` (leaves [B]) observed as `obs_tm1`: the env's own
    step from each with each of the K positions (`counterfactual_step`), observed at t."""
    bar_tm1 = state_tm1.t
    ctx_tm1 = bar_context(fold, bar_tm1, cfg.env)
    port_t, r_t, discount_t = jax.vmap(counterfactual_step,
                                       in_axes=(0, None, None, None, None, 0))(
        state_tm1, fold.prices, cfg.env, cfg.agent.reward_scale, gamma,
        ctx_tm1.prior)  # [B, K, ...]
    obs_t = observe_batch(fold, bar_tm1 + 1, port_t, cfg.features)  # one market row each
    return Backups(obs_t=obs_t, position_tm1=obs_tm1.portfolio[:, 0], position_t=port_t[..., 0],
                   ctx_tm1=ctx_tm1, ctx_t=bar_context(fold, bar_tm1 + 1, cfg.env),
                   r_t=r_t, discount_t=discount_t)


def traced_once(net: nn.Module) -> Callable:
    """`net.apply` as one nested jit for the update: its passes of equal input shapes (the
    online and target next-state passes) are traced and lowered once, not once each. XLA
    inlines the call, so the compiled program is the same and lowers sooner."""
    return jax.jit(net.apply)


def apply_positions(apply_fn, params: chex.ArrayTree, obs: Obs) -> chex.ArrayTree:
    """Q-network outputs at K portfolios that share one market: market [B, F], window
    [B, L, F], portfolio [B, K, P] → leaves [B, K, ...].

    `vmap` over K with the market parts unbatched: whatever depends on the market alone (the
    look-back context, the market VSN) is computed once per sample, not K times.
    """
    return jax.vmap(lambda p: apply_fn(params, obs.replace(portfolio=p)), in_axes=1,
                    out_axes=1)(obs.portfolio)


# --- gradient steps -------------------------------------------------------------------------


def apply_loss(state: TrainState, loss_fn, cfg: AgentConfig,
               hp: HParams) -> tuple[TrainState, LossInfo]:
    """One optimiser step on `loss_fn(params) -> (loss, LossInfo)`, then the target EMA over
    the whole params tree."""
    grads, info = jax.grad(loss_fn, has_aux=True)(state.params)
    info = info.replace(grad_norm=optax.tree.norm(grads))
    tx = make_optimizer(cfg, hp)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    # `replace`, not a new TrainState: a field the step does not touch is carried, so no
    # field added to the state later can be dropped here
    return state.replace(params=params, opt_state=opt_state, step=state.step + 1,
                         target_params=target_update(params, state.target_params,
                                                     cfg.tau)), info


def epsilon(env_steps: jax.Array, total_env_steps: int, cfg: AgentConfig,
            hp: HParams) -> jax.Array:
    """ε after `env_steps` env steps: linear from ε₀ = eps_start to ε₁ = eps_end over
    T = max(1, round(eps_decay_fraction · total_env_steps)) steps, then ε₁:
    ε(t) = ε₁ + (ε₀ − ε₁)·(1 − min(t, T)/T), with ε₁ and the fraction from `hp` (traced).
    """
    n = jnp.maximum(1.0, jnp.round(hp.eps_decay_fraction * total_env_steps))
    done = jnp.minimum(env_steps, n) / n
    return hp.eps_end + (cfg.eps_start - hp.eps_end) * (1.0 - done)


def random_actions(key: jax.Array, n: int, n_direction: int,
                   n_magnitude: int) -> tuple[jax.Array, jax.Array]:
    """Uniform random actions for a batch: (direction [N], magnitude [N]) int32 — the actions
    ε-greedy exploration takes from the same key at ε = 1, without evaluating the network."""
    _, k_dir, k_mag = jax.random.split(key, 3)
    return (jax.random.randint(k_dir, (n,), 0, n_direction).astype(jnp.int32),
            jax.random.randint(k_mag, (n,), 0, n_magnitude).astype(jnp.int32))


class Head(NamedTuple):
    """A Q-head: its network and what the training run, the greedy policy and `predict` ask of
    it. `heads.make_head(cfg)` builds the one `NetConfig.q_head` names; nothing else reads
    `q_head`. `out` below is the network's output (leaves with the leading axes given)."""

    network: nn.Module  # params = network.init(key, obs); out = network.apply(params, obs)
    # (key, out [N], position [N], ctx: BarContext [N], ε) -> ε-greedy (direction [N],
    # magnitude [N])
    explore: Callable[..., tuple[jax.Array, jax.Array]]
    # (state, sample: replay.NStep, obs_tm1 [B], y_tm1 [B], fold, hp) -> one gradient step
    update: Callable[..., tuple[TrainState, LossInfo]]
    # (out [S], position, ctx: BarContext []) -> an ensemble's target fraction and its Q
    # (reward units)
    greedy: Callable[..., tuple[jax.Array, jax.Array]]
    # (out [S], position, ctx []) -> each member's chosen `fraction` [S] and Q-values by name
    describe: Callable[..., dict[str, jax.Array]]
    labels: dict[str, tuple[str, ...]]  # the names of `describe`'s vector entries' elements
