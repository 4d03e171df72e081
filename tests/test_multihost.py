"""Two processes on one machine over loopback (CPU, gloo): same results as one process.

Each process has 2 fake CPU devices, so the mesh spans 4 devices in 2 processes; the population
of 2 folds is padded to 4. Process 0 writes the checkpoints, summary.json and the report.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--preset", "smoke", "--data", "synthetic:ar1:1200:4", "--folds", "2", "--epochs", "1",
        "--envs", "4", "--steps-per-epoch", "8", "--batch", "8"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_match_one(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT),
           "RL_TRADER_JAX_CACHE": "off"}
    single = subprocess.run([sys.executable, "-m", "experiments.multi_fold", *ARGS,
                             "--run-dir", str(tmp_path / "one")], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr[-2000:]
    port = free_port()
    env2 = {**env, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    procs = [subprocess.Popen(
        [sys.executable, "-m", "experiments.multi_fold", *ARGS, "--run-dir",
         str(tmp_path / "two"), "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2",
         "--process-id", str(i)], cwd=ROOT, env=env2, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=400) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    one = json.loads((tmp_path / "one" / "summary.json").read_text())
    two = json.loads((tmp_path / "two" / "summary.json").read_text())
    timings = json.loads((tmp_path / "two" / "timings.json").read_text())
    assert timings["processes"] == 2 and timings["devices"] == 4
    np.testing.assert_allclose([f["test_sharpe"] for f in two["folds"]],
                               [f["test_sharpe"] for f in one["folds"]], atol=1e-4)
    np.testing.assert_allclose([f["val_sharpe"] for f in two["folds"]],
                               [f["val_sharpe"] for f in one["folds"]], atol=1e-4)
    for k in range(2):
        assert (tmp_path / "two" / f"fold_{k}" / "checkpoints").is_dir()
