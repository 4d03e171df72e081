"""The report's figures, drawn in this process or side by side in worker processes.

Drawing is host work: matplotlib's `savefig` is most of a report's time (docs/history/benchmarks.md
measures it). On an accelerator the host's
cores wait while the run trains, so the run starts `start_workers` ahead: spawned processes
that import matplotlib during training and then draw the report's figures at once, one each.
The report's code asks `Figures` for each figure; with workers it gets a placeholder that
`Figures.fill` replaces by the PNG once all are drawn, so the HTML is the same either way.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import types
import uuid
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor

FIGURES = 10  # the most figures one report draws (equity ×3, tear sheet ×4, VSN ×2, curves)


def _import_plots() -> None:
    """A worker's initializer: import matplotlib and the plots before any figure is asked."""
    import rl_trader.report.plots  # noqa: F401


def _ready() -> None:
    """A no-op task; `start_workers` submits one per worker so that every worker starts."""


def start_workers(workers: int | None = None) -> ProcessPoolExecutor | None:
    """A pool of `workers` spawned processes (default: one a figure, leaving two cores), each
    started now and importing the plots; None where fewer than two workers fit. Spawned, not
    forked: the run's process holds JAX's threads. The caller shuts it down."""
    n = min(FIGURES, (os.cpu_count() or 1) - 2) if workers is None else workers
    if n < 2:
        return None
    pool = ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_import_plots)
    # A spawned worker first runs the caller's main script again unless that is guarded by
    # `if __name__ == "__main__"` (or fails, from stdin): they are started with an empty
    # __main__, so they import the plots alone. All start here, so none is started later.
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        for _ in range(n):  # each submit finds no idle worker and starts one
            pool.submit(_ready)
    finally:
        sys.modules["__main__"] = main
    return pool


class Figures:
    """Draws the report's figures: `figures(plot, *args)` is `plot(*args)` (a figure's base64
    PNG), here or, with a `pool`, in a worker, returning a placeholder that `fill` replaces."""

    def __init__(self, pool: Executor | None = None) -> None:
        self.pool = pool
        self.pending: dict[str, Future[str]] = {}
        self.tag = uuid.uuid4().hex  # no report text can hold a placeholder by chance

    def __call__(self, plot: Callable[..., str], *args: object) -> str:
        if self.pool is None:
            return plot(*args)
        token = f"figure-{self.tag}-{len(self.pending)}"
        self.pending[token] = self.pool.submit(plot, *args)
        return token

    def fill(self, text: str) -> str:
        """`text` with every placeholder replaced by its figure (waiting for each)."""
        for token, png in self.pending.items():
            text = text.replace(token, png.result())
        self.pending = {}
        return text
