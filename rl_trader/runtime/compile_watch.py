"""What a run waits for while XLA compiles: one log line before a program's first compilation,
one after it (how many programs, how long, whether the persistent cache served them), and the
compile seconds to leave out of the time-left estimate (`time_left`).

The counts come from JAX's monitoring events (`jax.monitoring`), recorded process-wide by JAX
itself: tracing and lowering (`/jax/core/compile/jaxpr_trace_duration`,
`…/jaxpr_to_mlir_module_duration`), each backend compilation or persistent-cache load
(`/jax/core/compile/backend_compile_duration`) and each persistent-cache hit
(`/jax/compilation_cache/cache_hits`). Nothing here changes what is compiled or how.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import jax

TRACE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
                "/jax/core/compile/jaxpr_to_mlir_module_duration")
BACKEND_EVENT = "/jax/core/compile/backend_compile_duration"
HIT_EVENT = "/jax/compilation_cache/cache_hits"


@dataclass
class Totals:
    """Process-wide counts since the listeners were installed."""

    programs: int = 0  # backend compilations, persistent-cache loads included
    seconds: float = 0.0  # tracing + lowering + backend compilation (or cache load)
    cache_hits: int = 0

    def minus(self, before: Totals) -> Totals:
        return Totals(self.programs - before.programs, self.seconds - before.seconds,
                      self.cache_hits - before.cache_hits)


_TOTALS = Totals()
_LOCK = threading.Lock()
_INSTALLED: list[bool] = []
_LOCAL = threading.local()  # `unwatched` sets .off in its thread


@contextlib.contextmanager
def unwatched() -> Iterator[None]:
    """Leave this thread's compilations out of the counts (work in the background, such as
    `gbm.GbmFits` on an accelerator, which no stage waits for)."""
    _LOCAL.off = True
    try:
        yield
    finally:
        _LOCAL.off = False


def _watched() -> bool:
    return not getattr(_LOCAL, "off", False)


def _on_event(event: str, **_: object) -> None:
    if event == HIT_EVENT and _watched():
        with _LOCK:
            _TOTALS.cache_hits += 1


def _on_duration(event: str, duration: float, **_: object) -> None:
    if (event == BACKEND_EVENT or event in TRACE_EVENTS) and _watched():
        with _LOCK:
            _TOTALS.seconds += duration
            _TOTALS.programs += event == BACKEND_EVENT


def totals() -> Totals:
    """A snapshot of the process-wide counts (the listeners are installed on first use)."""
    with _LOCK:
        if not _INSTALLED:
            jax.monitoring.register_event_listener(_on_event)
            jax.monitoring.register_event_duration_secs_listener(_on_duration)
            _INSTALLED.append(True)
        return Totals(_TOTALS.programs, _TOTALS.seconds, _TOTALS.cache_hits)


def cache_status(d: Totals) -> str:
    """How the persistent compilation cache served `d.programs` programs."""
    if not jax.config.jax_compilation_cache_dir:
        return "persistent cache off"
    if d.cache_hits >= d.programs:
        return "persistent cache hit"
    if d.cache_hits == 0:
        return "persistent cache miss: compiled and cached"
    return f"persistent cache hit for {d.cache_hits} of {d.programs}"


@dataclass
class CompileLog:
    """Announces each named stage's first compilations on `log` and keeps their seconds."""

    log: Callable[[str], None]
    seen: set[str] = field(default_factory=set)

    @contextlib.contextmanager
    def first(self, what: str) -> Iterator[None]:
        """Around the first call of the programs of `what` (e.g. "training program"): a line
        before ("compiling the training program …") and one after with what it took; later
        calls with the same `what` log nothing."""
        if what in self.seen:
            yield
            return
        self.seen.add(what)
        self.log(f"compiling the {what} (first use; this can take minutes on a CPU) …")
        before, t0 = totals(), time.perf_counter()
        yield
        d = totals().minus(before)
        if d.programs == 0:
            self.log(f"{what}: already compiled in this process")
        else:
            self.log(f"{what}: {d.programs} program(s) compiled in {d.seconds:.1f}s "
                     f"({cache_status(d)}); first call {time.perf_counter() - t0:.1f}s")


def time_left(epoch_seconds: list[float], epochs_left: int) -> float:
    """Seconds the remaining `epochs_left` epochs should take: the mean of the epochs measured
    so far (each without its compile seconds) times their number."""
    if not epoch_seconds:
        return float("nan")
    return sum(epoch_seconds) / len(epoch_seconds) * epochs_left


def format_seconds(s: float) -> str:
    """'42s', '3m05s', '1h02m'; '?' when unknown."""
    if s != s:
        return "?"
    s = max(0, round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
