"""Where a run's wall-clock time goes: seconds per named stage, summed over its occurrences,
and per lap (one lap per epoch)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Stopwatch:
    """Seconds per stage name (`timings.json` `stage_seconds`); a stage timed twice adds up.
    Device work is asynchronous: a stage that launches a program should wait for it
    (`block_until_ready`) before it ends, or the next stage that waits is charged for it."""

    seconds: dict[str, float] = field(default_factory=dict)
    lap_seconds: dict[str, float] = field(default_factory=dict)  # since the last `lap()`

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            dt = time.perf_counter() - t0
            self.seconds[name] = self.seconds.get(name, 0.0) + dt
            self.lap_seconds[name] = self.lap_seconds.get(name, 0.0) + dt

    def lap(self) -> dict[str, float]:
        """The seconds per stage since the previous lap (to the millisecond); a new lap begins."""
        out = {k: round(v, 3) for k, v in self.lap_seconds.items()}
        self.lap_seconds = {}
        return out

    def rounded(self) -> dict[str, float]:
        """The seconds, to the millisecond (JSON)."""
        return {k: round(v, 3) for k, v in self.seconds.items()}
