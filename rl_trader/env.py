"""Pure-JAX trading environment: positions, fills at the next open, costs, reward.

Timing. The observation at bar t uses data up to bar t's close. The action chosen at t sets a
target position (a signed fraction of equity) that is filled at bar t+1's **open**; the step's
outcome is the growth of equity from close t to close t+1, net of costs. The learning reward is
a function of that growth chosen by `EnvConfig.reward` (`reward`); evaluation uses the growth
itself (`StepOut.log_growth`), whatever the reward.

Accounting for one step, with units u held over the close t → open t+1 gap, target fraction p*:

    E_o  = E_t + u·(O_{t+1} − C_t)                  equity at the next open, before trading
    u*   = p*·E_o / O_{t+1}                          units after the fill
    cost = |u* − u|·O_{t+1}·(commission + slippage)  both in bps of traded notional
    E_{t+1} = E_o − cost + u*·(C_{t+1} − O_{t+1})
    g_t  = log(E_{t+1} / E_t)                        log growth (what evaluation uses)

Slippage as a cost of `slippage_bps` on the traded notional is exactly a fill price
O·(1 ± slippage) against the trader, with the position marked at O. Costs are computed here
and nowhere else (`trade_cost`).

Segments are half-open bar ranges [start, end). An env at bar t needs bar t+1, so an episode
inside a segment truncates at `stop ≤ end − 1` (`episode_stop`); truncation is not termination
(the learner bootstraps through it). Termination happens only on ruin (equity ≤ `RUIN`).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
from flax import struct

from rl_trader.config import EnvConfig

RUIN = 1e-4  # equity (as a fraction of the starting equity) at which an episode terminates
N_DIRECTIONS = 3  # short, flat, long
FLAT = 1
PERCENT = 100.0  # returns in the mean-variance reward are in percent: R = 100·r
PORTFOLIO_NAMES = ("position", "unrealised_return", "time_in_position", "drawdown", "last_cost")


@struct.dataclass
class Prices:
    """Prices of one bar range on the device; float32 [T]."""

    open: jax.Array
    close: jax.Array


@struct.dataclass
class EnvState:
    """One trader's state at the close of bar `t` (scalars; add a leading axis to batch)."""

    t: jax.Array  # int32: current bar
    stop: jax.Array  # int32: bar at which the episode truncates
    equity: jax.Array  # float32: equity at close t (1.0 at reset)
    units: jax.Array  # float32: signed units held
    peak: jax.Array  # float32: highest equity of the episode
    entry_price: jax.Array  # float32: fill price of the current position (0 when flat)
    bars_in_position: jax.Array  # float32: bars since the position was opened or flipped
    last_cost: jax.Array  # float32: cost of the last fill as a fraction of equity


@struct.dataclass
class StepOut:
    """What a step returns besides the new state (scalars per env)."""

    reward: jax.Array  # float32: learning reward of `cfg.reward` (`reward`), before reward_scale
    log_growth: jax.Array  # float32: log(E_{t+1} / E_t), net of costs, whatever the reward
    terminated: jax.Array  # bool: ruin
    truncated: jax.Array  # bool: segment or episode end reached (bootstrap through it)
    cost: jax.Array  # float32: cost paid at this fill, fraction of E_t
    turnover: jax.Array  # float32: traded notional / E_o


def reset(t0: jax.Array, stop: jax.Array) -> EnvState:
    """Flat, equity 1.0, at bar `t0`; the episode truncates on reaching bar `stop`."""
    one, zero = jnp.float32(1.0), jnp.float32(0.0)
    return EnvState(t=jnp.asarray(t0, jnp.int32), stop=jnp.asarray(stop, jnp.int32),
                    equity=one, units=zero, peak=one, entry_price=zero,
                    bars_in_position=zero, last_cost=zero)


def episode_stop(t0: jax.Array, end: jax.Array, cfg: EnvConfig) -> jax.Array:
    """Bar at which a training episode from `t0` truncates: min(t0 + episode_bars, end − 1)."""
    return jnp.minimum(t0 + cfg.episode_bars, end - 1)


def action_sizes(cfg: EnvConfig) -> tuple[float, ...]:
    """The sizes of the magnitude branch: `residuals` (deviations from the prior) under
    `prior` vol_target, else `magnitudes` (positions)."""
    return cfg.residuals if cfg.prior == "vol_target" else cfg.magnitudes


