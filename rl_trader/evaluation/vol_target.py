"""Volatility targeting, the `vol_target` baseline's maths (`baselines.rules`): the trailing
σ̂, the train-median target σ* and the long position min(1, σ*/σ̂)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

VOL_WINDOW = 20  # bars of trailing log returns in σ̂


def trailing_vol(close: jax.Array) -> jax.Array:
    """σ̂_t: sample std (ddof 1) of the last VOL_WINDOW log returns log(C_s / C_{s−1}),
    s = t − VOL_WINDOW + 1 … t (bar t's close included, nothing later); NaN while fewer
    returns exist. close: [T] → [T] (as the `vol_20` feature, before normalisation)."""
    rho = jnp.concatenate([jnp.full((1,), jnp.nan, close.dtype), jnp.diff(jnp.log(close))])
    idx = jnp.arange(close.shape[0])[:, None] - jnp.arange(VOL_WINDOW)[None, :]
    return jnp.std(rho[jnp.maximum(idx, 0)], axis=1, ddof=1)  # idx < 1 reaches the NaN pad


def vol_target_scale(close: jax.Array, train: jax.Array) -> jax.Array:
    """σ*: the median `trailing_vol` over the train bars [train₀, train₁) (a scalar, in log
    return per bar), so the target needs no tuning and fits any bar frequency."""
    vol = trailing_vol(close)
    t = jnp.arange(close.shape[0])
    return jnp.nanmedian(jnp.where((t >= train[0]) & (t < train[1]), vol, jnp.nan))


def vol_target_fraction(vol: jax.Array, sigma_star: jax.Array) -> jax.Array:
    """p = min(1, σ* / σ̂), long only: full size in a typical train bar's volatility or calmer;
    0 where σ̂ (`vol`, any shape) or σ* is undefined, or both are 0 (constant prices); 1 where
    only σ̂ is 0."""
    return jnp.nan_to_num(jnp.minimum(1.0, sigma_star / vol), nan=0.0)
