"""The trees' fits as jobs: pure functions of host arrays, made here or in worker processes.

A run's trees are a few dozen small, independent fits (per fold: one regressor a leaf count
for the gbm baseline, one a cross-fit block for the tree forecast and for the trust in it,
`baselines.gbm`). scikit-learn's fits hold the interpreter lock between their compiled
loops, so threads cannot run them side by side, and its OpenMP threads barely help fits this
small (`tree_threads`). `FitPool` runs them in spawned processes instead, one OpenMP thread
each: a job is a function of this module and numpy arrays, so a worker imports numpy and
scikit-learn alone, never JAX. Each job's result is the same bits wherever it is made
(`tree_threads`), and is read from and written to the tree cache by the run's own process
(`tree_cache`), under the key of its inputs.
"""

from __future__ import annotations

import contextlib
import os
import pickle
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rl_trader.baselines import tree_cache
from rl_trader.runtime.workers import host_cores, spawn_pool

if TYPE_CHECKING:
    from sklearn.ensemble import HistGradientBoostingRegressor

LEARNING_RATE = 0.05
MIN_SAMPLES_LEAF = 40  # rows per leaf at least: a few thousand noisy rows per fold
TREE_THREADS = 2  # scikit-learn's OpenMP threads while trees are fit or predict (`tree_threads`)


@contextlib.contextmanager
def tree_threads() -> Iterator[None]:
    """scikit-learn's OpenMP threads in this thread limited to `TREE_THREADS`, or fewer where
    fewer are set already (`OMP_NUM_THREADS`: processes run side by side, as `FitPool`'s
    workers do, one thread each), while trees are fit or predict. A fold's fits are small
    (thousands of rows, a few dozen variables): on a 16-core host the default run's trees took
    20.5 s with 16 threads and 14.6–14.8 s with 1, 2 or 4, bit for bit the same trees (one
    H200's host, 2026-12-07); on a 2-core CPU 2 threads fit them in 6.6 s, 1 in 7.6 s."""
    from sklearn.ensemble import HistGradientBoostingRegressor  # noqa: F401 (loads its OpenMP)
    from threadpoolctl import threadpool_info, threadpool_limits

    now = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "openmp"]
    with threadpool_limits(limits=min([TREE_THREADS, *now]), user_api="openmp"):
        yield


def regressor(leaves: int, iterations: int) -> HistGradientBoostingRegressor:
    """An unfitted regressor of the gbm baseline's settings."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(
        max_iter=iterations, max_leaf_nodes=leaves, learning_rate=LEARNING_RATE,
        min_samples_leaf=MIN_SAMPLES_LEAF, early_stopping=False, random_state=0)


def staged_fit(x: np.ndarray, y: np.ndarray, rows: np.ndarray, leaves: int,
               counts: tuple[int, ...]) -> tuple[np.ndarray, bytes]:
    """A regressor of `leaves` leaves fit on `rows` of (x [T, F], y [T]) to `counts[-1]`
    iterations, and its staged forecasts at `counts`: (ŷ [len(counts), T] float32, the
    regressor pickled)."""
    keep = set(counts)
    with tree_threads():
        model = regressor(leaves, counts[-1]).fit(x[rows], y[rows])
        y_hat = [p for i, p in enumerate(model.staged_predict(x), 1) if i in keep]
    return np.stack(y_hat).astype(np.float32), pickle.dumps(model)


def block_fit(x: np.ndarray, y: np.ndarray, use: np.ndarray, leaves: int, iterations: int,
              lo: int, hi: int) -> np.ndarray:
    """ŷ on bars [lo, hi) (float64) of a regressor fit on the rows `use` of (x [T, F], y [T])."""
    with tree_threads():
        return regressor(leaves, iterations).fit(x[use], y[use]).predict(x[lo:hi])


@dataclass(frozen=True)
class FitJob:
    """One fit: `fn(*args)`, `fn` a function of this module (a worker imports it by name),
    and the tree cache's key of its inputs (`tree_cache.fit_key`)."""

    key: str
    fn: Callable[..., Any]
    args: tuple

    def run(self) -> Any:
        """The fit, made in this process."""
        return self.fn(*self.args)


def fit_workers(spare_cores: int = 0) -> int:
    """The worker processes a run's fits may use: the host's cores less `spare_cores`, and at
    most `OMP_NUM_THREADS` where that is set, the share of the cores a process is given
    among several side by side (`experiments/gate_study.sh`, the test suite: 1, no workers)."""
    n = host_cores() - spare_cores
    share = os.environ.get("OMP_NUM_THREADS", "")
    return min(n, int(share)) if share.isdigit() else n


def _one_thread() -> None:
    """A worker's initializer: one OpenMP thread (set before scikit-learn loads OpenMP)."""
    os.environ["OMP_NUM_THREADS"] = "1"


class FitPool:
    """Makes `FitJob`s: `submit` starts those the tree cache lacks in up to `workers` spawned
    processes (started at the first submit that has two or more to fit: one fit alone is as
    quick here); `result` returns a job's value, read from the cache, waited for from a
    worker (then cached) or, where it was not submitted, made here (then cached); a value
    made once is kept for a second ask (two jobs of one key: the trust's blocks and the tree
    forecast's share trees where their leaves and iterations agree). Where the workers cannot
    start or die (`OSError`, `BrokenProcessPool`), the pool is given up and every fit not yet
    made is made here. With `workers` < 2 every fit is made here, when its result is asked
    for. Close it (`with`) to stop the workers."""

    def __init__(self, workers: int = 0) -> None:
        self._workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self._futures: dict[str, Future] = {}
        self._made: dict[str, Any] = {}

    def __enter__(self) -> FitPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (the fits still running are waited for, those queued dropped)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _give_up(self) -> None:
        """No workers from now on: the pool is broken or could not start."""
        self._workers = 0
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def submit(self, jobs: Iterable[FitJob]) -> None:
        """Start `jobs` in the workers, those not cached, made or started already."""
        if self._workers < 2:
            return
        todo = {job.key: job for job in jobs if job.key not in self._futures
                and job.key not in self._made and not tree_cache.has(job.key)}
        try:
            if self._pool is None and len(todo) >= 2:
                self._pool = spawn_pool(min(self._workers, len(todo)), _one_thread)
            if self._pool is not None:
                for key, job in todo.items():
                    self._futures[key] = self._pool.submit(job.fn, *job.args)
        except (BrokenProcessPool, OSError):
            self._give_up()  # the jobs not started are made here when asked for

    def result(self, job: FitJob) -> Any:
        """`job`'s value (see the class)."""
        if job.key in self._made:
            return self._made[job.key]
        future = self._futures.pop(job.key, None)
        if future is None:
            value = tree_cache.cached(job.key, job.run)
        else:
            try:
                value = future.result()
            except BrokenProcessPool:
                self._give_up()
                value = job.run()
            tree_cache.store(job.key, value)
        self._made[job.key] = value
        return value
