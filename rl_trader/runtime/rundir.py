"""The run directory: creating it safely, atomic JSON, the lock, fault injection for tests."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
from pathlib import Path

from rl_trader.errors import InputError


def check_run_dir(run_dir: Path, overwrite: bool) -> bool:
    """Whether `run_dir` holds something (a non-empty directory or a file), which only
    `overwrite` allows replacing; refuses it otherwise."""
    taken = run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir()))
    if taken and not overwrite:
        raise InputError(f"run directory '{run_dir}' already exists and is not empty: "
                         "pass --overwrite to replace it or choose another --run-dir")
    return taken


def open_run_dir(run_dir: Path, overwrite: bool) -> None:
    """Create the run directory; never reuse a non-empty one silently."""
    if check_run_dir(run_dir, overwrite):
        if run_dir.is_dir():
            shutil.rmtree(run_dir)
        else:
            run_dir.unlink()
    run_dir.mkdir(parents=True, exist_ok=True)


def write_json(path: Path, obj: dict) -> None:
    """Write JSON atomically (temp file + rename): a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, path)


class RunLock:
    """An exclusive lock file in the run directory: two runs never write into one directory."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / ".lock"

    def __enter__(self) -> RunLock:
        self._fh = open(self.path, "a+")  # noqa: SIM115 (held for the run's lifetime)
        try:
            fcntl.flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._fh.seek(0)
            owner = self._fh.read().strip() or "another process"
            self._fh.close()
            raise InputError(f"run directory '{self.path.parent}' is in use by {owner}") from None
        self._fh.seek(0)
        self._fh.truncate()
        self._fh.write(f"pid {os.getpid()}")
        self._fh.flush()
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()


def fault_point(name: str) -> None:
    """Fault injection for the kill-and-resume tests: SIGKILL this process at point `name`
    when RL_TRADER_KILL_AT equals it (e.g. 'epoch:1', 'saving:1', 'saved:0', 'scoring'). In a
    multi-process run every process first waits for the others to reach it, so that none is
    aborted by the distributed runtime (its peer gone) before its own kill."""
    if os.environ.get("RL_TRADER_KILL_AT") == name:
        from rl_trader.runtime.devices import barrier

        barrier(f"kill at {name}")
        os.kill(os.getpid(), signal.SIGKILL)
