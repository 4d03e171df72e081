"""The Q-network: Temporal Fusion Transformer parts with a branching dueling head (Flax Linen).

    GLU(x)    = σ(W₄x + b₄) ⊙ (W₅x + b₅)
    GRN(a, c) = LayerNorm(a' + GLU(W₁·ELU(W₂a + W₃c + b₂) + b₁)),  a' = a or a projection of a
    VSN(x, c) = Σ_v w_v · GRN_v(x_v),   w = softmax(GRN(flatten[GRN_v(x_v)]_v, c))
    Q_b(s, a) = V(s) + A_b(s, a) − mean_a' A_b(s, a')      for each branch b (BDQ)

With `NetConfig.linear_path` a linear function of the market row x_t is added to the aux
forecast and to each branch's advantages, A_b += L_b x_t and ŷ += l x_t (one zero-initialised
Dense layer "linear", weight-decayed like every kernel): the network starts as without it and
can learn the linear next-bar relation a ridge regression fits, beside its nonlinear part.

Inputs (leading batch axes allowed): market variables [..., F] at bar t, the look-back window
[..., L, F] (bars t−L+1 … t), portfolio variables [..., P]. The look-back window is summarised
into a context vector that conditions the market VSN, the trunk and the auxiliary head.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from rl_trader.config import NetConfig
from rl_trader.fold_data import Obs


@struct.dataclass
class QOut:
    """Network outputs; leading axes follow the input's."""

    q_direction: jax.Array  # [..., 3]  (short, flat, long)
    q_magnitude: jax.Array  # [..., M]
    aux: jax.Array  # [...]  predicted next-bar return (normalised units)
    market_weights: jax.Array  # [..., F]  VSN selection weights (sum to 1)
    portfolio_weights: jax.Array  # [..., P]


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

    η₂ = ELU(W₂a + W₃c + b₂), η₁ = W₁η₂ + b₁, GRN = LayerNorm(skip(a) + GLU(dropout(η₁)))
    (dropout at rate `dropout` where the TFT puts it; needs the `dropout` rng when > 0).
    """

    features: int
    hidden: int | None = None
    precision: str = "tf32"
    dropout: float = 0.0

    @nn.compact
    def __call__(self, a: jax.Array, context: jax.Array | None = None) -> jax.Array:
        hidden = self.hidden or self.features
        dtype, prec = numerics(self.precision)
        h = nn.Dense(hidden, dtype=dtype, precision=prec, name="w2")(a)
        if context is not None:
            h = h + nn.Dense(hidden, use_bias=False, dtype=dtype, precision=prec,
                             name="w3")(context)
        h = nn.Dense(hidden, dtype=dtype, precision=prec, name="w1")(jax.nn.elu(h))
        h = nn.Dropout(self.dropout)(h, deterministic=self.dropout == 0.0)
        skip = a if a.shape[-1] == self.features else nn.Dense(
            self.features, dtype=dtype, precision=prec, name="skip")(a)
        glu = GLU(self.features, self.precision, name="glu")(h)
        return nn.LayerNorm(dtype=dtype, name="norm")(skip + glu)


class VariableGRNs(nn.Module):
    """One GRN per scalar variable, computed for all variables at once.

    x [..., V] → embeddings [..., V, d]; the parameters carry a leading variable axis V, so
    each variable has its own weights (equivalent to V separate GRNs with input width 1);
    dropout on η₁ as in `GRN`.
    """

    features: int
    precision: str = "tf32"
    dropout: float = 0.0

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        n_vars, d = x.shape[-1], self.features
        init = nn.initializers.lecun_normal(batch_axis=(0,))
        dtype, prec = numerics(self.precision)

        def dense(name: str, n_in: int, h: jax.Array, eq: str) -> jax.Array:
            w = self.param(f"{name}_kernel", init, (n_vars, n_in, d))
            b = self.param(f"{name}_bias", nn.initializers.zeros, (n_vars, d))
            return jnp.einsum(eq, h.astype(dtype), w.astype(dtype), precision=prec) + b.astype(
                dtype)

        xv = x[..., None]  # [..., V, 1]
        h = jax.nn.elu(dense("w2", 1, xv, "...vi,vid->...vd"))
        h = dense("w1", d, h, "...vi,vid->...vd")
        h = nn.Dropout(self.dropout)(h, deterministic=self.dropout == 0.0)
        glu = jax.nn.sigmoid(dense("gate", d, h, "...vi,vid->...vd")) * dense(
            "value", d, h, "...vi,vid->...vd")
        skip = dense("skip", 1, xv, "...vi,vid->...vd")
        y = skip + glu
        y = y.astype(jnp.float32)  # LayerNorm statistics in float32
        mean = y.mean(-1, keepdims=True)
        var = ((y - mean) ** 2).mean(-1, keepdims=True)
        scale = self.param("norm_scale", nn.initializers.ones, (n_vars, d))
        bias = self.param("norm_bias", nn.initializers.zeros, (n_vars, d))
        return ((y - mean) * jax.lax.rsqrt(var + 1e-6) * scale + bias).astype(dtype)


class VSN(nn.Module):
    """Variable selection network over one feature group; returns (output [..., d], w [..., V])."""

    features: int
    precision: str = "tf32"
    dropout: float = 0.0

    @nn.compact
    def __call__(self, x: jax.Array,
                 context: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        emb = VariableGRNs(self.features, self.precision, self.dropout,
                           name="variables")(x)  # [..., V, d]
        flat = emb.reshape(emb.shape[:-2] + (-1,))
        logits = GRN(x.shape[-1], hidden=self.features, precision=self.precision,
                     dropout=self.dropout, name="selector")(flat, context)
        weights = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
        out = jnp.einsum("...v,...vd->...d", weights, emb.astype(jnp.float32))
        return out.astype(emb.dtype), weights


class QNetwork(nn.Module):
    """Branching dueling Q-network over the market and portfolio groups, with an aux head.

    `dropout` (a static rate, default 0: the deterministic network every evaluation uses) drops
    units of every GRN's η₁ while learning; with a rate > 0, `apply` needs
    `rngs={"dropout": key}`. The parameters do not depend on it.
    """

    cfg: NetConfig
    n_magnitudes: int

    @nn.compact
    def __call__(self, obs: Obs, dropout: float = 0.0) -> QOut:
        cfg, p = self.cfg, self.cfg.precision
        dtype, prec = numerics(p)

        def dense(n: int, name: str, x: jax.Array) -> jax.Array:  # a float32 head output
            return nn.Dense(n, dtype=dtype, precision=prec, name=name)(x).astype(jnp.float32)

        window = obs.window.reshape(obs.window.shape[:-2] + (-1,))
        context = jax.nn.elu(nn.Dense(cfg.context, dtype=dtype, precision=prec,
                                      name="lookback")(window))
        market, w_market = VSN(cfg.hidden, p, dropout, name="market_vsn")(obs.market, context)
        portfolio, w_port = VSN(cfg.hidden, p, dropout, name="portfolio_vsn")(obs.portfolio)
        trunk = GRN(cfg.trunk, precision=p, dropout=dropout, name="trunk")(
            jnp.concatenate([market, portfolio], -1), context)
        value = dense(1, "value", trunk)
        adv_dir = dense(3, "adv_direction", trunk)
        adv_mag = dense(self.n_magnitudes, "adv_magnitude", trunk)
        aux = dense(1, "aux", jnp.concatenate([market, context], -1))[..., 0]
        if cfg.linear_path:
            lin = nn.Dense(4 + self.n_magnitudes, dtype=dtype, precision=prec,
                           kernel_init=nn.initializers.zeros, name="linear")(
                obs.market).astype(jnp.float32)  # [..., 1 + 3 + M]
            aux = aux + lin[..., 0]
            adv_dir = adv_dir + lin[..., 1:4]
            adv_mag = adv_mag + lin[..., 4:]
        return QOut(
            q_direction=value + adv_dir - adv_dir.mean(-1, keepdims=True),
            q_magnitude=value + adv_mag - adv_mag.mean(-1, keepdims=True),
            aux=aux, market_weights=w_market, portfolio_weights=w_port)
