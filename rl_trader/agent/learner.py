"""Double-DQN learner with branching (BDQ) targets, n-step returns, Huber loss and a target EMA.

Per transition, with branches b ∈ {direction, magnitude}, online Q and target Q̄:

    â_b     = argmax_a Q_b(s_t, a)                                  (double-DQN selection)
    V̄(s_t)  = mean_{b active at t} Q̄_b(s_t, â_b)                    (BDQ mean operator)
    y       = G_t + γ_t · V̄(s_t)                                    (`bdq_target`)
    δ_b     = y − Q_b(s_{t−1}, a_b)
    L       = mean_{b active at t−1} huber(δ_b) + λ_aux · (ŷ_aux − y_aux)²

Flat handling: when the direction is flat the magnitude has no effect on the position, so the
magnitude branch is *inactive*: its TD error is masked out at t−1 when the taken direction was
flat, and it is left out of the bootstrap mean at t when the greedy direction is flat.

Full-action (counterfactual) backups (`AgentConfig.backup = "all"`; action augmentation, Huang
2018). The market is exogenous, so from a stored pre-state s_{t−1} the env's own step gives the
reward r(a) and next state s'_a of every distinct position a ∈ {flat} ∪ {short, long} × M
(K = 2M + 1 positions, `position_actions`). Each gets a one-step double-DQN/BDQ target

    y(a)    = r(a) + γ · (1 − terminated_a) · V̄(s'_a)               (truncation bootstraps)

and both branches learn from every sample, with m̂ = argmax_m Q_mag(s_{t−1}, m) and
d̃ = argmax_{d ∈ {short, long}} Q_dir(s_{t−1}, d) (online, no gradient through the selection):

    δ_dir(d)  = y(d, m̂) − Q_dir(s_{t−1}, d)   for d ∈ {short, long};  δ_dir(flat) = y(flat) − Q_dir
    δ_mag(m)  = y(d̃, m) − Q_mag(s_{t−1}, m)   (magnitude only matters away from flat)
    L         = mean over the 3 + M errors of huber(δ) + λ_aux · (ŷ_aux − y_aux)²

The backup is one step: beyond s'_a the path depends on the policy, not on the market alone, so
an n-step counterfactual return would need the policy's own later actions from states that were
never visited; n-step returns apply to the taken path only. The K next observations share one
market row and window, so the network's market part is computed once per sample
(`apply_positions`).

The target network follows the online one by a Polyak EMA over the whole parameter tree in one
call, `optax.incremental_update(params, target_params, tau)` (`target_update`); nothing is
sliced, filtered or listed, so a module added later is covered with no change here.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import optax
from flax import struct

from rl_trader import env
from rl_trader.agent.networks import Obs, QOut
from rl_trader.config import SWEEPABLE, AgentConfig, EnvConfig
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
        """Every sweepable field of `cfg` as a float32 scalar."""
        return HParams(**{name: jnp.float32(getattr(cfg, name)) for name in SWEEPABLE})


@struct.dataclass
class LossInfo:
    loss: jax.Array
    td_abs: jax.Array  # mean |δ| over active branches
    aux_loss: jax.Array
    q_mean: jax.Array
    grad_norm: jax.Array = 0.0  # global norm of the gradient (set by `update`)


def kernel_mask(params: chex.ArrayTree) -> chex.ArrayTree:
    """True at the weight matrices (leaves named `kernel` or `*_kernel`), False at biases and
    LayerNorm scales and offsets: the leaves `weight_decay_on="kernels"` decays."""
    return jax.tree_util.tree_map_with_path(
        lambda path, _: str(getattr(path[-1], "key", path[-1])).endswith("kernel"), params)


def make_optimizer(cfg: AgentConfig, hp: HParams) -> optax.GradientTransformation:
    """One chain over all params: global-norm clip → Adam with decoupled weight decay λ:
    θ ← θ − η·(adam(g) + λ·m⊙θ), with η and λ from `hp` (traced scalars) and m = 1 on every
    leaf, or on the kernels only (`cfg.weight_decay_on`, `kernel_mask`).

    The state depends on neither η nor λ, so a population may share one optimiser structure.
    """
    mask = kernel_mask if cfg.weight_decay_on == "kernels" else None
    return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm),
                       optax.adamw(hp.learning_rate, weight_decay=hp.weight_decay, mask=mask))


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


def policy_params(state: TrainState, which: str) -> chex.ArrayTree:
    """The params the greedy policy is evaluated with: "online" or "target" (their EMA)."""
    return state.target_params if which == "target" else state.params


def huber(x: jax.Array, delta: float) -> jax.Array:
    """Huber loss: ½x² for |x| ≤ δ, δ(|x| − ½δ) beyond."""
    ax = jnp.abs(x)
    quad = jnp.minimum(ax, delta)
    return 0.5 * quad**2 + delta * (ax - quad)


def branch_mask(direction: jax.Array) -> jax.Array:
    """Active branches [2] (direction, magnitude) for a direction: magnitude off when flat."""
    active = direction != FLAT
    return jnp.stack([jnp.float32(1.0), active.astype(jnp.float32)])


def bdq_target(r_t: jax.Array, discount_t: jax.Array, q_dir_t_value: jax.Array,
               q_mag_t_value: jax.Array, q_dir_t_selector: jax.Array,
               q_mag_t_selector: jax.Array) -> jax.Array:
    """Double-DQN/BDQ target of one transition (scalar): y = r_t + γ_t · V̄(s_t), with V̄ the
    target values Q̄_b [3], [M] of the online argmaxes â_b (selectors [3], [M]) averaged over
    the branches active at â_dir, V̄(s_t) = mean_{b active} Q̄_b(s_t, â_b) (`branch_mask`)."""
    chex.assert_rank([r_t, discount_t], 0)
    chex.assert_rank([q_dir_t_value, q_mag_t_value, q_dir_t_selector, q_mag_t_selector], 1)
    best_dir = jnp.argmax(q_dir_t_selector)
    best_mag = jnp.argmax(q_mag_t_selector)
    v_t = jnp.stack([q_dir_t_value[best_dir], q_mag_t_value[best_mag]])
    mask_t = branch_mask(best_dir)
    return r_t + discount_t * jnp.sum(v_t * mask_t) / jnp.sum(mask_t)


def branching_double_q_td(q_dir_tm1: jax.Array, q_mag_tm1: jax.Array, a_dir_tm1: jax.Array,
                          a_mag_tm1: jax.Array, r_t: jax.Array, discount_t: jax.Array,
                          q_dir_t_value: jax.Array, q_mag_t_value: jax.Array,
                          q_dir_t_selector: jax.Array,
                          q_mag_t_selector: jax.Array) -> tuple[jax.Array, jax.Array]:
    """TD errors [2] and the active-branch mask [2] of one transition (see module docstring)."""
    chex.assert_rank([q_dir_tm1, q_mag_tm1], 1)
    chex.assert_rank([a_dir_tm1, a_mag_tm1], 0)
    target = bdq_target(r_t, discount_t, q_dir_t_value, q_mag_t_value, q_dir_t_selector,
                        q_mag_t_selector)
    q_tm1 = jnp.stack([q_dir_tm1[a_dir_tm1], q_mag_tm1[a_mag_tm1]])
    return jax.lax.stop_gradient(target) - q_tm1, branch_mask(a_dir_tm1)


def aux_loss_tm1(aux_tm1: jax.Array, aux_target_tm1: jax.Array) -> jax.Array:
    """Mean squared error of the predicted next-bar return over a batch [B]."""
    return jnp.mean((aux_tm1 - aux_target_tm1) ** 2)


def q_loss(out_tm1: QOut, out_t_online: QOut, out_t_target: QOut, a_dir_tm1: jax.Array,
           a_mag_tm1: jax.Array, r_t: jax.Array, discount_t: jax.Array, aux_target_tm1: jax.Array,
           cfg: AgentConfig, aux_weight: jax.Array) -> tuple[jax.Array, LossInfo]:
    """Batch loss of the taken actions: masked Huber over branches + λ_aux · MSE of the
    next-bar return (`aux_weight` a traced scalar), both means over the batch."""
    td, mask = jax.vmap(branching_double_q_td)(
        out_tm1.q_direction, out_tm1.q_magnitude, a_dir_tm1, a_mag_tm1, r_t, discount_t,
        out_t_target.q_direction, out_t_target.q_magnitude,
        out_t_online.q_direction, out_t_online.q_magnitude)
    chex.assert_equal_shape([td, mask])
    per_transition = jnp.sum(huber(td, cfg.huber_delta) * mask, -1) / jnp.sum(mask, -1)
    aux_loss = aux_loss_tm1(out_tm1.aux, aux_target_tm1)
    loss = jnp.mean(per_transition) + aux_weight * aux_loss
    info = LossInfo(loss=loss, td_abs=jnp.sum(jnp.abs(td) * mask) / jnp.sum(mask),
                    aux_loss=aux_loss, q_mean=jnp.mean(out_tm1.q_direction))
    return loss, info


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
                        reward_scale: float,
                        gamma: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Step the env from one pre-state (at bar t−1) with each of the K positions.

    Returns the next portfolio features [K, P] at bar t, the scaled rewards r_t(a) [K] and the
    discounts γ·(1 − terminated_a) [K] (truncation is not termination: it bootstraps).
    """
    chex.assert_rank(state_tm1.t, 0)
    direction, magnitude = position_actions(len(env_cfg.magnitudes))
    target = env.target_fraction(direction, magnitude, env_cfg)
    new, out = jax.vmap(env.step, in_axes=(None, 0, None, None))(state_tm1, target, prices,
                                                                 env_cfg)
    portfolio_t = jax.vmap(env.portfolio_features, in_axes=(0, None))(new, prices)
    return portfolio_t, out.reward * reward_scale, gamma * (1.0 - out.terminated)


