"""Stage 2 of a run: the population — folds × hyper-parameter settings × seeds — as one program.

`build(cfg, fold_data, …)` → `Cohort`: the members, their ensembles (one per fold and setting),
their keys, fold data and hyper-parameters sharded over the devices, and the jitted programs.
The trainer's `init`, `epoch` and `evaluate` run under `jax.vmap` over the members, each jitted
once (`Population`); the host selects per fold between epochs. Folds share one shape (the
whole bar range; only the segment bounds and the train-fitted normalisation differ), so no
padding is needed when the folds' validation blocks have equal lengths, which `make_folds`
guarantees.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from rl_trader.agent.learner import HParams
from rl_trader.config import SWEEPABLE, RunConfig, program_config
from rl_trader.data.fold_data import FoldData
from rl_trader.errors import InputError
from rl_trader.runtime.devices import POP_AXIS, padded_size, population_mesh, shard_population
from rl_trader.training.train import Trainer, make_train


def stack(trees: list) -> object:
    """Stack identically-shaped pytrees along a new leading axis, on the host (numpy): an
    eager `jnp.stack` would compile one small program per leaf shape."""
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *trees)


@dataclass(frozen=True)
class Member:
    fold: int
    setting: int
    seed: int


def grid(cfg: RunConfig, axes: dict[str, list[float]]) -> list[dict[str, float]]:
    """Cartesian product of sweep values; fields not swept keep the config's value."""
    unknown = set(axes) - set(SWEEPABLE)
    if unknown:
        raise InputError(f"cannot sweep {sorted(unknown)}: sweepable are {', '.join(SWEEPABLE)}")
    base = vars(HParams.from_config(cfg.agent))
    names = list(axes)
    return [{**{k: float(v) for k, v in base.items()}, **dict(zip(names, combo, strict=True))}
            for combo in itertools.product(*(axes[n] for n in names))]


def members_of(n_folds: int, n_settings: int, seeds: list[int]) -> list[Member]:
    """Population order: fold-major, then setting, then seed."""
    return [Member(f, s, r) for f in range(n_folds) for s in range(n_settings) for r in seeds]


class RunKeys(NamedTuple):
    """Every PRNG key a run draws, made in one program (`run_keys`), as host arrays."""

    members: np.ndarray  # [M, 2]: fold_in(fold_in(PRNGKey(seed), fold), member seed)
    evaluate: np.ndarray  # [G, 2]: split(PRNGKey(seed), G), the validation rollouts'
    test: np.ndarray  # [n_folds, 2]: split(PRNGKey(seed + 1), n_folds), the test rollouts'
    random: np.ndarray  # [R, 2]: split(PRNGKey(seed + 2), R), the random policy's seeds


def make_run_keys(run_seed: int, members: list[Member], n_groups: int, n_folds: int,
                  n_random: int) -> RunKeys:
    """The run's keys (`RunKeys`) for `members` in population order, `n_groups` ensembles,
    `n_folds` folds and `n_random` random-policy seeds."""
    keys = run_keys(np.int32(run_seed), np.int32(run_seed + 1), np.int32(run_seed + 2),
                    np.asarray([m.fold for m in members], np.int32),
                    np.asarray([m.seed for m in members], np.int32), n_groups, n_folds,
                    n_random)
    return RunKeys(*(np.asarray(k) for k in keys))


@functools.partial(jax.jit, static_argnums=(5, 6, 7))
def run_keys(seed: jax.Array, seed_1: jax.Array, seed_2: jax.Array, folds: jax.Array,
             seeds: jax.Array, n_groups: int, n_folds: int, n_random: int) -> tuple:
    """`RunKeys`' arrays in one program (eagerly, one per primitive): `seed_1`, `seed_2` are
    seed + 1 and seed + 2, made on the host. Under jax's partitionable threefry (its default)
    a key of `split(k, n)` depends on its index alone, so a prefix of `test` is what
    splitting into fewer gives (tests/training/test_population.py; `scoring.test_keys`)."""
    root = jax.random.PRNGKey(seed)
    members = jax.vmap(lambda f, s: jax.random.fold_in(jax.random.fold_in(root, f), s))(
        folds, seeds)
    return (members, jax.random.split(root, n_groups),
            jax.random.split(jax.random.PRNGKey(seed_1), n_folds),
            jax.random.split(jax.random.PRNGKey(seed_2), n_random))


