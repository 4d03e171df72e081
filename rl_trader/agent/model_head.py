"""The model head's Q-function, assembled from the known reward, and its learning step.

The market is exogenous and the learning reward is a known function of the next bar's log
return ℓ, the held signed fraction p and the target a (`env.expected_reward`). With x the
market state at the close of bar t and s the train std of ℓ (`FoldData.return_scale`):

    Q(x, p, a) = ρ·E[R(p → a) | x] + C(x, p, a)
               = ρ·[a·(μ + ½m₂) − ½κ·a²·m₂ − cost(a − p)] + C(x, p, a),
    μ = s·μ̂(x),  m₂ = s²·m̂₂(x)

ρ = `reward_scale`, κ = `env.risk_curvature`, the cost the env's own `trade_cost`; μ̂ and m̂₂
are the network's forecasts of y = ℓ/s (the aux target) and y², and C = γ·E[V(x', p'_a) | x]
is the continuation: the discounted value of holding a into the next bar, W(a) of
`networks.ModelQNetwork` (a branching dueling head over the next position). Only C is left to
TD. Each stored pre-state backs up every one of the K = 2M + 1 positions a ("full-action
backups", `learner.counterfactual_step`: the env's own step gives the next position p'_a and
portfolio features), with double DQN (online selects, target evaluates):

    â'_a = argmax_{a'} Q(x_{t+1}, p'_a, a'),   y_a = γ·(1 − terminated_a)·Q̄(x_{t+1}, p'_a, â'_a)
    δ_a  = y_a − C(x_t, p_t, a)

and the forecasts are plain regressions with exact targets on the sampled training bars:

    L = mean_{b, a} huber(δ_a) + λ_aux·[mean_b (μ̂ − y)² + mean_b (m̂₂ − y²)²]

The target network is the Polyak EMA of the whole tree (`agent.apply_loss`). Segment ends
bootstrap (truncation), ruin does not.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from rl_trader import env
from rl_trader.agent.learner import (
    HParams,
    LossInfo,
    TrainState,
    apply_loss,
    apply_positions,
    huber,
    position_actions,
    random_actions,
)
from rl_trader.agent.networks import ModelOut, Obs
from rl_trader.config import AgentConfig, EnvConfig
from rl_trader.env import FLAT


def position_fractions(cfg: EnvConfig) -> jax.Array:
    """The K positions of `learner.position_actions` as signed fractions of equity [K]."""
    direction, magnitude = position_actions(len(cfg.magnitudes))
    return env.target_fraction(direction, magnitude, cfg)


def continuation(out: ModelOut) -> jax.Array:
    """C(a) for the K positions [..., K] from the branching head: W(flat) = w_dir[flat],
    W(d, m) = w_dir[d] + w_mag[m] for d ∈ {short, long} (the `position_actions` order)."""
    w_dir, w_mag = out.w_direction, out.w_magnitude
    lead = w_mag.shape[:-1]
    short = w_dir[..., FLAT - 1, None] + w_mag
    long = w_dir[..., FLAT + 1, None] + w_mag
    flat = jnp.broadcast_to(w_dir[..., FLAT, None], lead + (1,))
    return jnp.concatenate([flat, short, long], -1)


def assemble(out: ModelOut, position: jax.Array, return_scale: jax.Array, cfg: EnvConfig,
             reward_scale: float) -> jax.Array:
    """Q(x, p, a) for the K positions a [..., K] (module docstring): `out` with leading axes
    [...], the held fraction p = `position` [...] and s = `return_scale` [...]."""
    chex.assert_equal_shape([out.aux, position])
    a = position_fractions(cfg)
    mean = (return_scale * out.aux)[..., None]
    second = (return_scale**2 * out.second_moment)[..., None]
    reward = env.expected_reward(position[..., None], a, mean, second, cfg)
    return reward_scale * reward + continuation(out)


def model_td(c_tm1: jax.Array, q_t_value: jax.Array, q_t_selector: jax.Array,
             discount_t: jax.Array) -> jax.Array:
    """TD errors δ [K] of one pre-state: C(x_t, p_t, ·) [K] against y_a = discount_a ·
    Q̄(x_{t+1}, p'_a, argmax Q(x_{t+1}, p'_a, ·)), the next states' Q [K (a), K (a')] from
    the target (value) and online (selector) networks; discount_t [K] = γ·(1 − terminated)."""
    chex.assert_rank(c_tm1, 1)
    chex.assert_equal_shape([q_t_value, q_t_selector])
    chex.assert_shape(q_t_value, c_tm1.shape * 2)
    best = jnp.argmax(q_t_selector, -1)
    y = discount_t * jnp.take_along_axis(q_t_value, best[:, None], -1)[:, 0]
    return jax.lax.stop_gradient(y) - c_tm1


def forecast_losses(out_tm1: ModelOut, y_tm1: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The forecasts' regression losses on the realised next-bar target y [B]:
    (mean (μ̂ − y)², mean (m̂₂ − y²)²)."""
    return (jnp.mean((out_tm1.aux - y_tm1) ** 2),
            jnp.mean((out_tm1.second_moment - y_tm1**2) ** 2))


