"""Sharding the population over devices: results do not depend on the layout.

Runs in subprocesses with 4 fake CPU devices (XLA_FLAGS must be set before JAX starts). The
population is 2 folds × 3-seed ensembles = 6 members: on 4 devices it is padded to 8 (2 a
device), and fold 0's ensemble spans devices 0 and 1. The subprocess ends with a 4-device run
killed after its first epoch (its programs already traced in that process), which a second
subprocess resumes on 1 device with the programs the first compiled (the session's cache).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--preset", "smoke", "--data", "synthetic:ar1:1200:3", "--folds", "2", "--epochs", "2",
        "--envs", "4", "--steps-per-epoch", "8", "--batch", "8", "--seeds", "3", "--no-report"]
SCRIPT = """
import json, os, sys
from rl_trader.cli.train import main
base = sys.argv[1]
args = json.loads(sys.argv[2])
out = {}
for n in (1, 4):
    assert main(args + ["--devices", str(n), "--run-dir", f"{base}/d{n}"]) == 0
    s = json.load(open(f"{base}/d{n}/summary.json"))
    t = json.load(open(f"{base}/d{n}/timings.json"))
    out[n] = {"test": [f["test_sharpe"] for f in s["folds"]],
              "val": [f["val_sharpe"] for f in s["folds"]], "devices": t["devices"]}
assert main(args + ["--devices", "5", "--run-dir", f"{base}/d5"]) == 2
print("RESULT " + json.dumps(out), flush=True)
os.environ["RL_TRADER_KILL_AT"] = "saved:0"  # this process ends here, by SIGKILL
main(args + ["--devices", "4", "--run-dir", f"{base}/four_then_one"])
"""


def four_devices() -> dict:
    """The environment of a process with 4 fake CPU devices and the session's cache."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT),
           "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")
           + " --xla_force_host_platform_device_count=4"}
    env.pop("RL_TRADER_KILL_AT", None)
    return env


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    base = tmp_path_factory.mktemp("devices")
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(base), json.dumps(ARGS)], cwd=ROOT,
                         env=four_devices(), capture_output=True, text=True, timeout=600)
    assert out.returncode == -9, out.stderr[-3000:]  # killed in the last run, as planned
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return {int(k): v for k, v in json.loads(line[len("RESULT "):]).items()}, base


def test_same_results_on_1_and_4_devices(layouts):
    """6 members on 4 devices need 2 pad members, and fold 0's ensemble spans two devices;
    the per-fold Sharpes must not move."""
    layouts, _ = layouts
    assert [layouts[n]["devices"] for n in (1, 4)] == [1, 4]
    np.testing.assert_allclose(layouts[4]["test"], layouts[1]["test"], atol=1e-4)
    np.testing.assert_allclose(layouts[4]["val"], layouts[1]["val"], atol=1e-4)


def test_a_run_killed_on_four_devices_resumes_on_one(layouts):
    """The resume state holds the members as the devices held them, padded to the device
    count (6 members → 8 rows here); resumed on one device the pad rows are dropped and the
    run ends as the uninterrupted one-device run does (on the CPU, to 1e-4)."""
    layouts, base = layouts
    run_dir = base / "four_then_one"

    # killed after epoch 0 (`layouts`): a resume state, no summary
    assert (run_dir / "resume").is_dir() and not (run_dir / "summary.json").exists()
    again = subprocess.run([sys.executable, "-m", "rl_trader.cli.train", "--resume",
                            "--run-dir", str(run_dir), "--devices", "1", "--no-report"], cwd=ROOT,
                           env=four_devices(), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming after epoch 0" in again.stdout
    both = json.loads((run_dir / "summary.json").read_text())
    np.testing.assert_allclose([f["test_sharpe"] for f in both["folds"]], layouts[1]["test"],
                               atol=1e-4)
    np.testing.assert_allclose([f["val_sharpe"] for f in both["folds"]], layouts[1]["val"],
                               atol=1e-4)
