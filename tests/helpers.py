"""Shared test helpers: random observations, host-filled network params, the tiny run."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from rl_trader.agent.networks import Obs
from rl_trader.cli.options import config_from_args, run_parser
from rl_trader.config import RunConfig

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


# The tiny main-job run: smoke network, 2 folds, 3 epochs of 8 steps × 4 envs, batch 8; with
# 1,200 bars of data (`--data synthetic:<market>:1200:<seed>` or the gate's `--bars 1200`) it
# is the same set of compiled programs whatever the market and seeds, so every test that
# trains it (in this process or in a subprocess) shares one compilation (tests/conftest.py).
# A kill-and-resume test needs its >= 2 epochs.
TINY_ARGS = ["--preset", "smoke", "--folds", "2", "--epochs", "3", "--envs", "4",
             "--steps-per-epoch", "8", "--batch", "8"]


def tiny_config(n_envs: int = 4, generic: bool = False) -> RunConfig:
    """A seconds-long run on the CPU: `TINY_ARGS` on 1,200 bars of an AR(1) market (the same
    programs as the command-line tests' tiny runs when `n_envs` is 4); with `generic` the
    generic Q-head (on the flat prior, which it acts on) instead of the default model head."""
    args = run_parser("tiny_config", "").parse_args([*TINY_ARGS, "--data", "synthetic:ar1:1200:1"])
    cfg = config_from_args(args)
    if generic:  # the generic head weighs no view: it acts on the position itself
        cfg = dataclasses.replace(cfg, net=dataclasses.replace(cfg.net, q_head="generic"),
                                  env=dataclasses.replace(cfg.env, prior="flat", view="excess"))
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, n_envs=n_envs))


class Unread:
    """A stand-in for a config field that no compiled program may read (those
    `config.program_config` drops): hashing and equality by identity work (jit's static
    arguments need them), every other use raises."""

    def __getattr__(self, name: str):
        raise AssertionError(f"a program read .{name} of a field that program_config drops")

    def _refuse(self, *_):
        raise AssertionError("a program used a field that program_config drops")

    __bool__ = __len__ = __iter__ = __index__ = __int__ = __float__ = _refuse
    __add__ = __radd__ = __mul__ = __rmul__ = __sub__ = __rsub__ = _refuse


def unread_dropped(cfg: RunConfig) -> RunConfig:
    """`cfg` with the fields `config.program_config` drops made `Unread`: a program traced
    from it fails if it reads one of them."""
    return dataclasses.replace(cfg, data=Unread(), folds=Unread(), seed=Unread(),
                               sweep=Unread())