def population_inputs(members: list[Member], folds: list[FoldData],
                      settings: list[dict[str, float]],
                      keys: np.ndarray) -> tuple[np.ndarray, FoldData, HParams]:
    """Per-member keys (`RunKeys.members`, in `members`' order), fold data and
    hyper-parameters, stacked on a leading axis.

    A member's key depends only on (run seed, fold, seed), not on its position in the
    population, so a member trains exactly as it would alone.
    """
    data = stack([folds[m.fold] for m in members])
    hps = stack([HParams(**{k: np.float32(v) for k, v in settings[m.setting].items()})
                 for m in members])
    return keys, data, hps


class Population:
    """The trainer's functions vmapped over a leading population axis and jitted once.

    With a `mesh`, every output keeps its population axis sharded over the mesh (so the next
    epoch reuses the same compiled program); the population size must then be a multiple of
    the mesh's devices (`devices.padded_size`). `epoch` donates the runners (the replay and
    states are updated in place on the device). `evaluate` rolls out ensembles.
    """

    def __init__(self, trainer: Trainer, mesh: Mesh | None = None) -> None:
        self.trainer = trainer
        out = {} if mesh is None else {"out_shardings": NamedSharding(mesh, PartitionSpec(
            POP_AXIS))}
        # the jitted init, which `init` calls under `threefry_kernels` (traced without that
        # process-wide setting, e.g. by `jax.eval_shape` in another thread, it is a trace of
        # its own, and a lowering of it another program)
        self.init_program = jax.jit(jax.vmap(trainer.init), **out)
        self.init = threefry_kernels(self.init_program)
        self.epoch = jax.jit(jax.vmap(trainer.epoch), donate_argnums=0, **out)
        # Over ensembles [G, S, ...] (see `ensembles`), whose count need not divide the mesh.
        self.evaluate = jax.jit(jax.vmap(trainer.evaluate, in_axes=(0, 0, 0, None, 0)),
                                static_argnums=3)


PROGRAMS_KEPT = 4  # populations kept by `programs` (least recently used dropped)


def programs(cfg: RunConfig, mesh: Mesh | None) -> Population:
    """The jitted population programs of `cfg`, made once per process for each
    `program_config(cfg)` and mesh, and built from that
    program config alone: a later run of this process with the same key (another market,
    seed or fold layout of equal shapes, as the gate's runs) reuses the traced and compiled
    programs instead of tracing them again. JAX still retraces for inputs of new shapes."""
    return _programs(Population, program_config(cfg), mesh)


@functools.lru_cache(maxsize=PROGRAMS_KEPT)
def _programs(cls: type[Population], cfg: RunConfig, mesh: Mesh | None) -> Population:
    return cls(make_train(cfg), mesh)


THREEFRY_KERNELS = "jax_threefry_gpu_kernel_lowering"


def with_jax_settings(fn: Callable, settings: dict[str, object]) -> Callable:
    """`fn` called — so traced and compiled — with the JAX config `settings` in force, each
    restored afterwards, also on an error. The settings are process-wide while `fn` runs:
    call it from the thread that drives the run, and not under an outer `jit` (a program
    compiled after the call returns would not see them)."""

    @functools.wraps(fn)
    def call(*args: object) -> object:
        before = {name: getattr(jax.config, name) for name in settings}
        try:
            for name, value in settings.items():
                jax.config.update(name, value)
            return fn(*args)
        finally:
            for name, value in before.items():
                jax.config.update(name, value)

    return call


