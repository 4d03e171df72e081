"""The generic Q-head: a branching dueling Q-network learnt by double DQN (the control the model
head is measured against).

Per transition, with branches b ∈ {direction, magnitude}, online Q and target Q̄:

    â_b     = argmax_a Q_b(s_t, a)                                  (double-DQN selection)
    V̄(s_t)  = mean_{b active at t} Q̄_b(s_t, â_b)                    (BDQ mean operator)
    y       = G_t + γ_t · V̄(s_t)                                    (`bdq_target`)
    δ_b     = y − Q_b(s_{t−1}, a_b)
    L       = mean_{b active at t−1} huber(δ_b) + λ_aux · (ŷ_aux − y_aux)²

with G_t the n-step return of the taken path (`AgentConfig.backup = "taken"`, the default for
this head). Flat handling: when the direction is flat the magnitude has no effect on the
position, so the magnitude branch is *inactive*: its TD error is masked out at t−1 when the
taken direction was flat, and it is left out of the bootstrap mean at t when the greedy
direction is flat.

With `backup = "all"` every sample backs up all K positions (`learner.full_action_backups`),
each with a one-step target y(a) = r(a) + γ·(1 − terminated_a)·V̄(s'_a), and both branches
learn from every sample, with m̂ = argmax_m Q_mag(s_{t−1}, m) and
d̃ = argmax_{d ∈ {short, long}} Q_dir(s_{t−1}, d) (online, no gradient through the selection):

    δ_dir(d)  = y(d, m̂) − Q_dir(s_{t−1}, d)   for d ∈ {short, long};  δ_dir(flat) = y(flat) − Q_dir
    δ_mag(m)  = y(d̃, m) − Q_mag(s_{t−1}, m)   (magnitude only matters away from flat)
    L         = mean over the 3 + M errors of huber(δ) + λ_aux · (ŷ_aux − y_aux)²

The network: Q_b(s, a) = V(s) + A_b(s, a) − mean_a' A_b(s, a') for each branch b (BDQ) on a GRN
trunk over the market and portfolio encodings (`networks.encode`), and an auxiliary head ŷ of
the next-bar return on the market encoding.
"""

from __future__ import annotations

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from rl_trader import env
from rl_trader.agent.learner import (
    LONG,
    SHORT,
    Backups,
    Head,
    HParams,
    LossInfo,
    TrainState,
    apply_loss,
    apply_positions,
    full_action_backups,
    huber,
    random_actions,
    traced_once,
)
from rl_trader.agent.networks import GRN, centred, encode, head, with_context
from rl_trader.agent.replay import NStep
from rl_trader.config import AgentConfig, NetConfig, RunConfig
from rl_trader.data.fold_data import BarContext, FoldData, Obs, observe_batch
from rl_trader.env import FLAT

Branches = tuple[jax.Array, jax.Array]  # (direction, magnitude): one array per branch


@struct.dataclass
class QOut:
    """The generic network's outputs; leading axes follow the input's."""

    q_direction: jax.Array  # [..., 3]  (short, flat, long)
    q_magnitude: jax.Array  # [..., M]
    aux: jax.Array  # [...]  predicted next-bar return (normalised units)
    market_weights: jax.Array  # [..., F]  VSN selection weights (sum to 1)
    portfolio_weights: jax.Array  # [..., P]


class QNetwork(nn.Module):
    """Branching dueling Q-network over the market and portfolio groups, with an aux head."""

    cfg: NetConfig
    n_magnitudes: int

    @nn.compact
    def __call__(self, obs: Obs) -> QOut:
        cfg, p = self.cfg, self.cfg.precision
        context, market, w_market, portfolio, w_port = encode(obs, cfg)
        trunk = GRN(cfg.trunk, precision=p, name="trunk")(
            jnp.concatenate([market, portfolio], -1), context)
        value = head(1, "value", trunk, p)
        adv_dir = head(3, "adv_direction", trunk, p)
        adv_mag = head(self.n_magnitudes, "adv_magnitude", trunk, p)
        aux = head(1, "aux", with_context(market, context), p)[..., 0]
        return QOut(q_direction=value + centred(adv_dir), q_magnitude=value + centred(adv_mag),
                    aux=aux, market_weights=w_market, portfolio_weights=w_port)


def branch_mask(direction: jax.Array) -> jax.Array:
    """Active branches [2] (direction, magnitude) for a direction: magnitude off when flat."""
    active = direction != FLAT
    return jnp.stack([jnp.float32(1.0), active.astype(jnp.float32)])


