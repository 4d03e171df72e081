"""The accelerator(s) a run uses, and the mesh that spreads the population over them.

The population axis (folds × settings × seeds) is sharded across devices with
`NamedSharding(mesh, PartitionSpec("pop"))`; members never communicate, so each device runs
its own members and only per-epoch metrics and checkpoints cross to the host. A population
that does not divide the device count is padded with copies of member 0 whose results are
ignored, so results do not depend on the layout.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from rl_trader.errors import InputError


def describe_device() -> str:
    """e.g. 'gpu: NVIDIA H200 (1 device)' or 'cpu: cpu (1 device)'."""
    devs = jax.devices()
    return f"{devs[0].platform}: {devs[0].device_kind} ({len(devs)} device{'s' * (len(devs) > 1)})"


POP_AXIS = "pop"


def population_mesh(n_devices: int | None = None) -> Mesh:
    """A 1-D mesh over the first `n_devices` devices (default: all) for the population axis."""
    devs = jax.devices()
    n = len(devs) if n_devices is None else n_devices
    if not 1 <= n <= len(devs):
        raise InputError(f"option --devices={n} is out of range: must be in [1, {len(devs)}] "
                         f"(devices here: {describe_device()})")
    return Mesh(np.array(devs[:n]), (POP_AXIS,))


def padded_size(n_members: int, mesh: Mesh) -> int:
    """Population size rounded up to a multiple of the mesh's devices (pad members are masked)."""
    n_dev = mesh.devices.size
    return -(-n_members // n_dev) * n_dev


def shard_population(tree, mesh: Mesh):
    """Place every leaf's leading (population) axis across the mesh's devices.

    Every process holds the whole (small) host value and contributes the shards of its own
    devices, so the same call works on one host and on many.
    """
    sharding = NamedSharding(mesh, PartitionSpec(POP_AXIS))

    def place(x):
        host = np.asarray(x)
        return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])

    return jax.tree.map(place, tree)


def initialize_distributed(coordinator: str | None = None, num_processes: int | None = None,
                           process_id: int | None = None, auto: bool = False) -> None:
    """Join a multi-process (multi-host) run through JAX's own distributed runtime.

    Explicit options win; `auto` lets JAX detect a cluster scheduler (SLURM, Open MPI, …) or
    read the usual environment variables. CPU processes talk through gloo collectives.
    """
    if coordinator is None and not auto:
        return
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU only; GPUs use NCCL
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                               process_id=process_id)


def is_multiprocess() -> bool:
    return jax.process_count() > 1


def to_host(x) -> np.ndarray:
    """A (possibly multi-process) array as a full host numpy array, on every process."""
    if is_multiprocess():
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def replicated(mesh: Mesh) -> NamedSharding:
    """A whole copy on every device of the mesh (what the ensembles' acting params are
    evaluated from, in validation and in scoring alike, so both share one program)."""
    return NamedSharding(mesh, PartitionSpec())


@functools.cache
def _picker(mesh: Mesh, size: int):
    """One jitted gather per (mesh, size); the start is traced, so picking never recompiles."""
    return jax.jit(lambda t, i: jax.tree.map(lambda x: jax.lax.dynamic_slice_in_dim(x, i, size),
                                             t), out_shardings=replicated(mesh))


def rows(tree, start: int, size: int, mesh: Mesh):
    """Members [start, start + size) of a sharded population pytree, as host numpy arrays on
    every process (a collective in a multi-process run)."""
    return jax.tree.map(np.asarray, _picker(mesh, size)(tree, np.int32(start)))


def barrier(name: str) -> None:
    """Wait for every process (no-op in a single-process run)."""
    if is_multiprocess():
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)
