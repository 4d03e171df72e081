"""Spawned worker processes for host work beside the run (the tree fits, the report's figures).

Spawned, not forked: the run's process holds JAX's threads. A spawned worker first runs the
caller's main script again unless that is guarded by `if __name__ == "__main__"` (or fails,
from stdin), so the workers are all started here with an empty `__main__`: they import only
what their initializer and their tasks name.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import types
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor


def host_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _ready() -> None:
    """A no-op task; `spawn_pool` submits one per worker so that every worker starts."""


def spawn_pool(workers: int, initializer: Callable[[], None] | None = None
               ) -> ProcessPoolExecutor:
    """A pool of `workers` spawned processes, every one started now (each having run
    `initializer`). The caller shuts it down."""
    pool = ProcessPoolExecutor(max_workers=workers,
                               mp_context=multiprocessing.get_context("spawn"),
                               initializer=initializer)
    # process-wide for these few lines: a thread reading __main__ meanwhile (none of the run's
    # does; `run.ahead`'s compiles do not) would see the empty one
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        for _ in range(workers):  # each submit finds no idle worker and starts one
            pool.submit(_ready)
    finally:
        sys.modules["__main__"] = main
    return pool
