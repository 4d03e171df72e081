"""Shared test helpers: random observations and host-filled network params."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from rl_trader.config import AgentConfig, FoldConfig, RunConfig, TrainConfig, preset
from rl_trader.networks import Obs

F, L, P = 3, 5, 5  # market vars, look-back, portfolio vars of the small test networks


def make_obs(seed, lead=()):
    rng = np.random.default_rng(seed)
    return Obs(market=jnp.asarray(rng.normal(size=lead + (F,)), jnp.float32),
               window=jnp.asarray(rng.normal(size=lead + (L, F)), jnp.float32),
               portfolio=jnp.asarray(rng.normal(size=lead + (P,)), jnp.float32))


def init_params(module, *args, seed=0):
    """Params of `module` with the structure of `module.init`, filled from numpy.

    Kernels ~ N(0, 1/fan_in), biases ~ N(0, 0.1²), LayerNorm scales ~ 1 + N(0, 0.1²). Filling on
    the host avoids compiling Flax's initialisers, the slowest part of these tests on a CPU.
    """
    rng = np.random.default_rng(seed)
    shapes = jax.eval_shape(module.init, jax.random.key(0), *args)

    def fill(path, s):
        name = str(path[-1])
        if "kernel" in name:
            x = rng.normal(size=s.shape) / np.sqrt(s.shape[-2])
        elif "scale" in name:
            x = 1.0 + 0.1 * rng.normal(size=s.shape)
        else:
            x = 0.1 * rng.normal(size=s.shape)
        return jnp.asarray(x, s.dtype)

    return jax.tree_util.tree_map_with_path(fill, shapes)


def tiny_config(n_envs: int = 4) -> RunConfig:
    """A seconds-long run on the CPU: smoke network, 2 folds of a 1,200-bar AR(1) market."""
    smoke = preset("smoke")
    return dataclasses.replace(
        smoke,
        data=dataclasses.replace(smoke.data, path="synthetic:ar1:1200:1"),
        folds=FoldConfig(n_folds=2),
        agent=AgentConfig(batch_size=8, replay_capacity=32, n_step=2),
        train=TrainConfig(epochs=2, n_envs=n_envs, steps_per_epoch=12, prefill_steps=4,
                          seeds=1))
