"""The Q-networks' parts: Temporal Fusion Transformer blocks and the shared encoder (Flax Linen).

    GLU(x)    = σ(W₄x + b₄) ⊙ (W₅x + b₅)
    GRN(a, c) = LayerNorm(a' + GLU(W₁·ELU(W₂a + W₃c + b₂) + b₁)),  a' = a or a projection of a
    VSN(x, c) = Σ_v w_v · ξ_v,   ξ_v = Σ_k h_k(x_v)·A_vk,   w = softmax(GRN(flatten[h(x_v)]_v, c))
      (ξ_v a learnt piecewise-linear curve in R^d through K knots, h the hat basis; Σ_v w_v ξ_v
      is one [..., V·K]·[V·K, d] matmul, with no [..., V, d] tensor)
    Q_b(s, a) = V(s) + A_b(s, a) − mean_a' A_b(s, a')      for each branch b (BDQ)

Each Q-head's network (`model_head.ModelQNetwork`, `generic_head.QNetwork`) is built from these
parts on a VSN over the market variables with the look-back context (`encode_market`); the
generic head's encoder `encode` adds one over the portfolio variables (the model head's
continuation reads the afterstate and needs none).

Inputs (leading batch axes allowed): market variables [..., F] at bar t, the look-back window
[..., L, F] (bars t−L+1 … t), portfolio variables [..., P]. With L > 1 the window is summarised
into a context vector that conditions the market VSN, the trunk and the forecasts; with L = 1
(bar-level inputs) the window is the market row itself and there is no context.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from rl_trader.config import NetConfig
from rl_trader.data.fold_data import Obs


def numerics(precision: str) -> tuple[jnp.dtype, jax.lax.Precision]:
    """(compute dtype, matmul precision) of a `NetConfig.precision`; params stay float32."""
    return {"tf32": (jnp.float32, jax.lax.Precision.DEFAULT),
            "fp32": (jnp.float32, jax.lax.Precision.HIGHEST),
            "bf16": (jnp.bfloat16, jax.lax.Precision.DEFAULT)}[precision]


class GLU(nn.Module):
    """Gated linear unit: σ(W₄x) ⊙ (W₅x), output width `features`."""

    features: int
    precision: str = "tf32"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        dtype, prec = numerics(self.precision)
        gate = nn.Dense(self.features, dtype=dtype, precision=prec, name="gate")(x)
        value = nn.Dense(self.features, dtype=dtype, precision=prec, name="value")(x)
        return jax.nn.sigmoid(gate) * value


class GRN(nn.Module):
    """Gated residual network with optional context; output width `features`.

    η₂ = ELU(W₂a + W₃c + b₂), η₁ = W₁η₂ + b₁, GRN = LayerNorm(skip(a) + GLU(η₁)).
    """

    features: int
    hidden: int | None = None
    precision: str = "tf32"

    @nn.compact
    def __call__(self, a: jax.Array, context: jax.Array | None = None) -> jax.Array:
        hidden = self.hidden or self.features
        dtype, prec = numerics(self.precision)
        h = nn.Dense(hidden, dtype=dtype, precision=prec, name="w2")(a)
        if context is not None:
            h = h + nn.Dense(hidden, use_bias=False, dtype=dtype, precision=prec,
                             name="w3")(context)
        h = nn.Dense(hidden, dtype=dtype, precision=prec, name="w1")(jax.nn.elu(h))
        skip = a if a.shape[-1] == self.features else nn.Dense(
            self.features, dtype=dtype, precision=prec, name="skip")(a)
        glu = GLU(self.features, self.precision, name="glu")(h)
        return nn.LayerNorm(dtype=dtype, name="norm")(skip + glu)


# In the units of the VSN's input: train-normalised z-scores for the market group (a curve is
# flat beyond ±4); the generic head's portfolio VSN reads its variables as they are.
KNOTS = (-4.0, -3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0)


def hat_basis(x: jax.Array) -> jax.Array:
    """The piecewise-linear interpolation weights of x [..., V] on the unit-spaced `KNOTS`,
    [..., V, K] float32: h_k(x) = max(0, 1 − |clip(x) − k_k|), clip to [k₁, k_K]; Σ_k h_k = 1,
    at most two are non-zero, and Σ_k h_k(x)·A_k interpolates the values A_k at the knots."""
    knots = jnp.asarray(KNOTS, jnp.float32)
    xc = jnp.clip(x.astype(jnp.float32), KNOTS[0], KNOTS[-1])[..., None]
    return jnp.maximum(0.0, 1.0 - jnp.abs(xc - knots))


def _straight_curves(key: jax.Array, shape: tuple[int, int],
                     dtype: jnp.dtype = jnp.float32) -> jax.Array:
    """Initial knot values A [V·K, d] of straight lines, A_vk = k_k·u_v with u_v ~ N(0, I_d):
    ξ_v starts as x_v·u_v (clipped), a GRN skip's unit-variance start, and learning bends it."""
    n_knots = len(KNOTS)
    u = jax.random.normal(key, (shape[0] // n_knots, 1, shape[1]), dtype)
    return (u * jnp.asarray(KNOTS, dtype)[:, None]).reshape(shape)


class VSN(nn.Module):
    """Variable selection network over one feature group; returns (output [..., d], w [..., V]).

    Each scalar variable x_v gets a learnt piecewise-linear curve ξ_v = Σ_k h_k(x_v)·A_vk in
    R^d through the `KNOTS` (`hat_basis`; the TFT gives each a GRN instead, at about twice the
    update's bytes). ξ_v is linear in
    the basis, so the selector GRN reads flatten[h(x_v)] (a linear map of flatten[ξ_v] is one
    of it), w = softmax(GRN(flatten[h(x_v)]_v, c)), and the output Σ_v w_v ξ_v =
    flatten[w_v·h(x_v)]_v·A is one [..., V·K]·[V·K, d] matmul.
    """

    features: int
    precision: str = "tf32"

    @nn.compact
    def __call__(self, x: jax.Array,
                 context: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        n_vars, d = x.shape[-1], self.features
        dtype, prec = numerics(self.precision)
        h = hat_basis(x)  # [..., V, K]
        flat = h.reshape(h.shape[:-2] + (-1,))
        logits = GRN(n_vars, hidden=d, precision=self.precision, name="selector")(flat, context)
        weights = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
        a = self.param("knots", _straight_curves, (n_vars * len(KNOTS), d))
        wh = (weights[..., None] * h).reshape(flat.shape)
        return jnp.dot(wh.astype(dtype), a.astype(dtype), precision=prec), weights


def lookback_context(obs: Obs, width: int, precision: str) -> jax.Array | None:
    """The look-back window [..., L, F] summarised as ELU(Dense(flatten)) [..., width], or None
    at L = 1 (bar-level inputs: the window is the market row itself)."""
    if obs.window.shape[-2] == 1:
        return None
    dtype, prec = numerics(precision)
    window = obs.window.reshape(obs.window.shape[:-2] + (-1,))
    return jax.nn.elu(nn.Dense(width, dtype=dtype, precision=prec, name="lookback")(window))


def with_context(x: jax.Array, context: jax.Array | None) -> jax.Array:
    """x beside the look-back context, when there is one."""
    return x if context is None else jnp.concatenate([x, context], -1)


def centred(adv: jax.Array) -> jax.Array:
    """Advantages minus their mean over the last axis (the dueling identification)."""
    return adv - adv.mean(-1, keepdims=True)


def head(n: int, name: str, x: jax.Array, precision: str) -> jax.Array:
    """A Dense head of `n` outputs, returned in float32 (called inside a compact module)."""
    dtype, prec = numerics(precision)
    return nn.Dense(n, dtype=dtype, precision=prec, name=name)(x).astype(jnp.float32)


def encode_market(obs: Obs, cfg: NetConfig) -> tuple[jax.Array | None, jax.Array, jax.Array]:
    """The market part of the encoder (called inside a compact module): the look-back context
    (or None), the market VSN's output [..., d] and weights [..., F]."""
    context = lookback_context(obs, cfg.context, cfg.precision)
    market, w_market = VSN(cfg.hidden, cfg.precision, name="market_vsn")(obs.market, context)
    return context, market, w_market


def encode(obs: Obs, cfg: NetConfig) -> tuple[jax.Array | None, jax.Array, jax.Array,
                                              jax.Array, jax.Array]:
    """The generic head's encoder (called inside a compact module): `encode_market`'s three
    outputs, then the portfolio VSN's output [..., d] and weights [..., P]."""
    context, market, w_market = encode_market(obs, cfg)
    portfolio, w_port = VSN(cfg.hidden, cfg.precision, name="portfolio_vsn")(obs.portfolio)
    return context, market, w_market, portfolio, w_port
