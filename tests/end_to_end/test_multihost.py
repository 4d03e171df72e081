"""Two processes on one machine over loopback (CPU, gloo): same results as one process.

Each process has 2 fake CPU devices, so the mesh spans 4 devices in 2 processes; the population
of 2 folds is padded to 4. Fold k's checkpoints are written by its owner, process k; process 0
writes summary.json and the report. The two-process run is killed after its first epoch and
resumed by two processes with --resume. The options are the tiny run's (`helpers.TINY_ARGS`), so
the one-process run (in the test's own process) compiles the programs the other tiny runs of
its worker then reuse.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

from rl_trader.cli.train import main
from rl_trader.run.checkpoint import FoldCheckpoints
from tests.helpers import TINY_ARGS

ROOT = Path(__file__).resolve().parents[2]
ARGS = [*TINY_ARGS, "--data", "synthetic:ar1:1200:4"]  # 3 epochs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# `python -m rl_trader.cli.train ARGV` with one change to JAX's persistent compilation cache: the
# key of a program hashes the device kinds instead of the topology's fingerprint, which on the
# CPU differs from process to process, so both processes of a run look up the same entries.
# With JAX's jax_share_binary_between_hosts, process 0 alone compiles a multi-process program
# and hands it to process 1 (a process waiting for it is not at a gloo collective), and the
# resumed processes both load what the killed run's process 0 wrote to the session's cache.
SAME_CACHE_KEY = """
import runpy, sys
from jax._src import cache_key
cache_key._hash_accelerator_config = cache_key._hash_devices
sys.argv[0] = "rl_trader.cli.train"
runpy.run_module("rl_trader.cli.train", run_name="__main__", alter_sys=True)
"""


def two_processes(args: list[str], env: dict) -> list[tuple[int, str, str]]:
    """Run `rl_trader.cli.train ARGS` as processes 0 and 1 (`SAME_CACHE_KEY`); (return code,
    stderr, stdout) of each."""
    port = free_port()
    procs = [subprocess.Popen(
        [sys.executable, "-c", SAME_CACHE_KEY, *args, "--coordinator",
         f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(i)], cwd=ROOT,
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    try:
        outs = [p.communicate(timeout=400) for p in procs]
    finally:
        for p in procs:
            p.kill()
    return [(p.returncode, err, out) for p, (out, err) in zip(procs, outs, strict=True)]


def test_two_processes_killed_and_resumed_match_one(tmp_path):
    assert main([*ARGS, "--no-report", "--run-dir", str(tmp_path / "one")]) == 0  # here
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    # The session's compilation cache, one key for both processes (`SAME_CACHE_KEY`): without
    # it their keys differ (each process's device topology is hashed) and only process 0
    # writes, so process 0 alone would load its programs while process 1 compiles them;
    # process 0 then waits at the first gloo collective and, past gloo's 30 s rendezvous
    # deadline, fails (seen with process 1 slowed on a busy core). With one key, the killed
    # run's process 0 compiles each program once for both and the resumed run loads them all.
    env2 = {**env, "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")
            + " --xla_force_host_platform_device_count=2",
            "JAX_SHARE_BINARY_BETWEEN_HOSTS": "true"}
    two = tmp_path / "two"
    killed = two_processes(ARGS + ["--run-dir", str(two)], {**env2, "RL_TRADER_KILL_AT": "saved:0"})
    assert [rc for rc, _, _ in killed] == [-9, -9], killed[0][1][-3000:]
    assert not (two / "summary.json").exists()
    for k in range(2):  # epoch 0, saved by the killed run: by fold k's owner, process k
        with FoldCheckpoints(two / f"fold_{k}" / "checkpoints", "", {}, read_only=True) as c:
            assert c.metadata(0)["process"] == k
    resumed = two_processes(["--run-dir", str(two), "--resume"], env2)
    for rc, err, _ in resumed:
        assert rc == 0, err[-3000:]
    assert "resuming after epoch 0 of 0..2" in resumed[0][2]  # not a fresh start
    one = json.loads((tmp_path / "one" / "summary.json").read_text())
    both = json.loads((two / "summary.json").read_text())
    timings = json.loads((two / "timings.json").read_text())
    assert timings["processes"] == 2 and timings["devices"] == 4
    assert [len(f["epochs"]) for f in both["folds"]] == [3, 3]
    np.testing.assert_allclose([f["test_sharpe"] for f in both["folds"]],
                               [f["test_sharpe"] for f in one["folds"]], atol=1e-4)
    np.testing.assert_allclose([f["val_sharpe"] for f in both["folds"]],
                               [f["val_sharpe"] for f in one["folds"]], atol=1e-4)
    for k in range(2):  # the epochs kept (the best two and the latest, 2, saved by the
        # resumed run) were all saved by process k
        ckpts = two / f"fold_{k}" / "checkpoints"
        kept = sorted(int(p.name) for p in ckpts.iterdir() if p.name.isdigit())
        assert kept[-1] == 2
        with FoldCheckpoints(ckpts, both["fingerprint"], {}) as c:
            assert [c.metadata(e)["process"] for e in kept] == [k] * len(kept)
    assert not (two / "resume").exists()
    assert (two / "report.html").is_file()  # by process 0