def full_action_targets(r_t: jax.Array, discount_t: jax.Array, q_dir_t_value: jax.Array,
                        q_mag_t_value: jax.Array, q_dir_t_selector: jax.Array,
                        q_mag_t_selector: jax.Array) -> jax.Array:
    """y(a) = r_t(a) + discount_t(a) · V̄(s'_a) for the K positions of one pre-state: [K]
    (`bdq_target` at each next state).

    Inputs: r_t, discount_t [K]; Q̄ (value) and Q (selector) at the K next states [K, 3], [K, M].
    """
    chex.assert_rank([r_t, discount_t], 1)
    chex.assert_equal_shape_prefix([r_t, discount_t, q_dir_t_value, q_mag_t_value,
                                    q_dir_t_selector, q_mag_t_selector], 1)
    return jax.vmap(bdq_target)(r_t, discount_t, q_dir_t_value, q_mag_t_value,
                                q_dir_t_selector, q_mag_t_selector)


def full_action_td(q_dir_tm1: jax.Array, q_mag_tm1: jax.Array, y_t: jax.Array) -> jax.Array:
    """TD errors [3 + M] of one pre-state, all branch outputs at once (module docstring):
    direction short, flat, long against y(·, m̂), y(flat), then magnitudes against y(d̃, ·)."""
    n_mag = q_mag_tm1.shape[0]
    chex.assert_shape(q_dir_tm1, (3,))
    chex.assert_shape(y_t, (2 * n_mag + 1,))
    y_flat, y_side = y_t[0], y_t[1:].reshape(2, n_mag)  # rows: short, long
    m_hat = jnp.argmax(jax.lax.stop_gradient(q_mag_tm1))
    d_tilde = jnp.argmax(jax.lax.stop_gradient(q_dir_tm1[jnp.asarray([SHORT, LONG])]))
    y_dir = jnp.stack([y_side[0, m_hat], y_flat, y_side[1, m_hat]])
    target = jax.lax.stop_gradient(jnp.concatenate([y_dir, y_side[d_tilde]]))
    return target - jnp.concatenate([q_dir_tm1, q_mag_tm1])


