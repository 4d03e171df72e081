"""Greedy rollouts of the agent and of baselines over a segment, through the same env.

Evaluating segment [a, b) starts flat at the close of bar a−1 and decides at bars a−1 … b−2, so
the returns cover bars a … b−1 exactly and the test blocks of consecutive folds stitch into one
out-of-sample record. Bar a−1 lies in the purge gap; its observation uses only past data.
Baselines run through `env.step` too, so they pay the same costs on the same fills; those
fit to data (ridge, vol target) read only the fold's train and validation bars.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from rl_trader import env, model_q
from rl_trader.agent import branch_mask
from rl_trader.config import RunConfig, program_config
from rl_trader.fold_data import FoldData, market_width, observe, training_bars
from rl_trader.metrics import sharpe
from rl_trader.networks import make_network


@struct.dataclass
class Aux:
    """What a decision reports besides its target (zeros for the baselines)."""

    market_weights: jax.Array  # [F] VSN selection weights
    portfolio_weights: jax.Array  # [P]
    q: jax.Array  # scalar: the agent's Q of its greedy action (reward units × reward_scale)
    forecast: jax.Array  # scalar: the forecast ŷ_t of the next-bar return (normalised like
    # `FoldData.aux_target`): the agent's aux head (ensemble mean), ridge's fit; 0 for the rest


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
                            reward=out.reward * cfg.agent.reward_scale)

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


def weighted_rms(y: jax.Array, w: jax.Array) -> jax.Array:
    """s = √(Σ_t w_t y_t² / Σ_t w_t), floored at 1e-12: the position scale of a forecast y [T]
    over the rows w [T] (0/1) it was fit on, so that a forecast of typical size is a full
    position (ridge's and the agent's forecast sizing)."""
    return jnp.maximum(jnp.sqrt((w * y**2).sum() / jnp.maximum(w.sum(), 1.0)), 1e-12)


def greedy_decide(params, data: FoldData, cfg: RunConfig) -> Decide:
    """The agent's greedy policy. `params` stack an ensemble of S agents on a leading axis.

    Generic head: each member takes its greedy action (argmax per branch) and the position is
    their mean target, p* = (1/S) Σ_s p*_s (S = 1: a single agent); the reported Q of the
    greedy action is Q(s, â) = mean over the active branches b of Q_b(s, â_b) (the value the
    learner bootstraps from), averaged over the members.
    Model head: the members' assembled Q over the K positions (`model_q.assemble`, linear in
    the forecasts and the continuation, so this averages those) is averaged, and the
    ensemble holds the best position of that mean, p* = a_k*, k* = argmax_k (1/S) Σ_s Q_s(a_k).
    VSN weights and the forecast ŷ (the aux head, μ̂ for the model head) are averaged too."""
    net = make_network(cfg.net, len(cfg.env.magnitudes))
    apply = jax.vmap(net.apply, in_axes=(0, None))
    model = cfg.net.q_head == "model"

    def decide(key, state, port):
        del key
        q = apply(params, observe(data, state.t, port, cfg.features))
        aux = Aux(market_weights=q.market_weights.mean(0),
                  portfolio_weights=q.portfolio_weights.mean(0), q=jnp.float32(0.0),
                  forecast=q.aux.mean())
        if model:
            n = q.aux.shape[0]
            q_pos = model_q.assemble(q, jnp.full((n,), port[0]),
                                     jnp.full((n,), data.return_scale[state.t]), cfg.env,
                                     cfg.agent.reward_scale).mean(0)
            best = jnp.argmax(q_pos)
            return model_q.position_fractions(cfg.env)[best], aux.replace(q=q_pos[best])
        d, m = jnp.argmax(q.q_direction, -1), jnp.argmax(q.q_magnitude, -1)
        targets = env.target_fraction(d, m, cfg.env)
        q_dir = jnp.take_along_axis(q.q_direction, d[:, None], -1)[:, 0]
        q_mag = jnp.take_along_axis(q.q_magnitude, m[:, None], -1)[:, 0]
        mag_active = jax.vmap(branch_mask)(d)[:, 1]
        q_greedy = jnp.where(mag_active > 0, 0.5 * (q_dir + q_mag), q_dir)
        return targets.mean(), aux.replace(q=q_greedy.mean())

    return decide


def _no_weights(data: FoldData, cfg: RunConfig) -> Aux:
    """The `Aux` of a baseline: no VSN weights, no Q, no forecast."""
    return Aux(market_weights=jnp.zeros(market_width(data)),
               portfolio_weights=jnp.zeros(len(env.PORTFOLIO_NAMES)), q=jnp.float32(0.0),
               forecast=jnp.float32(0.0))


def constant_decide(fraction: float, data: FoldData, cfg: RunConfig) -> Decide:
    """Hold a constant signed fraction of equity (1.0: buy-and-hold; 0.0: flat)."""
    aux = _no_weights(data, cfg)
    return lambda key, state, port: (jnp.float32(fraction), aux)


def momentum_decide(k: int, data: FoldData, cfg: RunConfig) -> Decide:
    """Full long/short by the sign of the past k-bar return: sign(C_t / C_{t−k} − 1)."""
    aux = _no_weights(data, cfg)

    def decide(key, state, port):
        past = data.prices.close[jnp.maximum(state.t - k, 0)]
        return jnp.sign(data.prices.close[state.t] - past).astype(jnp.float32), aux

    return decide


def random_decide(data: FoldData, cfg: RunConfig) -> Decide:
    """Uniformly random (direction, magnitude) each bar."""
    aux = _no_weights(data, cfg)
    n_mag = len(cfg.env.magnitudes)

    def decide(key, state, port):
        kd, km = jax.random.split(key)
        d = jax.random.randint(kd, (), 0, env.N_DIRECTIONS)
        m = jax.random.randint(km, (), 0, n_mag)
        return env.target_fraction(d, m, cfg.env), aux

    return decide


# Ridge baseline: penalties α = n_train × these, chosen by validation Sharpe.
RIDGE_ALPHAS = (1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3)
VOL_WINDOW = 20  # bars of trailing log returns in the vol-target baseline's σ̂


def ridge_solve(x: jax.Array, y: jax.Array, w: jax.Array,
                alpha: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Weighted ridge regression with an unpenalised intercept, in closed form.

    Rows with weight w_t ∈ {0, 1}; n = Σ w, x̄ = Σ w·x / n, ȳ = Σ w·y / n, X̃ = W(X − x̄),
    ỹ = W(y − ȳ):  β = (X̃ᵀX̃ + αI)⁻¹ X̃ᵀỹ,  b = ȳ − x̄ᵀβ, which minimises
    Σ_t w_t (y_t − x_tᵀβ − b)² + α‖β‖². x: [T, F], y, w: [T]; returns (β [F], b).
    """
    n = jnp.maximum(w.sum(), 1.0)
    x_bar, y_bar = (w[:, None] * x).sum(0) / n, (w * y).sum() / n
    xc, yc = w[:, None] * (x - x_bar), w * (y - y_bar)
    beta = jnp.linalg.solve(xc.T @ xc + alpha * jnp.eye(x.shape[1], dtype=x.dtype), xc.T @ yc)
    return beta, y_bar - x_bar @ beta


