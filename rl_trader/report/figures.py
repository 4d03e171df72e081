"""The report's figures, drawn in this process or side by side in worker processes.

Drawing is host work: matplotlib's `savefig` is most of a report's time (docs/history/benchmarks.md
measures it). On an accelerator the host's
cores wait while the run trains, so the run starts `start_workers` ahead: spawned processes
that import matplotlib during training and then draw the report's figures at once, one each.
The report's code asks `Figures` for each figure; with workers it gets a placeholder that
`Figures.fill` replaces by the PNG once all are drawn, so the HTML is the same either way.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor

from rl_trader.runtime.workers import host_cores, spawn_pool

FIGURES = 10  # the most figures one report draws (equity ×3, tear sheet ×4, VSN ×2, curves)


def _import_plots() -> None:
    """A worker's initializer: import matplotlib and the plots before any figure is asked."""
    import rl_trader.report.plots  # noqa: F401


def start_workers(workers: int | None = None) -> ProcessPoolExecutor | None:
    """A pool of `workers` spawned processes (default: one a figure, leaving two cores), each
    started now and importing the plots (`runtime.workers.spawn_pool`); None where fewer than
    two workers fit. The caller shuts it down."""
    n = min(FIGURES, host_cores() - 2) if workers is None else workers
    return spawn_pool(n, _import_plots) if n >= 2 else None


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