def full_action_loss(out_tm1: QOut, out_t_online: QOut, out_t_target: QOut, r_t: jax.Array,
                     discount_t: jax.Array, aux_target_tm1: jax.Array, cfg: AgentConfig,
                     aux_weight: jax.Array) -> tuple[jax.Array, LossInfo]:
    """Batch loss of full-action backups: mean Huber over the 3 + M branch outputs + λ_aux ·
    MSE of the next-bar return, both means over the batch. Q at t−1 [B, ...]; Q at the K
    next states [B, K, ...]; r_t, discount_t [B, K] (`counterfactual_step`)."""
    y = jax.vmap(full_action_targets)(r_t, discount_t, out_t_target.q_direction,
                                      out_t_target.q_magnitude, out_t_online.q_direction,
                                      out_t_online.q_magnitude)
    td = jax.vmap(full_action_td)(out_tm1.q_direction, out_tm1.q_magnitude, y)
    aux_loss = aux_loss_tm1(out_tm1.aux, aux_target_tm1)
    loss = jnp.mean(jnp.mean(huber(td, cfg.huber_delta), -1)) + aux_weight * aux_loss
    info = LossInfo(loss=loss, td_abs=jnp.mean(jnp.abs(td)), aux_loss=aux_loss,
                    q_mean=jnp.mean(out_tm1.q_direction))
    return loss, info