@struct.dataclass
class RidgeFit:
    """A ridge forecast ŷ_t = x_tᵀβ + b of the next-bar return and its position scale s."""

    beta: jax.Array  # [F]
    intercept: jax.Array  # b
    scale: jax.Array  # s: root mean square of ŷ over the train rows
    alpha: jax.Array  # the penalty chosen (absolute, = n_train × a grid value)
    val_sharpe: jax.Array  # [len(RIDGE_ALPHAS)] per-bar validation Sharpe of each penalty


def forecast_position(y_hat: jax.Array, scale: jax.Array) -> jax.Array:
    """The supervised baselines' position rule, clip(ŷ / s, −1, 1): sized in proportion to
    the forecast (mean-variance sizing for a forecast at constant risk; a near-zero forecast
    trades little, unlike its sign), a forecast of typical size s is a full position, and
    never beyond 1× equity."""
    return jnp.clip(y_hat / scale, -1.0, 1.0)


def ridge_decide(fit: RidgeFit, data: FoldData, cfg: RunConfig) -> Decide:
    """Ridge's forecast ŷ_t = x_tᵀβ + b traded by `forecast_position`; reports ŷ_t as its
    forecast."""
    aux = _no_weights(data, cfg)

    def decide(key, state, port):
        y_hat = data.features[state.t] @ fit.beta + fit.intercept
        return forecast_position(y_hat, fit.scale), aux.replace(forecast=y_hat)

    return decide


