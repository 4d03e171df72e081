"""The accelerator(s) a run uses, and the mesh that spreads the population over them.

The population axis (folds × settings × seeds) is sharded across devices with
`NamedSharding(mesh, PartitionSpec("pop"))`; members never communicate, so each device runs
its own members and only per-epoch metrics and checkpoints cross to the host. A population
that does not divide the device count is padded with copies of member 0 whose results are
ignored, so results do not depend on the layout.
"""

from __future__ import annotations

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
    """Place every leaf's leading (population) axis across the mesh's devices."""
    return jax.device_put(tree, NamedSharding(mesh, PartitionSpec(POP_AXIS)))