def apply_positions(apply_fn, params: chex.ArrayTree, obs: Obs) -> QOut:
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
    return TrainState(params=params, target_params=target_update(params, state.target_params,
                                                                  cfg.tau),
                      opt_state=opt_state, step=state.step + 1), info


def update(state: TrainState, apply_fn, obs_tm1: Obs, obs_t: Obs, a_dir_tm1: jax.Array,
           a_mag_tm1: jax.Array, r_t: jax.Array, discount_t: jax.Array,
           aux_target_tm1: jax.Array, cfg: AgentConfig,
           hp: HParams) -> tuple[TrainState, LossInfo]:
    """One gradient step on a batch of taken (n-step) transitions (`q_loss`)."""
    out_t_target = apply_fn(state.target_params, obs_t)
    out_t_online = jax.lax.stop_gradient(apply_fn(state.params, obs_t))

    def loss_fn(params):
        return q_loss(apply_fn(params, obs_tm1), out_t_online, out_t_target, a_dir_tm1,
                      a_mag_tm1, r_t, discount_t, aux_target_tm1, cfg, hp.aux_weight)

    return apply_loss(state, loss_fn, cfg, hp)


def full_action_update(state: TrainState, apply_fn, obs_tm1: Obs, obs_t: Obs, r_t: jax.Array,
                       discount_t: jax.Array, aux_target_tm1: jax.Array, cfg: AgentConfig,
                       hp: HParams) -> tuple[TrainState, LossInfo]:
    """One gradient step on a batch of full-action backups (`full_action_loss`): obs_t holds
    the K next portfolios [B, K, P] of each sample; r_t, discount_t [B, K]."""
    out_t_target = apply_positions(apply_fn, state.target_params, obs_t)
    out_t_online = jax.lax.stop_gradient(apply_positions(apply_fn, state.params, obs_t))

    def loss_fn(params):
        return full_action_loss(apply_fn(params, obs_tm1), out_t_online, out_t_target, r_t,
                                discount_t, aux_target_tm1, cfg, hp.aux_weight)

    return apply_loss(state, loss_fn, cfg, hp)


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
    `epsilon_greedy` takes from the same key at ε = 1, without evaluating the network."""
    _, k_dir, k_mag = jax.random.split(key, 3)
    return (jax.random.randint(k_dir, (n,), 0, n_direction).astype(jnp.int32),
            jax.random.randint(k_mag, (n,), 0, n_magnitude).astype(jnp.int32))


def epsilon_greedy(key: jax.Array, q: QOut, epsilon: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per-branch ε-greedy actions for a batch: (direction [N], magnitude [N]) int32."""
    n = q.q_direction.shape[0]
    k_explore = jax.random.split(key, 3)[0]
    explore = jax.random.uniform(k_explore, (2, n)) < epsilon
    rand_dir, rand_mag = random_actions(key, n, q.q_direction.shape[-1],
                                        q.q_magnitude.shape[-1])
    direction = jnp.where(explore[0], rand_dir, jnp.argmax(q.q_direction, -1))
    magnitude = jnp.where(explore[1], rand_mag, jnp.argmax(q.q_magnitude, -1))
    return direction.astype(jnp.int32), magnitude.astype(jnp.int32)