def target_fraction(direction: jax.Array, magnitude: jax.Array, cfg: EnvConfig,
                    prior: jax.Array | float = 0.0) -> jax.Array:
    """Action (direction ∈ {0 short, 1 flat, 2 long}, magnitude index) → signed fraction held:

        p* = clip(π + (direction − 1)·size[magnitude], −1, 1)

    with `size` = `action_sizes(cfg)` and π = `prior` (vol_target's position under
    `cfg.prior` vol_target, 0 under flat: then p* = (direction − 1)·magnitudes[magnitude],
    the clip idle). When flat the magnitude has no effect: the zero action holds the prior.
    """
    sizes = jnp.asarray(action_sizes(cfg), jnp.float32)
    if cfg.prior == "flat":
        return (direction - 1).astype(jnp.float32) * sizes[magnitude]
    return jnp.clip(prior + (direction - 1).astype(jnp.float32) * sizes[magnitude], -1.0, 1.0)


def trade_cost(traded_notional: jax.Array, cfg: EnvConfig) -> jax.Array:
    """Commission + slippage on a traded notional (same units as the notional)."""
    return jnp.abs(traded_notional) * (cfg.commission_bps + cfg.slippage_bps) * 1e-4


def reward(growth: jax.Array, cfg: EnvConfig) -> jax.Array:
    """The learning reward `cfg.reward` (one of config.REWARDS) of one step, from the equity
    growth E_{t+1} / E_t (net of costs). Scalars or arrays of one shape.

    With r = E_{t+1}/E_t − 1 the simple net return and R = 100·r the same in percent. Rewards
    are in units such that after the learner's ×reward_scale (100 by default) it sees:

    - "log":           log(E_{t+1} / E_t)  (×100: percent log growth). Kelly-optimal sizing.
    - "mean_variance": (R − (λ/2)·R²) / 100  (×100: R − (λ/2)·R², percent), λ = risk_aversion.
      Per step, the optimal constant fraction is μ/(λσ²) with μ, σ of the asset in percent per
      bar (λ = 0.1, μ = 0.04, σ = 1: 0.4 of equity).
    """
    if cfg.reward == "log":
        return jnp.log(growth)
    big_r = PERCENT * (growth - 1.0)
    return (big_r - 0.5 * cfg.risk_aversion * big_r * big_r) / PERCENT


def risk_curvature(cfg: EnvConfig) -> float:
    """κ of `expected_reward`: 1 for the log reward, PERCENT·λ for mean_variance."""
    if cfg.reward == "log":
        return 1.0
    return PERCENT * cfg.risk_aversion


def expected_reward(position: jax.Array, target: jax.Array, mean: jax.Array,
                    second_moment: jax.Array, cfg: EnvConfig) -> jax.Array:
    """The learning reward `reward` (before reward_scale) expected for moving from the signed
    fraction p = `position` to a = `target` and holding a over a bar whose log return ℓ has
    E[ℓ] = `mean` = μ and E[ℓ²] = `second_moment` = m₂, to second order (arrays broadcast):

        E[R](p → a) ≈ a·(μ + ½·m₂) − ½·κ·a²·m₂ − cost(a − p)

    On a bar with no gap (open = previous close) the step's net return is x = a·(e^ℓ − 1) − c
    with c = `trade_cost`(a − p) (as `step` computes it); log(1 + x) = aℓ + ½a(1 − a)ℓ² − c
    + O(ℓ³, cℓ) gives κ = 1, and (R − ½λR²)/100 with R = 100·x gives κ = 100·λ
    (`risk_curvature`)."""
    kappa = risk_curvature(cfg)
    return (target * (mean + 0.5 * second_moment) - 0.5 * kappa * target**2 * second_moment
            - trade_cost(target - position, cfg))


def expected_excess_reward(held: jax.Array, residual: jax.Array, view: jax.Array,
                           second_moment: jax.Array, cfg: EnvConfig) -> jax.Array:
    """The learning reward expected of holding the residual u = a − π over the prior π for a
    bar, before reward_scale (arrays broadcast): its excess over the prior's own reward, net
    of the residual's own cost and risk,

        E[ΔR](u) = u·v − ½·κ·u²·m₂ − cost(u − u₀),

    v = `view` the forecast's excess over its unconditional level, m₂ = `second_moment`,
    u₀ = `held` the residual held (the position held less the prior it was set against).

    Derivation (Black–Litterman's reverse optimisation). The mean-variance optimum of
    a·(μ + ½m₂) − ½κa²m₂ (`expected_reward`) is a* = (μ + ½m₂)/(κm₂); the return at which the
    prior is optimal, μ_eq = κπm₂ − ½m₂, is the prior's equilibrium. The forecast tilts it by
    its excess over its unconditional level only, μ = μ_eq + v. Then for a = π + u

        a·(μ + ½m₂) − ½κa²m₂ − [π·(μ + ½m₂) − ½κπ²m₂] = u·v − ½κu²m₂,

    and the trade splits into the prior's own move and the residual's (`cost` charged on
    each, an upper bound of the netted fill's). With v = 0 and u₀ = 0 every term is ≤ 0 and,
    given κ·m₂ > 0 or costs on, 0 only at u = 0: the zero residual is the strict optimum in u
    (the clip at ±1 only removes candidates; at π = 1 every long action gives u = 0)."""
    kappa = risk_curvature(cfg)
    return (residual * view - 0.5 * kappa * residual**2 * second_moment
            - trade_cost(residual - held, cfg))


