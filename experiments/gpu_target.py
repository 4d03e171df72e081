"""A GPU's compile measured without a GPU: XLA's deviceless compilation for a described target.

With jax's CUDA plugin importable (`make gpu-compiler` puts it in `.gpu-compiler/`, beside the
CPU environment: inside it, every jax process of a machine without a GPU would try the plugin's
GPU first and print its failure) and no GPU present, XLA compiles for a GPU from a target
description instead of a device (`gpu_targets/<name>.txtpb`: the device's limits, core count,
clocks, caches and memory bandwidth, the numbers its cost model reads).
`experiments.program_size --gpu-target h100` and `experiments.compile_parts --gpu-target h100`
use it: the run's programs are lowered on abstract arguments placed on that target (`retarget`)
and compiled there, so the HLO passes, priority fusion among them, run as on the GPU's host.
Nothing can be called, and autotuning is off (no device to time), so a compile's seconds are
the passes' and code generation's on this machine's cores, not the GPU host's: compare variants
with each other here, and confirm on the GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from rl_trader.errors import InputError
from rl_trader.runtime.devices import POP_AXIS
from rl_trader.training.population import Cohort, Population

TARGETS = Path(__file__).with_name("gpu_targets")
PLUGIN_DIR = Path(__file__).resolve().parent.parent / ".gpu-compiler"  # `make gpu-compiler`


def target_names() -> list[str]:
    """The described targets (`gpu_targets/*.txtpb`), by name."""
    return sorted(p.stem for p in TARGETS.glob("*.txtpb"))


def add_option(parser: argparse.ArgumentParser) -> None:
    """The `--gpu-target NAME` option of the experiments that compile the run's programs."""
    parser.add_argument("--gpu-target", choices=target_names(),
                        help="compile for this GPU without one (XLA's deviceless compilation; "
                        "needs `make gpu-compiler`)")


def with_plugin(module: str, argv: list[str]) -> None:
    """Run `python -m module argv` again in this process's place with the plugin's folder
    (`make gpu-compiler`) first on PYTHONPATH, unless it is on `sys.path` already or absent:
    jax registers the plugin's GPU kernels (its random bits' among them) when it is
    imported, so the folder cannot join later. Its check for a present GPU is skipped."""
    if not PLUGIN_DIR.is_dir() or str(PLUGIN_DIR.resolve()) in sys.path:
        return
    path = os.pathsep.join(p for p in (str(PLUGIN_DIR.resolve()), os.environ.get("PYTHONPATH"))
                           if p)
    env = dict(os.environ, PYTHONPATH=path, JAX_SKIP_CUDA_CONSTRAINTS_CHECK="1")
    os.execve(sys.executable, [sys.executable, "-m", module, *argv], env)


def target_mesh(name: str | None) -> Mesh | None:
    """A one-device mesh over the population axis on target `name`'s compile-only device
    (call it before anything else of jax starts a backend: the plugin's check for a
    present GPU is skipped from here on); None for no target."""
    if name is None:
        return None
    path = TARGETS / f"{name}.txtpb"
    if not path.is_file():
        raise InputError(f"option --gpu-target={name!r} is unknown: must be one of "
                         f"{', '.join(target_names())}")
    os.environ["JAX_SKIP_CUDA_CONSTRAINTS_CHECK"] = "1"  # no GPU here: nothing to check
    from jax.experimental import topologies
    try:
        topology = topologies.get_topology_desc(platform="cuda", topology="1x1x1",
                                                target_config=path.read_text())
    except NotImplementedError as err:
        raise InputError(f"option --gpu-target={name}: jax's CUDA plugin is not installed "
                         f"(`make gpu-compiler` installs it in {PLUGIN_DIR.name}/): "
                         f"{err}") from None
    return topologies.make_mesh(topology, (1,), (POP_AXIS,))


def rehome(tree: object, mesh: Mesh) -> object:
    """Every leaf of `tree` (arrays or shape structs) as a shape struct on `mesh`, with its
    own partition spec where it has a named sharding (the population axis), else
    replicated."""
    def one(x: object) -> jax.ShapeDtypeStruct:
        sharding = getattr(x, "sharding", None)
        spec = sharding.spec if isinstance(sharding, NamedSharding) else PartitionSpec()
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(mesh, spec))
    return jax.tree.map(one, tree)


def retarget(c: Cohort, mesh: Mesh) -> Cohort:
    """The cohort's programs and device arguments moved to `mesh`: its population jitted
    with outputs there, its keys, data and hyperparameters as shape structs there."""
    return dataclasses.replace(c, mesh=mesh, pop=Population(c.pop.trainer, mesh),
                               keys=rehome(c.keys, mesh), data=rehome(c.data, mesh),
                               hps=rehome(c.hps, mesh))
