"""The model head's Q-function, assembled from the known reward, and its learning step.

The market is exogenous and the learning reward is a known function of the next bar's log
return ℓ, the held signed fraction p and the target a (`env.expected_reward`). With x the
market state at the close of bar t and s the train std of ℓ (`FoldData.return_scale`):

    Q(x, p, a) = ρ·E[R(p → a) | x] + C(x, a)
               = ρ·[a·(μ + ½m₂) − ½κ·a²·m₂ − cost(a − p)] + C(x, a),
    μ = s·μ̂(x),  m₂ = s²·m̂₂(x)

ρ = `reward_scale`, κ = `env.risk_curvature`, the cost the env's own `trade_cost`; μ̂ and m̂₂
are the network's forecasts of y = ℓ/s (the aux target) and y², and C = γ·E[V(x', p'_a) | x]
is the continuation: the discounted value of holding a into the next bar, W(a) of
`ModelQNetwork` (a branching dueling head over the position taken, on the market alone: the
afterstate). Only C is left to TD. Each stored pre-state backs up every one of the
K = 2M + 1 positions a ("full-action backups", `learner.counterfactual_step`: the env's own
step gives the next position p'_a), with double DQN (online selects, target evaluates):

    â'_a = argmax_{a'} Q(x_{t+1}, p'_a, a'),   y_a = γ·(1 − terminated_a)·Q̄(x_{t+1}, p'_a, â'_a)
    δ_a  = y_a − C(x_t, a)

and the forecasts are plain regressions with exact targets on the sampled training bars:

    L = mean_{b, a} huber(δ_a) + λ_aux·[mean_b (μ̂ − y)² + mean_b (m̂₂ − y²)²]

The target network is the Polyak EMA of the whole tree (`learner.apply_loss`). Segment ends
bootstrap (truncation), ruin does not.

**The prior** (`EnvConfig.prior` vol_target). The K actions are residuals u around the prior
π_t = min(1, k·σ*/σ̂_t) (`fold_data.prior_position`, k = `EnvConfig.prior_scale`), the
position a = clip(π_t + u, −1, 1), and the reward term is the residual's excess over the prior
(`env.expected_excess_reward`):

    Q(x, p, u) = ρ·[u·v − ½κ·u²·m₂ − cost(u − u₀)] + C(x, u),
    u = a − π_t,  u₀ = p − π_{t−1},  v = s·(μ̂(x) − ȳ)

with ρ = `reward_scale` and ȳ the train mean of the forecast's target (`FoldData.drift`): the
unconditional drift belongs to the prior, and the forecast moves the position only by its
excess over that level. C learns the same residual objective by TD, so without a predictable
direction every term favours u = 0 and the agent holds the prior. With `EnvConfig.view`
trusted the view is the forecast as an absolute view weighed by the fold's trust w
(`env.residual_view`), v = w·(μ + ½m₂ − κπ_t·m₂): the residual's optimum is w·(a* − π_t), a*
the flat learner's mean-variance position; and Q adds w·C, the continuation weighed alike
(C still learns, by TD, the value of the next state's Q, which holds w·C' in turn). So the
prior is the optimum wherever w = 0, whatever the forecasts and C say.
"""

from __future__ import annotations

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from rl_trader import env
from rl_trader.agent.learner import (
    Backups,
    Head,
    HParams,
    LossInfo,
    TrainState,
    apply_loss,
    full_action_backups,
    huber,
    position_actions,
    random_actions,
    traced_once,
)
from rl_trader.agent.networks import GRN, centred, encode_market, head
from rl_trader.agent.replay import NStep
from rl_trader.config import AgentConfig, EnvConfig, NetConfig, RunConfig
from rl_trader.data.fold_data import BarContext, FoldData, Obs
from rl_trader.env import FLAT


@struct.dataclass
class ModelOut:
    """The model head's outputs (`ModelQNetwork`); leading axes follow the input's."""

    aux: jax.Array  # [...] μ̂: the next bar's log return forecast (normalised units, ×1/s)
    second_moment: jax.Array  # [...] m̂₂ ≥ 0: forecast of its square (normalised units²)
    w_direction: jax.Array  # [..., 3] V + centred direction advantages (continuation)
    w_magnitude: jax.Array  # [..., M] centred magnitude advantages (continuation)
    market_weights: jax.Array  # [..., F]
    portfolio_weights: jax.Array  # [..., P]