def model_loss(out_tm1: ModelOut, out_t_online: ModelOut, out_t_target: ModelOut,
               position_tm1: jax.Array, position_t: jax.Array, scale_tm1: jax.Array,
               scale_t: jax.Array, y_tm1: jax.Array, discount_t: jax.Array,
               cfg: AgentConfig, env_cfg: EnvConfig,
               aux_weight: jax.Array) -> tuple[jax.Array, LossInfo]:
    """The batch loss of the module docstring. `out_tm1` leaves [B, ...] at the sampled
    pre-states (p = `position_tm1` [B], s = `scale_tm1` [B]); the next states' outputs [B, K,
    ...] (p'_a = `position_t` [B, K], s = `scale_t` [B]); y_tm1 [B] the aux targets;
    discount_t [B, K]; `aux_weight` λ_aux."""
    n_pos = position_t.shape[-1]
    chex.assert_shape([position_tm1, scale_tm1, scale_t, y_tm1], position_t.shape[:1])
    chex.assert_equal_shape([position_t, discount_t])
    s_t = jnp.broadcast_to(scale_t[:, None], position_t.shape)
    q_value = assemble(out_t_target, position_t, s_t, env_cfg, cfg.reward_scale)  # [B, K, K]
    q_select = assemble(out_t_online, position_t, s_t, env_cfg, cfg.reward_scale)
    c_tm1 = continuation(out_tm1)  # [B, K]
    chex.assert_shape(c_tm1, (position_t.shape[0], n_pos))
    td = jax.vmap(model_td)(c_tm1, q_value, q_select, discount_t)
    mean_loss, second_loss = forecast_losses(out_tm1, y_tm1)
    loss = (jnp.mean(jnp.mean(huber(td, cfg.huber_delta), -1))
            + aux_weight * (mean_loss + second_loss))
    q_tm1 = assemble(jax.lax.stop_gradient(out_tm1), position_tm1, scale_tm1, env_cfg,
                     cfg.reward_scale)
    return loss, LossInfo(loss=loss, td_abs=jnp.mean(jnp.abs(td)), aux_loss=mean_loss,
                          q_mean=jnp.mean(jnp.max(q_tm1, -1)))


def model_update(state: TrainState, apply_fn, obs_tm1: Obs, obs_t: Obs, position_tm1: jax.Array,
                 position_t: jax.Array, scale_tm1: jax.Array, scale_t: jax.Array,
                 y_tm1: jax.Array, discount_t: jax.Array, cfg: AgentConfig,
                 env_cfg: EnvConfig, hp: HParams) -> tuple[TrainState, LossInfo]:
    """One gradient step of the model head (`model_loss`): obs_t holds the K next portfolios
    [B, K, P] of each sample (one market row each)."""
    out_t_target = apply_positions(apply_fn, state.target_params, obs_t)
    out_t_online = jax.lax.stop_gradient(apply_positions(apply_fn, state.params, obs_t))

    def loss_fn(params):
        return model_loss(apply_fn(params, obs_tm1), out_t_online, out_t_target, position_tm1,
                          position_t, scale_tm1, scale_t, y_tm1, discount_t, cfg, env_cfg,
                          hp.aux_weight)

    return apply_loss(state, loss_fn, cfg, hp)


def greedy_actions(q: jax.Array, n_magnitudes: int) -> tuple[jax.Array, jax.Array]:
    """The (direction, magnitude) int32 [...] of the best of the K positions, q [..., K]."""
    direction, magnitude = position_actions(n_magnitudes)
    best = jnp.argmax(q, -1)
    return direction[best], magnitude[best]


def epsilon_greedy_positions(key: jax.Array, q: jax.Array,
                             epsilon: jax.Array) -> tuple[jax.Array, jax.Array]:
    """ε-greedy over the K positions for a batch, q [N, K]: with probability ε a uniformly
    random (direction, magnitude) (`agent.random_actions`), else the greedy position;
    (direction [N], magnitude [N]) int32."""
    n, n_pos = q.shape
    n_mag = (n_pos - 1) // 2
    explore = jax.random.uniform(jax.random.split(key, 3)[0], (n,)) < epsilon
    rand_dir, rand_mag = random_actions(key, n, env.N_DIRECTIONS, n_mag)
    best_dir, best_mag = greedy_actions(q, n_mag)
    return (jnp.where(explore, rand_dir, best_dir).astype(jnp.int32),
            jnp.where(explore, rand_mag, best_mag).astype(jnp.int32))
