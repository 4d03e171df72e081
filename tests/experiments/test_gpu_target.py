"""Compiling for a described GPU without one (experiments.gpu_target): its plumbing, checked
on a CPU mesh in the target's place (CI has no CUDA plugin), and its errors."""

import sys

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from experiments import gpu_target
from rl_trader.cli.options import config_from_args
from rl_trader.cli.train import build_parser
from rl_trader.errors import InputError
from rl_trader.run.prepare import build_cohort, prepare
from rl_trader.runtime.devices import POP_AXIS
from tests.helpers import TINY_ARGS


def cpu_mesh() -> jax.sharding.Mesh:
    return jax.sharding.Mesh(np.array(jax.devices()[:1]), (POP_AXIS,))


def test_every_described_target_is_offered():
    assert "h100" in gpu_target.target_names()


def test_rehome_keeps_the_population_axis_and_replicates_the_rest():
    mesh = cpu_mesh()
    tree = {"members": jax.device_put(np.zeros((4, 3), np.float32),
                                      NamedSharding(mesh, PartitionSpec(POP_AXIS))),
            "host": np.zeros(5, np.int32)}
    moved = gpu_target.rehome(tree, mesh)
    assert isinstance(moved["members"], jax.ShapeDtypeStruct)
    assert moved["members"].shape == (4, 3) and moved["members"].dtype == np.float32
    assert moved["members"].sharding == NamedSharding(mesh, PartitionSpec(POP_AXIS))
    assert moved["host"].shape == (5,) and moved["host"].dtype == np.int32
    assert moved["host"].sharding == NamedSharding(mesh, PartitionSpec())


def test_a_retargeted_cohort_lowers_and_compiles_its_epoch_on_abstract_arguments():
    """The cohort moved to a mesh (a CPU one here, a GPU's compile-only device with the
    plugin) holds no arrays, and its epoch program compiles there for its initial state."""
    cfg = config_from_args(build_parser("t").parse_args(
        [*TINY_ARGS, "--data", "synthetic:ar1:1200:1"]))
    c = gpu_target.retarget(build_cohort(prepare(cfg, fit_trees=False), placeholder=True),
                            cpu_mesh())
    assert all(isinstance(x, jax.ShapeDtypeStruct)
               for x in jax.tree.leaves((c.keys, c.data, c.hps)))
    runners = jax.eval_shape(c.pop.init, c.keys, c.data)
    compiled = c.pop.epoch.lower(runners, c.data, c.hps).compile()
    assert compiled.as_text()


def test_no_target_is_no_mesh():
    assert gpu_target.target_mesh(None) is None


def test_an_unknown_target_is_refused_in_one_line():
    with pytest.raises(InputError, match=r"--gpu-target='a100' is unknown: must be one of .*h100"):
        gpu_target.target_mesh("a100")


def test_a_missing_plugin_is_named_with_its_install_command(monkeypatch):
    from jax.experimental import topologies

    def no_plugin(**_):
        raise NotImplementedError("topology not implemented for cuda")
    monkeypatch.setattr(topologies, "get_topology_desc", no_plugin)
    monkeypatch.delenv("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", raising=False)  # restored after
    with pytest.raises(InputError, match=r"--gpu-target=h100: jax's CUDA plugin is not "
                                         r"installed \(`make gpu-compiler`"):
        gpu_target.target_mesh("h100")


def test_the_process_runs_again_with_the_plugin_first_on_its_path(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(gpu_target.os, "execve", lambda *a: calls.append(a))
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setattr(gpu_target, "PLUGIN_DIR", tmp_path / "absent")
    gpu_target.with_plugin("experiments.program_size", ["--gpu-target", "h100"])
    assert calls == []  # no plugin folder: nothing to add
    monkeypatch.setattr(gpu_target, "PLUGIN_DIR", tmp_path)
    gpu_target.with_plugin("experiments.program_size", ["--gpu-target", "h100"])
    (exe, argv, env), = calls
    assert exe == sys.executable
    assert argv == [sys.executable, "-m", "experiments.program_size", "--gpu-target", "h100"]
    assert env["PYTHONPATH"] == f"{tmp_path.resolve()}:/elsewhere"
    assert env["JAX_SKIP_CUDA_CONSTRAINTS_CHECK"] == "1"
    monkeypatch.setattr(sys, "path", [str(tmp_path.resolve()), *sys.path])
    gpu_target.with_plugin("experiments.program_size", [])
    assert len(calls) == 1  # already on the path: not run again