class ModelQNetwork(nn.Module):
    """The model head's network: forecasts μ̂ and m̂₂ = softplus(·) ≥ 0 from a forecast GRN on
    the market encoding, and the continuation over the position taken as a branching dueling
    head on a trunk over the market encoding, W(d, m) = V + Ã_dir(d) + [d ≠ flat]·Ã_mag(m),
    Ã the centred advantages.

    The continuation reads the afterstate, C(x, a): the value of holding a into the next bar
    given the market (the post-decision state). From (x, a) the next bar's reward and state
    depend on the position p held before only through the cost of the move: it comes out of
    equity, so the fraction held after the bar, p'_a = a·G/(1 − c + a(G − 1)) with G = C/O
    the bar's open-to-close gross return and c the move's cost over the equity at the open,
    moves by O(cost), and the equity-relative portfolio variables (which the reward does not
    read) move too. C(x, a) fits the replay's average over p of that O(cost) term; p enters
    Q through the known reward's cost, and the network has no portfolio VSN (its weights
    read 0), so the update does not evaluate C at every next portfolio.

    The trunk reads the market encoding through a stop-gradient: the continuation's TD loss
    trains the trunk and the heads, and only the regressions train the market encoder."""

    cfg: NetConfig
    n_magnitudes: int

    @nn.compact
    def __call__(self, obs: Obs) -> ModelOut:
        cfg, p = self.cfg, self.cfg.precision
        context, market, w_market = encode_market(obs, cfg)
        forecast = GRN(cfg.trunk, precision=p, name="forecast")(market, context)
        moments = head(2, "moments", forecast, p)
        enc, ctx = jax.lax.stop_gradient((market, context))
        trunk = GRN(cfg.trunk, precision=p, name="trunk")(enc, ctx)
        value = head(1, "value", trunk, p)
        return ModelOut(aux=moments[..., 0], second_moment=jax.nn.softplus(moments[..., 1]),
                        w_direction=value + centred(head(3, "adv_direction", trunk, p)),
                        w_magnitude=centred(head(self.n_magnitudes, "adv_magnitude", trunk, p)),
                        market_weights=w_market,
                        portfolio_weights=jnp.zeros(obs.portfolio.shape, jnp.float32))


def next_state_outputs(apply_fn, params: chex.ArrayTree, obs_t: Obs) -> ModelOut:
    """The network at the K next states of each pre-state, leaves [B, K, ...] (market [B, F],
    portfolio [B, K, P]). The network reads no portfolio variable, so it runs once a sample and
    is broadcast over the K next positions."""
    n_pos = obs_t.portfolio.shape[1]
    out = apply_fn(params, obs_t.replace(portfolio=obs_t.portfolio[:, 0]))
    return jax.tree.map(lambda x: jnp.broadcast_to(x[:, None], x.shape[:1] + (n_pos,)
                                                   + x.shape[1:]), out)


def position_fractions(cfg: EnvConfig, prior: jax.Array | float = 0.0) -> jax.Array:
    """The K positions of `learner.position_actions` as signed fractions of equity [..., K]
    around the prior π = `prior` [...] (`env.target_fraction`)."""
    direction, magnitude = position_actions(len(env.action_sizes(cfg)))
    return env.target_fraction(direction, magnitude, cfg, jnp.asarray(prior)[..., None])


def continuation(out: ModelOut) -> jax.Array:
    """C(a) for the K positions [..., K] from the branching head: W(flat) = w_dir[flat],
    W(d, m) = w_dir[d] + w_mag[m] for d ∈ {short, long} (the `position_actions` order)."""
    w_dir, w_mag = out.w_direction, out.w_magnitude
    lead = w_mag.shape[:-1]
    short = w_dir[..., FLAT - 1, None] + w_mag
    long = w_dir[..., FLAT + 1, None] + w_mag
    flat = jnp.broadcast_to(w_dir[..., FLAT, None], lead + (1,))
    return jnp.concatenate([flat, short, long], -1)


