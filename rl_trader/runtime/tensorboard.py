"""TensorBoard scalars without TensorFlow: event files through the `tensorboard` package."""

from __future__ import annotations

import time
from pathlib import Path

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter


class ScalarWriter:
    """Writes scalar summaries to `logdir` (one event file per writer)."""

    def __init__(self, logdir: str | Path) -> None:
        Path(logdir).mkdir(parents=True, exist_ok=True)
        self._writer = EventFileWriter(str(logdir))

    def scalars(self, step: int, values: dict[str, float]) -> None:
        """One event at `step` holding every `tag: value` in `values`."""
        summary = summary_pb2.Summary(value=[
            summary_pb2.Summary.Value(tag=tag, simple_value=float(v)) for tag, v in values.items()])
        self._writer.add_event(event_pb2.Event(wall_time=time.time(), step=int(step),
                                               summary=summary))

    def close(self) -> None:
        self._writer.flush()
        self._writer.close()