@struct.dataclass
class Forecast:
    """A forecast of the next-bar target at every bar, ŷ [T_b], and its position scale s."""

    y_hat: jax.Array
    scale: jax.Array


def forecast_decide(f: Forecast, data: FoldData, cfg: RunConfig) -> Decide:
    """A precomputed forecast (e.g. the gbm baseline's) traded by `forecast_position`;
    reports ŷ_t as its forecast."""
    aux = _no_weights(data, cfg)
    return lambda key, state, port: (forecast_position(f.y_hat[state.t], f.scale),
                                     aux.replace(forecast=f.y_hat[state.t]))


@jit_per_program(2, 3)
def forecast_val_sharpes(forecasts: Forecast, data: FoldData, val_steps: int,
                         cfg: RunConfig) -> jax.Array:
    """Per-bar validation Sharpe [C] of C candidate forecasts (leaves [C, ...]) traded by
    `forecast_position` through the env: the selection criterion of the fitted baselines."""
    def one(f):
        r = rollout(forecast_decide(f, data, cfg), data, data.val[0], val_steps, cfg,
                    jax.random.PRNGKey(0))
        return sharpe(r.returns, 1.0, valid=data.val[1] - data.val[0])

    return jax.vmap(one)(forecasts)


@jit_per_program(1, 2)
def fit_ridge(data: FoldData, val_steps: int, cfg: RunConfig) -> RidgeFit:
    """Ridge of the next-bar return on the bar-t features, fit on train, α chosen on validation.

    Target: `data.aux_target[t]`, the next bar's close-to-close log return over its train std
    (clipped like the features), so target and features share the train normalisation. Rows:
    train bars t with t + 1 in train (`training_bars`; with pooled instruments theirs too, the
    bars the agent trains on). For each α ∈ n_train × RIDGE_ALPHAS the fit trades the
    validation block through `rollout` (same env and costs); the α of the best validation Sharpe
    wins (the first on ties). Only train and validation bars are read: the validation rollouts
    run `val_steps` ≥ the block's length (a shape bucket) and their Sharpe counts the block's
    bars only.
    """
    w = training_bars(data).astype(jnp.float32)
    alphas = w.sum() * jnp.asarray(RIDGE_ALPHAS, jnp.float32)

    def fit_one(alpha):
        beta, b = ridge_solve(data.features, data.aux_target, w, alpha)
        return RidgeFit(beta=beta, intercept=b, scale=weighted_rms(data.features @ beta + b, w),
                        alpha=alpha, val_sharpe=jnp.float32(0.0))

    def val_sharpe(fit):
        r = rollout(ridge_decide(fit, data, cfg), data, data.val[0], val_steps, cfg,
                    jax.random.PRNGKey(0))
        return sharpe(r.returns, 1.0, valid=data.val[1] - data.val[0])

    fits = jax.vmap(fit_one)(alphas)
    sharpes = jax.vmap(val_sharpe)(fits)
    best = jnp.argmax(jnp.where(jnp.isnan(sharpes), -jnp.inf, sharpes))
    return jax.tree.map(lambda x: x[best], fits).replace(val_sharpe=sharpes)