def assemble(out: ModelOut, position: jax.Array, ctx: BarContext, cfg: EnvConfig,
             reward_scale: float) -> jax.Array:
    """Q(x, p, a) for the K positions a [..., K] (module docstring): `out` with leading axes
    [...], the held fraction p = `position` [...] and the bar's `ctx` (leaves [...]).

    Under `cfg.prior` flat the reward term is `env.expected_reward` of moving p → a with
    μ = s·μ̂, m₂ = s²·m̂₂. Under vol_target it is the residual's excess over the prior,
    `env.expected_excess_reward` with u = a − π_t (a = clip(π_t + residual)), u₀ = p − π_{t−1}
    and the view v of `env.residual_view` (`cfg.view` excess: v = s·(μ̂ − ȳ), forecasts at
    their train level leave the prior optimal; trusted: the forecast and C both weighed by the
    fold's trust w, so the prior is the optimum wherever w = 0, whatever the network says)."""
    chex.assert_equal_shape([out.aux, position, ctx.scale])
    s = ctx.scale
    second = (s**2 * out.second_moment)[..., None]
    if cfg.prior == "flat":
        a = position_fractions(cfg)
        reward = env.expected_reward(position[..., None], a, (s * out.aux)[..., None], second,
                                     cfg)
    else:
        residual = position_fractions(cfg, ctx.prior) - ctx.prior[..., None]
        view = env.residual_view(s * out.aux, s * ctx.drift, s**2 * out.second_moment,
                                 ctx.prior, ctx.trust, cfg)[..., None]
        reward = env.expected_excess_reward((position - ctx.prior_tm1)[..., None], residual,
                                            view, second, cfg)
    c = continuation(out)
    if cfg.view == "trusted":  # C weighed by the trust as the view is: where the forecast is
        c = ctx.trust[..., None] * c  # not trusted, neither is what C learnt from it
    return reward_scale * reward + c


def model_td(c_tm1: jax.Array, q_t_value: jax.Array, q_t_selector: jax.Array,
             discount_t: jax.Array) -> jax.Array:
    """TD errors δ [K] of one pre-state: C(x_t, ·) [K] against y_a = discount_a ·
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
               backups: Backups, y_tm1: jax.Array, cfg: AgentConfig, env_cfg: EnvConfig,
               aux_weight: jax.Array) -> tuple[jax.Array, LossInfo]:
    """The batch loss of the module docstring. `out_tm1` leaves [B, ...] at the sampled
    pre-states (p = `backups.position_tm1` [B], the bar's `backups.ctx_tm1` [B]); the next
    states' outputs [B, K, ...] (p'_a = `backups.position_t` [B, K], `backups.ctx_t` [B]);
    y_tm1 [B] the aux targets; `aux_weight` λ_aux."""
    position_tm1, position_t = backups.position_tm1, backups.position_t
    discount_t = backups.discount_t
    n_pos = position_t.shape[-1]
    chex.assert_shape([position_tm1, backups.ctx_tm1.scale, backups.ctx_t.scale, y_tm1],
                      position_t.shape[:1])
    chex.assert_equal_shape([position_t, discount_t])
    ctx_t = jax.tree.map(lambda x: jnp.broadcast_to(x[:, None], position_t.shape),
                         backups.ctx_t)
    q_value = assemble(out_t_target, position_t, ctx_t, env_cfg, cfg.reward_scale)  # [B, K, K]
    q_select = assemble(out_t_online, position_t, ctx_t, env_cfg, cfg.reward_scale)
    c_tm1 = continuation(out_tm1)  # [B, K]
    chex.assert_shape(c_tm1, (position_t.shape[0], n_pos))
    td = jax.vmap(model_td)(c_tm1, q_value, q_select, discount_t)
    mean_loss, second_loss = forecast_losses(out_tm1, y_tm1)
    loss = (jnp.mean(jnp.mean(huber(td, cfg.huber_delta), -1))
            + aux_weight * (mean_loss + second_loss))
    q_tm1 = assemble(jax.lax.stop_gradient(out_tm1), position_tm1, backups.ctx_tm1, env_cfg,
                     cfg.reward_scale)
    return loss, LossInfo(loss=loss, td_abs=jnp.mean(jnp.abs(td)), aux_loss=mean_loss,
                          q_mean=jnp.mean(jnp.max(q_tm1, -1)))


def model_update(state: TrainState, apply_fn, obs_tm1: Obs, backups: Backups, y_tm1: jax.Array,
                 cfg: RunConfig, hp: HParams) -> tuple[TrainState, LossInfo]:
    """One gradient step of the model head (`model_loss`) on the full-action `backups` of the
    pre-states observed as `obs_tm1` [B]."""
    out_t_target = next_state_outputs(apply_fn, state.target_params, backups.obs_t)
    out_t_online = jax.lax.stop_gradient(next_state_outputs(apply_fn, state.params,
                                                            backups.obs_t))

    def loss_fn(params):
        return model_loss(apply_fn(params, obs_tm1), out_t_online, out_t_target, backups, y_tm1,
                          cfg.agent, cfg.env, hp.aux_weight)

    return apply_loss(state, loss_fn, cfg.agent, hp)


def greedy_actions(q: jax.Array, n_magnitudes: int) -> tuple[jax.Array, jax.Array]:
    """The (direction, magnitude) int32 [...] of the best of the K positions, q [..., K]."""
    direction, magnitude = position_actions(n_magnitudes)
    best = jnp.argmax(q, -1)
    return direction[best], magnitude[best]


def epsilon_greedy_positions(key: jax.Array, q: jax.Array,
                             epsilon: jax.Array) -> tuple[jax.Array, jax.Array]:
    """ε-greedy over the K positions for a batch, q [N, K]: with probability ε a uniformly
    random (direction, magnitude) (`learner.random_actions`), else the greedy position;
    (direction [N], magnitude [N]) int32."""
    n, n_pos = q.shape
    n_mag = (n_pos - 1) // 2
    explore = jax.random.uniform(jax.random.split(key, 3)[0], (n,)) < epsilon
    rand_dir, rand_mag = random_actions(key, n, env.N_DIRECTIONS, n_mag)
    best_dir, best_mag = greedy_actions(q, n_mag)
    return (jnp.where(explore, rand_dir, best_dir).astype(jnp.int32),
            jnp.where(explore, rand_mag, best_mag).astype(jnp.int32))


def ensemble_q(out: ModelOut, position: jax.Array, ctx: BarContext,
               cfg: RunConfig) -> jax.Array:
    """Each member's assembled Q over the K positions [S, K] from its outputs [S] at the held
    fraction `position` and the bar's `ctx` (scalars)."""
    n = out.aux.shape[0]
    return assemble(out, jnp.full((n,), position),
                    jax.tree.map(lambda x: jnp.full((n,), x), ctx), cfg.env,
                    cfg.agent.reward_scale)


