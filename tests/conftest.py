"""Session-wide test setup: one persistent JAX compilation cache for every run the tests start.

Most of the suite's time on a CPU is XLA compiling the training programs. Tests that train
the same configuration (`helpers.TINY_ARGS`) compile the same programs, whether they call
`main` in this process or start `python -m rl_trader.cli.train` in a subprocess; with one
cache directory for the session (RL_TRADER_JAX_CACHE, read by
`runtime.compile_cache.enable_compilation_cache` and inherited by subprocesses) each program is
compiled once. The directory starts empty, as on a CI machine, unless RL_TRADER_JAX_CACHE
is already set (a warm directory of your own, or `off`). Under pytest-xdist the workers share
it (made by the controlling process before they start): a program one worker compiled, the
other loads. On 2026-12-03 the shared directory held 1,640 programs after a full run against
1,926 in two per-worker directories, and the run took 9 min 42 s of user CPU against 10 min
30 s (docs/benchmarks.md). The cache's key hashes its directory, so programs are shared only
through one directory. The tree fits' cache (RL_TRADER_TREE_CACHE) is shared the same way.

The tests compile cheaply (`TEST_XLA_FLAGS`, added to XLA_FLAGS and inherited by subprocesses;
a flag already in XLA_FLAGS is left as it is): LLVM's optimisation off, its expensive passes
off, and XLA's older CPU loop emitters instead of the fusion emitters. On a 2-core CPU a cold
tiny run compiles in about 30 CPU-seconds instead of 52 (2026-12-01). The tests check
behaviour, not speed, and every run a test compares with another is compiled the same way:
the emitters round a few elementwise functions differently (the tiny run's test Sharpes are
equal to the last digit, its diagnostics within 1e-6 relative), which no test depends on.

The session's temporary files (`tmp_path`: run directories, checkpoints, the compilation
caches) live on /dev/shm (tmpfs) when it exists with room (`MEMORY_TMP_MIN_FREE`), in a fresh
directory removed at the end; `--basetemp DIR` or RL_TRADER_TEST_TMP=disk keeps pytest's own.
orbax and the run directory fsync every file they commit (a checkpoint or a crash-safe write
must survive a power cut), thousands of times in a run of the suite; on a busy virtual disk
each fsync can take tens of milliseconds, which is why the same suite took from 4 to 9 minutes
on the same 2-core machine on 2026-12-01 (docs/benchmarks.md). On tmpfs an fsync costs
nothing, and what the tests check (atomic renames, resume after SIGKILL, damage detection)
does not depend on the disk.

`make test` runs the modules on parallel workers (`-n auto --dist loadfile`), each module whole
on one worker, in the order collected: the slowest modules (`SLOW_FIRST`) are put first, so the
run does not end waiting on one of them.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

# The modules that take longest on a 2-core CPU (seconds in a full run, measured 2026-12-02),
# slowest first.
SLOW_FIRST = ("end_to_end/test_reliability",  # ~170: seven subprocesses, two of them two processes
              "runtime/test_devices",  # ~90: 4 fake devices, its own programs
              "training/test_train",  # ~90
              "experiments/test_scaling",
              "end_to_end/test_learning", "run/test_prepare", "baselines/test_gbm",
              "run/test_inference", "cli/test_train", "data/test_buckets", "agent/test_learner",
              "run/test_checkpoint", "experiments/test_sweep", "agent/test_networks",
              "experiments/test_convergence")


TEST_XLA_FLAGS = {"xla_backend_optimization_level": "0",
                  "xla_llvm_disable_expensive_passes": "true",
                  "xla_cpu_use_fusion_emitters": "false"}


MEMORY_TMP = "/dev/shm"
MEMORY_TMP_MIN_FREE = 2 << 30  # bytes; a full run writes about 100 MB


# The session's caches (a fresh directory each, made by the controlling process and removed at
# the end), shared by the xdist workers and the tests' subprocesses through the environment.
SHARED_CACHES = ("RL_TRADER_JAX_CACHE", "RL_TRADER_TREE_CACHE")


def memory_tmp() -> str | None:
    """MEMORY_TMP when it is writable with MEMORY_TMP_MIN_FREE bytes free and
    RL_TRADER_TEST_TMP is not `disk`, else None (the system's temporary directory)."""
    try:
        st = os.statvfs(MEMORY_TMP)
    except OSError:
        return None
    roomy = st.f_bavail * st.f_frsize >= MEMORY_TMP_MIN_FREE and os.access(MEMORY_TMP, os.W_OK)
    return MEMORY_TMP if roomy and os.environ.get("RL_TRADER_TEST_TMP") != "disk" else None


def fresh_dir(config: pytest.Config, prefix: str) -> str:
    """A new directory under `memory_tmp()`, removed when the session ends."""
    path = tempfile.mkdtemp(prefix=prefix, dir=memory_tmp())
    config.add_cleanup(lambda: shutil.rmtree(path, ignore_errors=True))
    return path


@pytest.hookimpl(tryfirst=True)  # before pytest's tmp_path plugin reads --basetemp
def pytest_configure(config: pytest.Config) -> None:
    """Before any test module imports JAX: XLA's CPU backend compiling cheaply, one OpenMP
    thread a process; in the controlling process (not an xdist worker, which gets its
    directory from it), the session's temporary files on tmpfs and its shared caches."""
    flags = os.environ.get("XLA_FLAGS", "")
    on_cpu = os.environ.get("JAX_PLATFORMS", "cpu") == "cpu"  # `make test`; not a GPU session
    if on_cpu:
        extra = [f"--{k}={v}" for k, v in TEST_XLA_FLAGS.items() if k not in flags]
        os.environ["XLA_FLAGS"] = " ".join([flags, *extra]).strip()
    # One OpenMP thread a process (scikit-learn's trees, in every run's gbm baseline): the
    # workers already fill the cores, where idle OpenMP threads spin on busy ones.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if hasattr(config, "workerinput"):  # an xdist worker: the rest is the controller's
        return
    if config.option.basetemp is None and memory_tmp() is not None:
        config.option.basetemp = fresh_dir(config, "rl_trader-tests-")
    for var in SHARED_CACHES:  # inherited by the workers and the tests' subprocesses
        if not os.environ.get(var):
            os.environ[var] = fresh_dir(config, "rl_trader-cache-")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slowest modules first (`SLOW_FIRST`), the rest in their usual order."""
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    tests = Path(__file__).parent
    items.sort(key=lambda item: rank.get(item.path.relative_to(tests).with_suffix("").as_posix(),
                                         len(rank)))