def threefry_kernels(fn: Callable) -> Callable:
    """`fn` traced and compiled with JAX's threefry PRNG lowered to one GPU kernel.

    The init program draws every parameter leaf with its own inlined threefry hash; XLA's
    HLO passes took 11–12 s of its 17 s compile on an H200, most of it priority fusion
    (docs/history/benchmarks.md). With the hash as a kernel the
    program compiles in 3.7 s with bitwise-equal outputs (the same integer hash). Not used
    for the epoch program: there it compiles 21.0 s against 23.5 s but runs 7 % slower. The
    flag is part of JAX's jit key and only acts on GPUs; see `with_jax_settings` for its scope.
    """
    return with_jax_settings(fn, {THREEFRY_KERNELS: True})


def ensembles(tree: object, n_groups: int, size: int) -> object:
    """A population pytree [P, ...] in `members_of` order (pad members last) → [G, S, ...]:
    group g = (fold, setting) holds its S seeds, the ensemble that acts as the fold's policy."""
    return jax.tree.map(lambda x: x[:n_groups * size].reshape((n_groups, size) + x.shape[1:]),
                        tree)


def take(tree: object, i: int) -> object:
    """Member `i` of a population pytree (leading axis), as host numpy arrays."""
    return jax.tree.map(lambda x: np.asarray(x)[i], tree)


@dataclass(frozen=True)
class Cohort:
    """A run's population, built once (`build`): who trains, on what, with which programs.

    Members are in `members_of` order; ensemble g = members [g·S, (g+1)·S) is one (fold,
    setting) and acts as one policy. The sharded arrays carry pad members at the end (copies of
    member 0, ignored) so that the population divides the devices.
    """

    members: list[Member]
    settings: list[dict[str, float]]
    n_seeds: int  # S: seeds per ensemble
    fold_data: list[FoldData]  # host/device arrays per fold
    mesh: Mesh
    pop: Population
    keys: jax.Array  # [P_pad, 2] sharded
    data: FoldData  # leaves [P_pad, ...] sharded
    hps: HParams  # leaves [P_pad] sharded
    val_data: FoldData  # leaves [G, ...] host numpy: each ensemble's fold
    run_keys: RunKeys  # host arrays: the validation, test and random-policy keys among them

    @property
    def eval_keys(self) -> np.ndarray:
        """[G, 2]: the validation rollouts' keys."""
        return self.run_keys.evaluate

    @property
    def groups(self) -> list[Member]:
        """The first member of each ensemble (its fold and setting)."""
        return self.members[::self.n_seeds]

    @property
    def n_padded(self) -> int:
        return self.keys.shape[0]

    def ensembles_of(self, fold: int) -> list[int]:
        """Indices of fold `fold`'s ensembles."""
        return [g for g, m in enumerate(self.groups) if m.fold == fold]

    def members_of(self, fold: int) -> list[int]:
        """Indices of fold `fold`'s members."""
        return [i for i, m in enumerate(self.members) if m.fold == fold]


def build(cfg: RunConfig, fold_data: list[FoldData], devices: int | None,
          n_random: int) -> Cohort:
    """Stage 2: every (fold, setting, seed) member with its fresh inputs, sharded over the first
    `devices` local devices (default: all), and the trainer's jitted programs. `fold_data`:
    each fold's arrays; `n_random`: the random policy's seeds to draw keys for."""
    settings = grid(cfg, {k: list(v) for k, v in cfg.sweep})
    n_seeds = cfg.train.seeds
    members = members_of(len(fold_data), len(settings), list(range(n_seeds)))
    mesh = population_mesh(devices)
    padded = members + [members[0]] * (padded_size(len(members), mesh) - len(members))
    groups = members[::n_seeds]
    keys = make_run_keys(cfg.seed, padded, len(groups), len(fold_data), n_random)
    sharded, data, hps = shard_population(
        population_inputs(padded, fold_data, settings, keys.members), mesh)
    return Cohort(members=members, settings=settings, n_seeds=n_seeds, fold_data=fold_data,
                  mesh=mesh, pop=programs(cfg, mesh),
                  keys=sharded, data=data, hps=hps,
                  val_data=stack([fold_data[m.fold] for m in groups]), run_keys=keys)