def residual_view(mean: jax.Array, drift: jax.Array, second_moment: jax.Array,
                  prior: jax.Array, trust: jax.Array, cfg: EnvConfig) -> jax.Array:
    """The view v of `expected_excess_reward` (return units, arrays broadcast): how far the
    forecast μ = `mean` tilts the prior π = `prior`, with m₂ = `second_moment`.

    `cfg.view` excess: v = μ − ȳ, the forecast's excess over its train level ȳ = `drift`.

    `cfg.view` trusted: the forecast as Black–Litterman's absolute view, weighed by the trust
    w = `trust` ∈ [0, 1] (`baselines.gbm.forecast_trust`): the return believed is
    μ_w = (1 − w)·μ_eq + w·μ, μ_eq = κπm₂ − ½m₂ the prior's equilibrium return, so

        v = μ_w − μ_eq = w·(μ + ½m₂ − κπm₂),

    and the residual's optimum u* = v/(κm₂) = w·(a* − π), a* = (μ + ½m₂)/(κm₂) the flat
    learner's mean-variance position (`expected_reward`): the position's optimum is
    (1 − w)·π + w·a*, the prior where the forecast is not trusted (w = 0), a* where it is."""
    if cfg.view == "excess":
        return mean - drift
    return trust * (mean + 0.5 * second_moment - risk_curvature(cfg) * prior * second_moment)


def step(state: EnvState, target: jax.Array, prices: Prices,
         cfg: EnvConfig) -> tuple[EnvState, StepOut]:
    """Fill `target` (signed fraction of equity) at the next open and mark to the next close.

    A pure function of its arguments: from any state, `out.reward` is that action's reward."""
    chex.assert_rank([state.t, target], 0)
    t1 = state.t + 1
    c_t, o_1, c_1 = prices.close[state.t], prices.open[t1], prices.close[t1]
    e_open = state.equity + state.units * (o_1 - c_t)
    units_new = target * jnp.maximum(e_open, 0.0) / o_1  # wiped out at the open: no new position
    traded = (units_new - state.units) * o_1
    cost = trade_cost(traded, cfg)
    equity = e_open - cost + units_new * (c_1 - o_1)
    terminated = equity <= RUIN
    equity = jnp.maximum(equity, RUIN)
    growth = equity / state.equity
    r = reward(growth, cfg)

    side_old, side_new = jnp.sign(state.units), jnp.sign(units_new)
    opened = (side_new != 0) & (side_new != side_old)
    entry = jnp.where(side_new == 0, 0.0, jnp.where(opened, o_1, state.entry_price))
    held = jnp.where(side_new == 0, 0.0, jnp.where(opened, 1.0, state.bars_in_position + 1.0))
    new = EnvState(t=t1, stop=state.stop, equity=equity, units=units_new,
                   peak=jnp.maximum(state.peak, equity), entry_price=entry,
                   bars_in_position=held, last_cost=cost / state.equity)
    out = StepOut(reward=r, log_growth=jnp.log(growth), terminated=terminated,
                  truncated=t1 >= state.stop, cost=cost / state.equity,
                  turnover=jnp.abs(traded) / jnp.maximum(e_open, RUIN))
    return new, out


def portfolio_features(state: EnvState, prices: Prices) -> jax.Array:
    """The portfolio feature group at the close of bar t; float32 [len(PORTFOLIO_NAMES)].

    position: u·C_t / E_t; unrealised_return: side·(C_t / entry − 1) (×10);
    time_in_position: log1p(bars) / log(252); drawdown: E_t / peak − 1 (×10);
    last_cost: last fill's cost in bps of equity (÷10).
    """
    close = prices.close[state.t]
    side = jnp.sign(state.units)
    unrealised = jnp.where(side == 0, 0.0,
                           side * (close / jnp.where(side == 0, 1.0, state.entry_price) - 1.0))
    feats = jnp.stack([
        state.units * close / state.equity,
        10.0 * unrealised,
        jnp.log1p(state.bars_in_position) / jnp.log(252.0),
        10.0 * (state.equity / state.peak - 1.0),
        state.last_cost * 1e3,
    ]).astype(jnp.float32)
    chex.assert_shape(feats, (len(PORTFOLIO_NAMES),))
    return feats
