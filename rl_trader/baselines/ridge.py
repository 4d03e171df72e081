"""The ridge baseline, and the position rule of every forecast baseline: a forecast ŷ of the
next-bar return traded as clip(ŷ / s, −1, 1), its penalty chosen by validation Sharpe."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from rl_trader.config import RunConfig
from rl_trader.data.fold_data import FoldData, training_bars
from rl_trader.evaluation.metrics import sharpe
from rl_trader.evaluation.rollout import Decide, jit_per_program, no_aux, rollout

# Ridge baseline: penalties α = n_train × these, chosen by validation Sharpe.
RIDGE_ALPHAS = (1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3)


def weighted_rms(y: jax.Array, w: jax.Array) -> jax.Array:
    """s = √(Σ_t w_t y_t² / Σ_t w_t), floored at 1e-12: the position scale of a forecast y [T]
    over the rows w [T] (0/1) it was fit on, so that a forecast of typical size is a full
    position (ridge's forecast sizing)."""
    return jnp.maximum(jnp.sqrt((w * y**2).sum() / jnp.maximum(w.sum(), 1.0)), 1e-12)


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
    # [len(RIDGE_ALPHAS), val_steps]: each penalty's validation returns (the choice's trials)
    val_returns: jax.Array


def forecast_position(y_hat: jax.Array, scale: jax.Array) -> jax.Array:
    """The supervised baselines' position rule, clip(ŷ / s, −1, 1): sized in proportion to
    the forecast (mean-variance sizing for a forecast at constant risk; a near-zero forecast
    trades little, unlike its sign), a forecast of typical size s is a full position, and
    never beyond 1× equity."""
    return jnp.clip(y_hat / scale, -1.0, 1.0)


def ridge_decide(fit: RidgeFit, data: FoldData, cfg: RunConfig) -> Decide:
    """Ridge's forecast ŷ_t = x_tᵀβ + b traded by `forecast_position`; reports ŷ_t as its
    forecast."""
    aux = no_aux(data, cfg)

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
    aux = no_aux(data, cfg)
    return lambda key, state, port: (forecast_position(f.y_hat[state.t], f.scale),
                                     aux.replace(forecast=f.y_hat[state.t]))


@jit_per_program(2, 3)
def forecast_val_returns(forecasts: Forecast, data: FoldData, val_steps: int,
                         cfg: RunConfig) -> tuple[jax.Array, jax.Array]:
    """C candidate forecasts (leaves [C, ...]) traded by `forecast_position` through the env on
    the validation block: (per-bar Sharpe [C], the selection criterion of the fitted baselines;
    per-bar returns [C, val_steps])."""
    def one(f):
        r = rollout(forecast_decide(f, data, cfg), data, data.val[0], val_steps, cfg,
                    jax.random.PRNGKey(0))
        return sharpe(r.returns, 1.0, valid=data.val[1] - data.val[0]), r.returns

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
                        alpha=alpha, val_sharpe=jnp.float32(0.0),
                        val_returns=jnp.zeros(val_steps))

    def validate(fit):
        r = rollout(ridge_decide(fit, data, cfg), data, data.val[0], val_steps, cfg,
                    jax.random.PRNGKey(0))
        return sharpe(r.returns, 1.0, valid=data.val[1] - data.val[0]), r.returns

    fits = jax.vmap(fit_one)(alphas)
    sharpes, returns = jax.vmap(validate)(fits)
    best = jnp.argmax(jnp.where(jnp.isnan(sharpes), -jnp.inf, sharpes))
    return jax.tree.map(lambda x: x[best], fits).replace(val_sharpe=sharpes,
                                                           val_returns=returns)


