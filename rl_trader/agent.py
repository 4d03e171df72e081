"""Double-DQN learner with branching (BDQ) targets, n-step returns, Huber loss and a target EMA.

Per transition, with branches b ∈ {direction, magnitude}, online Q and target Q̄:

    â_b     = argmax_a Q_b(s_t, a)                                  (double-DQN selection)
    y       = G_t + γ_t · mean_{b active at t} Q̄_b(s_t, â_b)        (BDQ mean operator)
    δ_b     = y − Q_b(s_{t−1}, a_b)
    L       = mean_{b active at t−1} huber(δ_b) + λ_aux · (ŷ_aux − y_aux)²

Flat handling: when the direction is flat the magnitude has no effect on the position, so the
magnitude branch is *inactive*: its TD error is masked out at t−1 when the taken direction was
flat, and it is left out of the bootstrap mean at t when the greedy direction is flat.

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

from rl_trader.config import SWEEPABLE, AgentConfig
from rl_trader.env import FLAT
from rl_trader.networks import Obs, QOut


@struct.dataclass
class TrainState:
    """Learner state: online and target params, optimiser state, update count."""

    params: chex.ArrayTree
    target_params: chex.ArrayTree
    opt_state: optax.OptState
    step: jax.Array  # int32: gradient updates done


def _hparams_from_config(cfg: AgentConfig) -> HParams:
    """Every sweepable field of `cfg` as a float32 scalar."""
    return HParams(**{name: jnp.float32(getattr(cfg, name)) for name in SWEEPABLE})


# Hyper-parameters that may differ between members of a vmapped population: one traced float32
# scalar per sweepable config field (`config.SWEEPABLE`, declared with `option(sweep=True)`),
# so one compiled program serves a whole sweep. `tau` stays a static Python float.
HParams = struct.dataclass(type("HParams", (), {
    "__annotations__": {name: jax.Array for name in SWEEPABLE},
    "__module__": __name__,
    "__doc__": "Traced hyper-parameters of one member: the fields of `config.SWEEPABLE`.",
    "from_config": staticmethod(_hparams_from_config)}))


@struct.dataclass
class LossInfo:
    loss: jax.Array
    td_abs: jax.Array  # mean |δ| over active branches
    aux_loss: jax.Array
    q_mean: jax.Array
    grad_norm: jax.Array = 0.0  # global norm of the gradient (set by `update`)


def make_optimizer(cfg: AgentConfig, hp: HParams | None = None) -> optax.GradientTransformation:
    """One chain over all params: global-norm clip → Adam with decoupled weight decay λ:
    θ ← θ − η·(adam(g) + λ·θ).

    `hp` (traced scalars) overrides the config's η and λ; the state depends on neither, so a
    population may share one optimiser structure.
    """
    hp = HParams.from_config(cfg) if hp is None else hp
    return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm),
                       optax.adamw(hp.learning_rate, weight_decay=hp.weight_decay))


def init_train_state(params: chex.ArrayTree, cfg: AgentConfig) -> TrainState:
    """Fresh learner state; the target starts equal to the online params."""
    return TrainState(params=params, target_params=jax.tree.map(jnp.array, params),
                      opt_state=make_optimizer(cfg).init(params), step=jnp.int32(0))


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
    return jnp.stack([jnp.float32(1.0), (direction != FLAT).astype(jnp.float32)])


def branching_double_q_td(q_dir_tm1: jax.Array, q_mag_tm1: jax.Array, a_dir_tm1: jax.Array,
                          a_mag_tm1: jax.Array, r_t: jax.Array, discount_t: jax.Array,
                          q_dir_t_value: jax.Array, q_mag_t_value: jax.Array,
                          q_dir_t_selector: jax.Array,
                          q_mag_t_selector: jax.Array) -> tuple[jax.Array, jax.Array]:
    """TD errors [2] and the active-branch mask [2] of one transition (see module docstring)."""
    chex.assert_rank([q_dir_tm1, q_mag_tm1, q_dir_t_value, q_mag_t_value], 1)
    chex.assert_rank([a_dir_tm1, a_mag_tm1, r_t, discount_t], 0)
    best_dir = jnp.argmax(q_dir_t_selector)
    best_mag = jnp.argmax(q_mag_t_selector)
    v_t = jnp.stack([q_dir_t_value[best_dir], q_mag_t_value[best_mag]])
    mask_t = branch_mask(best_dir)
    target = r_t + discount_t * jnp.sum(v_t * mask_t) / jnp.sum(mask_t)
    q_tm1 = jnp.stack([q_dir_tm1[a_dir_tm1], q_mag_tm1[a_mag_tm1]])
    return jax.lax.stop_gradient(target) - q_tm1, branch_mask(a_dir_tm1)


def q_loss(out_tm1: QOut, out_t_online: QOut, out_t_target: QOut, a_dir_tm1: jax.Array,
           a_mag_tm1: jax.Array, r_t: jax.Array, discount_t: jax.Array, aux_target_tm1: jax.Array,
           cfg: AgentConfig, aux_weight: jax.Array | None = None) -> tuple[jax.Array, LossInfo]:
    """Batch loss: masked Huber over branches + λ_aux · MSE of the next-bar return.

    `aux_weight` (a traced scalar) overrides `cfg.aux_weight`.
    """
    aux_weight = cfg.aux_weight if aux_weight is None else aux_weight
    td, mask = jax.vmap(branching_double_q_td)(
        out_tm1.q_direction, out_tm1.q_magnitude, a_dir_tm1, a_mag_tm1, r_t, discount_t,
        out_t_target.q_direction, out_t_target.q_magnitude,
        out_t_online.q_direction, out_t_online.q_magnitude)
    chex.assert_equal_shape([td, mask])
    per_transition = jnp.sum(huber(td, cfg.huber_delta) * mask, -1) / jnp.sum(mask, -1)
    aux_loss = jnp.mean((out_tm1.aux - aux_target_tm1) ** 2)
    loss = jnp.mean(per_transition) + aux_weight * aux_loss
    info = LossInfo(loss=loss, td_abs=jnp.sum(jnp.abs(td) * mask) / jnp.sum(mask),
                    aux_loss=aux_loss, q_mean=jnp.mean(out_tm1.q_direction))
    return loss, info


def update(state: TrainState, apply_fn, obs_tm1: Obs, obs_t: Obs, a_dir_tm1: jax.Array,
           a_mag_tm1: jax.Array, r_t: jax.Array, discount_t: jax.Array,
           aux_target_tm1: jax.Array, cfg: AgentConfig,
           hp: HParams | None = None) -> tuple[TrainState, LossInfo]:
    """One gradient step on a batch, then the target EMA over the whole params tree."""
    hp = HParams.from_config(cfg) if hp is None else hp
    out_t_target = apply_fn(state.target_params, obs_t)
    out_t_online = jax.lax.stop_gradient(apply_fn(state.params, obs_t))

    def loss_fn(params):
        out_tm1 = apply_fn(params, obs_tm1)
        return q_loss(out_tm1, out_t_online, out_t_target, a_dir_tm1, a_mag_tm1, r_t,
                      discount_t, aux_target_tm1, cfg, hp.aux_weight)

    grads, info = jax.grad(loss_fn, has_aux=True)(state.params)
    info = info.replace(grad_norm=optax.tree.norm(grads))
    tx = make_optimizer(cfg, hp)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return TrainState(params=params, target_params=target_update(params, state.target_params,
                                                                  cfg.tau),
                      opt_state=opt_state, step=state.step + 1), info


def epsilon(env_steps: jax.Array, total_env_steps: int, cfg: AgentConfig,
            hp: HParams | None = None) -> jax.Array:
    """ε after `env_steps` env steps: linear from ε₀ = eps_start to ε₁ = eps_end over
    T = max(1, round(eps_decay_fraction · total_env_steps)) steps, then ε₁:
    ε(t) = ε₁ + (ε₀ − ε₁)·(1 − min(t, T)/T).

    `hp` (traced scalars) overrides the config's eps_end and eps_decay_fraction.
    """
    hp = HParams.from_config(cfg) if hp is None else hp
    n = jnp.maximum(1.0, jnp.round(hp.eps_decay_fraction * total_env_steps))
    done = jnp.minimum(env_steps, n) / n
    return hp.eps_end + (cfg.eps_start - hp.eps_end) * (1.0 - done)


def epsilon_greedy(key: jax.Array, q: QOut, epsilon: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per-branch ε-greedy actions for a batch: (direction [N], magnitude [N]) int32."""
    n = q.q_direction.shape[0]
    k_explore, k_dir, k_mag = jax.random.split(key, 3)
    explore = jax.random.uniform(k_explore, (2, n)) < epsilon
    rand_dir = jax.random.randint(k_dir, (n,), 0, q.q_direction.shape[-1])
    rand_mag = jax.random.randint(k_mag, (n,), 0, q.q_magnitude.shape[-1])
    direction = jnp.where(explore[0], rand_dir, jnp.argmax(q.q_direction, -1))
    magnitude = jnp.where(explore[1], rand_mag, jnp.argmax(q.q_magnitude, -1))
    return direction.astype(jnp.int32), magnitude.astype(jnp.int32)