def bdq_target(r_t: jax.Array, discount_t: jax.Array, q_t_value: Branches,
               q_t_selector: Branches) -> jax.Array:
    """Double-DQN/BDQ target of one transition (scalar): y = r_t + γ_t · V̄(s_t), with V̄ the
    target values Q̄_b ([3], [M]) of the online argmaxes â_b (selectors [3], [M]) averaged over
    the branches active at â_dir, V̄(s_t) = mean_{b active} Q̄_b(s_t, â_b) (`branch_mask`)."""
    chex.assert_rank([r_t, discount_t], 0)
    chex.assert_rank([*q_t_value, *q_t_selector], 1)
    best_dir = jnp.argmax(q_t_selector[0])
    best_mag = jnp.argmax(q_t_selector[1])
    v_t = jnp.stack([q_t_value[0][best_dir], q_t_value[1][best_mag]])
    mask_t = branch_mask(best_dir)
    return r_t + discount_t * jnp.sum(v_t * mask_t) / jnp.sum(mask_t)


def branching_double_q_td(q_tm1: Branches, a_tm1: Branches, r_t: jax.Array,
                          discount_t: jax.Array, q_t_value: Branches,
                          q_t_selector: Branches) -> tuple[jax.Array, jax.Array]:
    """TD errors [2] and the active-branch mask [2] of one transition (module docstring):
    Q at t−1 ([3], [M]), the taken action (direction, magnitude), and Q̄, Q at t."""
    chex.assert_rank([*q_tm1], 1)
    chex.assert_rank([*a_tm1], 0)
    target = bdq_target(r_t, discount_t, q_t_value, q_t_selector)
    q_taken = jnp.stack([q_tm1[0][a_tm1[0]], q_tm1[1][a_tm1[1]]])
    return jax.lax.stop_gradient(target) - q_taken, branch_mask(a_tm1[0])


def aux_loss_tm1(aux_tm1: jax.Array, aux_target_tm1: jax.Array) -> jax.Array:
    """Mean squared error of the predicted next-bar return over a batch [B]."""
    return jnp.mean((aux_tm1 - aux_target_tm1) ** 2)


def branches(out: QOut) -> Branches:
    """The (direction, magnitude) Q-values of a network output."""
    return out.q_direction, out.q_magnitude


def q_loss(out_tm1: QOut, out_t_online: QOut, out_t_target: QOut, sample: NStep,
           y_tm1: jax.Array, cfg: AgentConfig, aux_weight: jax.Array) -> tuple[jax.Array, LossInfo]:
    """Batch loss of the taken n-step transitions `sample` [B]: masked Huber over branches +
    λ_aux · MSE of the next-bar return y_tm1 [B] (`aux_weight` a traced scalar), both means
    over the batch."""
    td, mask = jax.vmap(branching_double_q_td)(
        branches(out_tm1), (sample.direction_tm1, sample.magnitude_tm1), sample.return_t,
        sample.discount_t, branches(out_t_target), branches(out_t_online))
    chex.assert_equal_shape([td, mask])
    per_transition = jnp.sum(huber(td, cfg.huber_delta) * mask, -1) / jnp.sum(mask, -1)
    aux_loss = aux_loss_tm1(out_tm1.aux, y_tm1)
    loss = jnp.mean(per_transition) + aux_weight * aux_loss
    info = LossInfo(loss=loss, td_abs=jnp.sum(jnp.abs(td) * mask) / jnp.sum(mask),
                    aux_loss=aux_loss, q_mean=jnp.mean(out_tm1.q_direction))
    return loss, info


def full_action_targets(r_t: jax.Array, discount_t: jax.Array, q_t_value: Branches,
                        q_t_selector: Branches) -> jax.Array:
    """y(a) = r_t(a) + discount_t(a) · V̄(s'_a) for the K positions of one pre-state: [K]
    (`bdq_target` at each next state).

    Inputs: r_t, discount_t [K]; Q̄ (value) and Q (selector) at the K next states [K, 3], [K, M].
    """
    chex.assert_rank([r_t, discount_t], 1)
    chex.assert_equal_shape_prefix([r_t, discount_t, *q_t_value, *q_t_selector], 1)
    return jax.vmap(bdq_target)(r_t, discount_t, q_t_value, q_t_selector)


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


def full_action_loss(out_tm1: QOut, out_t_online: QOut, out_t_target: QOut, backups: Backups,
                     y_tm1: jax.Array, cfg: AgentConfig,
                     aux_weight: jax.Array) -> tuple[jax.Array, LossInfo]:
    """Batch loss of full-action backups: mean Huber over the 3 + M branch outputs + λ_aux ·
    MSE of the next-bar return, both means over the batch. Q at t−1 [B, ...]; Q at the K
    next states [B, K, ...]; the backups' r_t, discount_t [B, K]."""
    y = jax.vmap(full_action_targets)(backups.r_t, backups.discount_t, branches(out_t_target),
                                      branches(out_t_online))
    td = jax.vmap(full_action_td)(out_tm1.q_direction, out_tm1.q_magnitude, y)
    aux_loss = aux_loss_tm1(out_tm1.aux, y_tm1)
    loss = jnp.mean(jnp.mean(huber(td, cfg.huber_delta), -1)) + aux_weight * aux_loss
    info = LossInfo(loss=loss, td_abs=jnp.mean(jnp.abs(td)), aux_loss=aux_loss,
                    q_mean=jnp.mean(out_tm1.q_direction))
    return loss, info


