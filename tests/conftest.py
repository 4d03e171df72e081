"""Session-wide test setup: one persistent JAX compilation cache for every run the tests start.

Most of the suite's time on a CPU is XLA compiling the training programs. Tests that train
the same configuration (`helpers.TINY_ARGS`) compile the same programs, whether they call
`main` in this process or start `python -m experiments.multi_fold` in a subprocess; with one
cache directory for the session (RL_TRADER_JAX_CACHE, read by
`experiments.multi_fold.enable_compilation_cache` and inherited by subprocesses) each program
is compiled once. The directory starts empty, as on a CI machine, unless RL_TRADER_JAX_CACHE
is already set (a warm directory of your own, or `off`). Under pytest-xdist each worker has its
own directory (its own temporary tree): a test that counts cache entries sees its own runs only.

The tests compile with LLVM's optimisation off (`--xla_backend_optimization_level=0` in
XLA_FLAGS, inherited by subprocesses; kept out if XLA_FLAGS already sets a level): XLA's CPU
compilation takes about a third less time, the programs compute the same numbers (XLA's CPU
backend uses no fast-math, so LLVM may not reorder floating-point operations), and the
tests check behaviour, not speed.

`make test` runs the modules on parallel workers (`-n auto --dist loadfile`), each module whole
on one worker, in the order collected: the slowest modules (`SLOW_FIRST`) are put first, so the
run does not end waiting on one of them.
"""

import os

import pytest

# The modules that take longest on a 2-core CPU (seconds, measured 2026-11-30), slowest first.
SLOW_FIRST = ("test_multihost",  # ~100: two processes killed and resumed, no compile cache
              "test_reliability",  # ~95: nine subprocess runs
              "test_train",  # ~80
              "test_devices",  # ~55: 4 fake devices, its own programs
              "test_bad_input",  # ~50
              "test_multi_fold",  # ~45
              "test_learning", "test_sweep", "test_convergence", "test_buckets",
              "test_evaluate")


def pytest_configure(config: pytest.Config) -> None:
    """Before any test module imports JAX: XLA's CPU backend without LLVM optimisation."""
    flags = os.environ.get("XLA_FLAGS", "")
    on_cpu = os.environ.get("JAX_PLATFORMS", "cpu") == "cpu"  # `make test`; not a GPU session
    if on_cpu and "xla_backend_optimization_level" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_backend_optimization_level=0".strip()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slowest modules first (`SLOW_FIRST`), the rest in their usual order."""
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))


@pytest.fixture(scope="session", autouse=True)
def jax_cache(tmp_path_factory) -> str:
    """The session's compilation cache directory (or `off`), set in os.environ."""
    path = os.environ.get("RL_TRADER_JAX_CACHE") or str(tmp_path_factory.mktemp("jax_cache"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RL_TRADER_JAX_CACHE", path)
        yield path
