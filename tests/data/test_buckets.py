"""Shape buckets: bounded padding, every length covered, trimming."""

import numpy as np

from rl_trader.data.buckets import bucket, trim


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


def test_a_file_of_another_length_compiles_nothing_new(tmp_path):
    """Two runs in this process on files of 1,030 and 1,250 bars: one bar bucket (1,280),
    segments of ~130 and ~190 bars. The second run compiles no program and loads none from the
    persistent cache (`compile_watch.totals`, JAX's compile events): every program it needs is
    the first run's. The tiny run's options, whose programs the worker's other runs share."""
    from rl_trader.cli.train import main
    from rl_trader.runtime.compile_watch import totals
    from tests.helpers import TINY_ARGS

    args, runs = [*TINY_ARGS, "--no-report"], tmp_path / "runs"
    assert main(args + ["--data", "synthetic:ar1:1030:1", "--run-dir", str(runs / "a")]) == 0
    before = totals()
    assert main(args + ["--data", "synthetic:ar1:1250:1", "--run-dir", str(runs / "b")]) == 0
    new = totals().minus(before)
    assert (new.programs, new.cache_hits) == (0, 0), new
