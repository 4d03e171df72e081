"""Shape buckets: bounded padding, every length covered, trimming."""

import numpy as np

from rl_trader.buckets import bucket, trim


def test_buckets_pad_less_than_a_quarter_and_are_few():
    sizes = np.arange(1, 100_001)
    b = np.array([bucket(int(n)) for n in sizes])
    assert np.all(b >= sizes) and np.all(b < 1.25 * sizes + 1)
    assert np.all(np.diff(b) >= 0)  # monotone: a longer file never gets a smaller bucket
    assert len(np.unique(b)) < 80  # 100,000 lengths share few programs
    assert [bucket(n) for n in (5, 8, 9, 5000, 5120, 5121, 7983)] == [5, 8, 10, 5120, 5120,
                                                                      6144, 8192]


def test_trim_cuts_one_axis_of_every_leaf():
    tree = {"a": np.arange(12).reshape(2, 6), "b": np.zeros((2, 6, 3))}
    out = trim(tree, 4, axis=1)
    assert out["a"].shape == (2, 4) and out["b"].shape == (2, 4, 3)
    np.testing.assert_array_equal(out["a"], tree["a"][:, :4])


SCRIPT = """
import json, os, sys
from pathlib import Path
from experiments.multi_fold import main
cache, out, args = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
counts = []
for n in (1030, 1250):  # one bar bucket (1,280), segments of ~130 and ~190 bars
    assert main(args + ["--data", f"synthetic:ar1:{n}:1", "--no-report",
                        "--run-dir", str(out / str(n))]) == 0
    counts.append(sorted(p.name for p in cache.rglob("*") if p.is_file()))
print(json.dumps(counts))
"""


def test_a_file_of_another_length_compiles_nothing_new(tmp_path, jax_cache):
    """The second run, on a file of another length in the same buckets, finds every program
    it needs in the persistent compilation cache: it adds no entry. The tiny run's options and
    the session's cache (tests/conftest.py): what the first run compiles, later tests reuse."""
    import json
    import os
    import subprocess
    import sys

    from helpers import TINY_ARGS

    cache = str(tmp_path / "cache") if jax_cache == "off" else jax_cache
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "RL_TRADER_JAX_CACHE": cache}
    out = subprocess.run([sys.executable, "-c", SCRIPT, cache, str(tmp_path / "runs"),
                          json.dumps(TINY_ARGS)], env=env, capture_output=True, text=True,
                         check=True)
    first, second = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(first) > 10  # the cache is on and holds the run's programs
    assert second == first, sorted(set(second) - set(first))
