"""Sharding the population over devices: results do not depend on the layout.

Runs in a subprocess with 4 fake CPU devices (XLA_FLAGS must be set before JAX starts). The
population is 2 folds × 3-seed ensembles = 6 members: on 4 devices it is padded to 8 (2 a
device), and fold 0's ensemble spans devices 0 and 1.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """
import json, sys
from experiments.multi_fold import main
base = sys.argv[1]
args = ["--preset", "smoke", "--data", "synthetic:ar1:1200:3", "--folds", "2", "--epochs", "1",
        "--envs", "4", "--steps-per-epoch", "8", "--batch", "8", "--seeds", "3"]
out = {}
for n in (1, 4):
    assert main(args + ["--devices", str(n), "--run-dir", f"{base}/d{n}"]) == 0
    s = json.load(open(f"{base}/d{n}/summary.json"))
    t = json.load(open(f"{base}/d{n}/timings.json"))
    out[n] = {"test": [f["test_sharpe"] for f in s["folds"]],
              "val": [f["val_sharpe"] for f in s["folds"]], "devices": t["devices"]}
assert main(args + ["--devices", "5", "--run-dir", f"{base}/d5"]) == 2
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    base = tmp_path_factory.mktemp("devices")
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT),
           "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")
           + " --xla_force_host_platform_device_count=4"}  # the session's cache
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(base)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return {int(k): v for k, v in json.loads(line[len("RESULT "):]).items()}


def test_same_results_on_1_and_4_devices(layouts):
    """6 members on 4 devices need 2 pad members, and fold 0's ensemble spans two devices;
    the per-fold Sharpes must not move."""
    assert [layouts[n]["devices"] for n in (1, 4)] == [1, 4]
    np.testing.assert_allclose(layouts[4]["test"], layouts[1]["test"], atol=1e-4)
    np.testing.assert_allclose(layouts[4]["val"], layouts[1]["val"], atol=1e-4)