def greedy(out: ModelOut, position: jax.Array, ctx: BarContext,
           cfg: RunConfig) -> tuple[jax.Array, jax.Array]:
    """The ensemble's choice from its members' outputs [S]: their assembled Q over the K
    positions (linear in the forecasts and the continuation, so this averages those) is
    averaged, and the ensemble holds the best position of that mean,
    p* = a_k*, k* = argmax_k (1/S) Σ_s Q_s(a_k); its Q is that mean's maximum."""
    q_pos = ensemble_q(out, position, ctx, cfg).mean(0)
    best = jnp.argmax(q_pos)
    return position_fractions(cfg.env, ctx.prior)[best], q_pos[best]


def make(cfg: RunConfig) -> Head:
    """The model head of `cfg` (`learner.Head`)."""
    sizes = env.action_sizes(cfg.env)
    net = ModelQNetwork(cfg.net, len(sizes))
    apply = traced_once(net)

    def explore(key: jax.Array, out: ModelOut, position: jax.Array, ctx: BarContext,
                epsilon: jax.Array) -> tuple[jax.Array, jax.Array]:
        q = assemble(out, position, ctx, cfg.env, cfg.agent.reward_scale)
        return epsilon_greedy_positions(key, q, epsilon)

    def learn(state: TrainState, sample: NStep, obs_tm1: Obs, y_tm1: jax.Array,
              fold: FoldData, hp: HParams) -> tuple[TrainState, LossInfo]:
        backups = full_action_backups(sample.state_tm1, obs_tm1, fold, cfg, hp.gamma)
        return model_update(state, apply, obs_tm1, backups, y_tm1, cfg, hp)

    def describe(out: ModelOut, position: jax.Array,
                 ctx: BarContext) -> dict[str, jax.Array]:
        q_pos = ensemble_q(out, position, ctx, cfg)
        return {"fraction": position_fractions(cfg.env, ctx.prior)[jnp.argmax(q_pos, -1)],
                "q_position": q_pos,
                "next_return_second_moment": out.second_moment * ctx.scale**2}

    # the K actions: the position (--prior flat) or the residual around the prior
    return Head(network=net, explore=explore, update=learn,
                greedy=lambda out, position, ctx: greedy(out, position, ctx, cfg),
                describe=describe,
                labels={"q_position": tuple(f"{x:+g}" for x in (
                    0.0, *(-m for m in sizes), *sizes))})
