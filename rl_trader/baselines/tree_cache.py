"""The trees' fits cached on disk, keyed by everything a fit reads.

Fitting the gbm baseline and its cross-fitted forecast is most of a run's preparation on a
CPU (docs/history/benchmarks.md). A fit
is deterministic, so a run that fits the same trees again (the same data, fold and options:
a re-run, a resumed run, another seed, a sweep, `predict` and `backtest` excepted, which
load the run's own trees) reads them from here instead.

The key is a SHA-256 of the fit's inputs themselves — the feature matrix, the target, the
rows fit on, the settings and the scikit-learn version — not of a list of configuration
fields, so no option can be left out of it: two fits share an entry only if they would
compute the same thing. Entries are pickles (`RL_TRADER_TREE_CACHE=DIR` moves the directory,
default `~/.cache/rl_trader/trees`; `=off` fits every time); like the run's own
`gbm_trees.pkl`, a pickle runs code when loaded, so the directory must be one only you can
write. An entry that cannot be read is fitted again and replaced.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

CACHE_ENV = "RL_TRADER_TREE_CACHE"
T = TypeVar("T")


def cache_dir() -> Path | None:
    """The cache directory, or None when `RL_TRADER_TREE_CACHE=off`."""
    path = os.environ.get(CACHE_ENV, str(Path.home() / ".cache" / "rl_trader" / "trees"))
    return None if path == "off" else Path(path)


def sklearn_version() -> str:
    """The installed scikit-learn's version, read from its metadata (importing scikit-learn
    takes about 1.3 s, which a run whose fits are all cached need not pay)."""
    return importlib.metadata.version("scikit-learn")


def fit_key(kind: str, arrays: tuple[np.ndarray, ...], settings: dict) -> str:
    """SHA-256 (hex) of a fit's kind, its input arrays (dtype, shape and bytes of each), its
    settings (sorted by name) and the scikit-learn version."""
    h = hashlib.sha256(f"{kind}|sklearn {sklearn_version()}".encode())
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"|{a.dtype.str}{a.shape}|".encode())
        h.update(a.tobytes())
    h.update(repr(sorted(settings.items())).encode())
    return h.hexdigest()


MISSING = object()  # what `load` returns for a key not in the cache


def has(key: str) -> bool:
    """Whether an entry is stored under `key` (not whether it can be read: `load` says)."""
    directory = cache_dir()
    return directory is not None and (directory / f"{key}.pkl").exists()


def load(key: str) -> object:
    """The value stored under `key`, or MISSING (absent, unreadable or the cache off)."""
    directory = cache_dir()
    if directory is None:
        return MISSING
    try:
        with open(directory / f"{key}.pkl", "rb") as fh:
            return pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError,
            IndexError, TypeError, ValueError):
        return MISSING  # absent or unreadable: fit again


def store(key: str, value: object) -> None:
    """Store `value` under `key` (written to a temporary file, then renamed, so a reader never
    sees half an entry). A directory that cannot be written costs the cache, never the run."""
    directory = cache_dir()
    if directory is None:
        return
    tmp = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, suffix=".tmp", delete=False) as fh:
            tmp = Path(fh.name)
            pickle.dump(value, fh)
        os.replace(tmp, directory / f"{key}.pkl")
    except OSError:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def cached(key: str, compute: Callable[[], T]) -> T:
    """The value stored under `key`, else `compute()`, stored there and returned."""
    value = load(key)
    if value is MISSING:
        value = compute()
        store(key, value)
    return value
