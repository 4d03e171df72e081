"""Two processes on one machine over loopback (CPU, gloo): same results as one process.

Each process has 2 fake CPU devices, so the mesh spans 4 devices in 2 processes; the population
of 2 folds is padded to 4. Fold k's checkpoints are written by its owner, process k; process 0
writes summary.json and the report. The two-process run is killed after its first epoch and
resumed by two processes with --resume.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

from rl_trader.checkpoint import FoldCheckpoints

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--preset", "smoke", "--data", "synthetic:ar1:1200:4", "--folds", "2", "--epochs", "2",
        "--envs", "4", "--steps-per-epoch", "8", "--batch", "8"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_processes(args: list[str], env: dict) -> list[tuple[int, str, str]]:
    """Run `experiments.multi_fold ARGS` as processes 0 and 1; (return code, stderr, stdout)
    of each."""
    port = free_port()
    procs = [subprocess.Popen(
        [sys.executable, "-m", "experiments.multi_fold", *args, "--coordinator",
         f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(i)], cwd=ROOT,
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    try:
        outs = [p.communicate(timeout=400) for p in procs]
    finally:
        for p in procs:
            p.kill()
    return [(p.returncode, err, out) for p, (out, err) in zip(procs, outs, strict=True)]


def test_two_processes_killed_and_resumed_match_one(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT),
           "RL_TRADER_JAX_CACHE": "off"}
    single = subprocess.run([sys.executable, "-m", "experiments.multi_fold", *ARGS,
                             "--run-dir", str(tmp_path / "one")], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr[-2000:]
    env2 = {**env, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    two = tmp_path / "two"
    killed = two_processes(ARGS + ["--run-dir", str(two)], {**env2, "RL_TRADER_KILL_AT": "saved:0"})
    assert [rc for rc, _, _ in killed] == [-9, -9], killed[0][1][-3000:]
    assert not (two / "summary.json").exists()
    resumed = two_processes(["--run-dir", str(two), "--resume"], env2)
    for rc, err, _ in resumed:
        assert rc == 0, err[-3000:]
    assert "resuming after epoch 0 of 0..1" in resumed[0][2]  # not a fresh start
    one = json.loads((tmp_path / "one" / "summary.json").read_text())
    both = json.loads((two / "summary.json").read_text())
    timings = json.loads((two / "timings.json").read_text())
    assert timings["processes"] == 2 and timings["devices"] == 4
    assert [len(f["epochs"]) for f in both["folds"]] == [2, 2]
    np.testing.assert_allclose([f["test_sharpe"] for f in both["folds"]],
                               [f["test_sharpe"] for f in one["folds"]], atol=1e-4)
    np.testing.assert_allclose([f["val_sharpe"] for f in both["folds"]],
                               [f["val_sharpe"] for f in one["folds"]], atol=1e-4)
    for k in range(2):  # epoch 0 saved by the killed run, epoch 1 by the resumed one
        with FoldCheckpoints(two / f"fold_{k}" / "checkpoints", both["fingerprint"], {}) as c:
            assert [c.metadata(e)["process"] for e in (0, 1)] == [k, k]
    assert not (two / "resume").exists()