def update(state: TrainState, apply_fn, obs_tm1: Obs, obs_t: Obs, sample: NStep,
           y_tm1: jax.Array, cfg: AgentConfig, hp: HParams) -> tuple[TrainState, LossInfo]:
    """One gradient step on a batch of taken (n-step) transitions (`q_loss`); obs_t [B] the
    observations the n-step returns bootstrap from."""
    out_t_target = apply_fn(state.target_params, obs_t)
    out_t_online = jax.lax.stop_gradient(apply_fn(state.params, obs_t))

    def loss_fn(params):
        return q_loss(apply_fn(params, obs_tm1), out_t_online, out_t_target, sample, y_tm1,
                      cfg, hp.aux_weight)

    return apply_loss(state, loss_fn, cfg, hp)


def full_action_update(state: TrainState, apply_fn, obs_tm1: Obs, backups: Backups,
                       y_tm1: jax.Array, cfg: AgentConfig,
                       hp: HParams) -> tuple[TrainState, LossInfo]:
    """One gradient step on a batch of full-action backups (`full_action_loss`)."""
    out_t_target = apply_positions(apply_fn, state.target_params, backups.obs_t)
    out_t_online = jax.lax.stop_gradient(apply_positions(apply_fn, state.params, backups.obs_t))

    def loss_fn(params):
        return full_action_loss(apply_fn(params, obs_tm1), out_t_online, out_t_target, backups,
                                y_tm1, cfg, hp.aux_weight)

    return apply_loss(state, loss_fn, cfg, hp)


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


def greedy(out: QOut, prior: jax.Array, cfg: RunConfig) -> tuple[jax.Array, jax.Array]:
    """The ensemble's choice from its members' outputs [S]: each member takes its greedy action
    (argmax per branch) and the ensemble holds their mean target, p* = (1/S) Σ_s p*_s; its Q is
    the members' mean of Q(s, â) = mean over the active branches b of Q_b(s, â_b) (the value
    the learner bootstraps from). `prior`: the position the zero action holds."""
    d, m = jnp.argmax(out.q_direction, -1), jnp.argmax(out.q_magnitude, -1)
    targets = env.target_fraction(d, m, cfg.env, prior)
    q_dir = jnp.take_along_axis(out.q_direction, d[:, None], -1)[:, 0]
    q_mag = jnp.take_along_axis(out.q_magnitude, m[:, None], -1)[:, 0]
    mag_active = jax.vmap(branch_mask)(d)[:, 1]
    q_greedy = jnp.where(mag_active > 0, 0.5 * (q_dir + q_mag), q_dir)
    return targets.mean(), q_greedy.mean()


def make(cfg: RunConfig) -> Head:
    """The generic head of `cfg` (`learner.Head`)."""
    sizes = env.action_sizes(cfg.env)
    net = QNetwork(cfg.net, len(sizes))
    apply = traced_once(net)

    def learn(state: TrainState, sample: NStep, obs_tm1: Obs, y_tm1: jax.Array,
              fold: FoldData, hp: HParams) -> tuple[TrainState, LossInfo]:
        if cfg.agent.backup == "all":
            backups = full_action_backups(sample.state_tm1, obs_tm1, fold, cfg, hp.gamma)
            return full_action_update(state, apply, obs_tm1, backups, y_tm1, cfg.agent, hp)
        obs_t = observe_batch(fold, sample.bar_t, sample.portfolio_t, cfg.features)
        return update(state, apply, obs_tm1, obs_t, sample, y_tm1, cfg.agent, hp)

    def describe(out: QOut, position: jax.Array, ctx: BarContext) -> dict[str, jax.Array]:
        d, m = jnp.argmax(out.q_direction, -1), jnp.argmax(out.q_magnitude, -1)
        return {"fraction": env.target_fraction(d, m, cfg.env, ctx.prior),
                "q_direction": out.q_direction, "q_magnitude": out.q_magnitude}

    return Head(network=net,
                explore=lambda key, out, position, ctx, eps: epsilon_greedy(key, out, eps),
                update=learn,
                greedy=lambda out, position, ctx: greedy(out, ctx.prior, cfg),
                describe=describe,
                labels={"q_direction": ("short", "flat", "long"),
                        "q_magnitude": tuple(f"{x:g}" for x in sizes)})
