"""The rule baselines: constant positions (buy-and-hold, flat), k-bar momentum, the random
policy and volatility targeting; none is fit to data beyond vol targeting's train median
(its position is the data's, `FoldData.vol_ratio`)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from rl_trader import env
from rl_trader.config import RunConfig
from rl_trader.data.fold_data import FoldData
from rl_trader.evaluation.rollout import Decide, no_aux


def constant_decide(fraction: float, data: FoldData, cfg: RunConfig) -> Decide:
    """Hold a constant signed fraction of equity (1.0: buy-and-hold; 0.0: flat)."""
    aux = no_aux(data, cfg)
    return lambda key, state, port: (jnp.float32(fraction), aux)


def momentum_decide(k: int, data: FoldData, cfg: RunConfig) -> Decide:
    """Full long/short by the sign of the past k-bar return: sign(C_t / C_{t−k} − 1)."""
    aux = no_aux(data, cfg)

    def decide(key, state, port):
        past = data.prices.close[jnp.maximum(state.t - k, 0)]
        return jnp.sign(data.prices.close[state.t] - past).astype(jnp.float32), aux

    return decide


def random_decide(data: FoldData, cfg: RunConfig) -> Decide:
    """Uniformly random (direction, magnitude) each bar."""
    aux = no_aux(data, cfg)
    n_mag = len(cfg.env.magnitudes)
    flat = dataclasses.replace(cfg.env, prior="flat")  # the positions themselves, no prior

    def decide(key, state, port):
        kd, km = jax.random.split(key)
        d = jax.random.randint(kd, (), 0, env.N_DIRECTIONS)
        m = jax.random.randint(km, (), 0, n_mag)
        return env.target_fraction(d, m, flat), aux

    return decide


def vol_target_decide(data: FoldData, cfg: RunConfig) -> Decide:
    """Buy-and-hold scaled to the constant target volatility σ*: min(1, σ*/σ̂_t), computed in
    data preparation with σ* from the train bars (`FoldData.vol_ratio`, `data.prior`)."""
    aux = no_aux(data, cfg)
    return lambda key, state, port: (jnp.minimum(1.0, data.vol_ratio[state.t]), aux)