def trailing_vol(close: jax.Array) -> jax.Array:
    """σ̂_t: sample std (ddof 1) of the last VOL_WINDOW log returns log(C_s / C_{s−1}),
    s = t − VOL_WINDOW + 1 … t (bar t's close included, nothing later); NaN while fewer
    returns exist. close: [T] → [T] (as the `vol_20` feature, before normalisation)."""
    rho = jnp.concatenate([jnp.full((1,), jnp.nan, close.dtype), jnp.diff(jnp.log(close))])
    idx = jnp.arange(close.shape[0])[:, None] - jnp.arange(VOL_WINDOW)[None, :]
    return jnp.std(rho[jnp.maximum(idx, 0)], axis=1, ddof=1)  # idx < 1 reaches the NaN pad


def vol_target_positions(close: jax.Array, train: jax.Array) -> jax.Array:
    """p_t = min(1, σ* / σ̂_t), long only; σ* = the median σ̂ over the train bars, so the target
    needs no tuning, fits any bar frequency and holds full size in a typical train bar's
    volatility or calmer; p = 0 where σ̂ is undefined. [T]."""
    vol = trailing_vol(close)
    t = jnp.arange(close.shape[0])
    sigma_star = jnp.nanmedian(jnp.where((t >= train[0]) & (t < train[1]), vol, jnp.nan))
    return jnp.where(jnp.isnan(vol), 0.0, jnp.minimum(1.0, sigma_star / vol))


def vol_target_decide(data: FoldData, cfg: RunConfig) -> Decide:
    """Buy-and-hold scaled to the constant target volatility σ* (`vol_target_positions`)."""
    aux = _no_weights(data, cfg)
    positions = vol_target_positions(data.prices.close, data.train)
    return lambda key, state, port: (positions[state.t], aux)


# fit on a fold's train (and validation) bars
FITTED_BASELINES = ("ridge", "gbm", "vol_target")
BASELINES = ("buy_and_hold", "flat", "momentum_20", "ridge", "gbm", "vol_target", "random")
SUPERVISED_BASELINES = ("ridge", "gbm")  # forecasters of the next bar on the same features


@jit_per_program(2, 3, 5)
def baseline_rollouts(data: FoldData, start: jax.Array, length: int, cfg: RunConfig,
                      random_keys: jax.Array, val_steps: int | None,
                      gbm: Forecast | None = None) -> dict[str, Rollout]:
    """Buy-and-hold, flat, 20-bar momentum, ridge (fit on train, α on validation, see
    `fit_ridge` for `val_steps`), the gbm baseline's forecast `gbm` (`gbm.fit_gbm`), vol
    target, and the random policy once per key (leaves of `random` get a leading [R] axis),
    over the same segment with the same costs. With `val_steps` None (no train or validation
    block: a backtest on new bars) the baselines fit to the training data,
    `FITTED_BASELINES`, are left out; gbm also when `gbm` is None."""
    fixed = {"buy_and_hold": constant_decide(1.0, data, cfg),
             "flat": constant_decide(0.0, data, cfg),
             "momentum_20": momentum_decide(20, data, cfg)}
    if val_steps is not None:
        fixed["ridge"] = ridge_decide(fit_ridge(data, val_steps, cfg), data, cfg)
        if gbm is not None:
            fixed["gbm"] = forecast_decide(gbm, data, cfg)
        fixed["vol_target"] = vol_target_decide(data, cfg)
    out = {name: rollout(d, data, start, length, cfg, random_keys[0]) for name, d in fixed.items()}
    out["random"] = jax.vmap(lambda k: rollout(random_decide(data, cfg), data, start, length,
                                               cfg, k))(random_keys)
    return out


def oracle_decide(position: jax.Array, data: FoldData, cfg: RunConfig) -> Decide:
    """Planted-signal oracle: the known target position[t] [T] (signed fraction of equity,
    `SyntheticMarket.oracle_position`) at the close of bar t."""
    aux = _no_weights(data, cfg)
    return lambda key, state, port: (position[state.t].astype(jnp.float32), aux)


@jit_per_program(3, 4)
def oracle_rollout(position: jax.Array, data: FoldData, start: jax.Array, length: int,
                   cfg: RunConfig) -> Rollout:
    """The oracle's rollout over [start, start + length), same fills and costs as the agent."""
    return rollout(oracle_decide(position, data, cfg), data, start, length, cfg,
                   jax.random.PRNGKey(0))
