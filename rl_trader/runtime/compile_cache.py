"""JAX's persistent compilation cache, on by default (`RL_TRADER_JAX_CACHE=DIR` moves it, `=off`
disables it). JAX is imported only when the cache is turned on, so a command's `--help` stays
quick."""

from __future__ import annotations

import os
from pathlib import Path


def enable_compilation_cache(path: str | None = None) -> str | None:
    """Turn on JAX's persistent compilation cache in `path` (default: RL_TRADER_JAX_CACHE, else
    ~/.cache/rl_trader/jax; `off` disables it); the directory, or None when off."""
    path = path or os.environ.get("RL_TRADER_JAX_CACHE",
                                  str(Path.home() / ".cache" / "rl_trader" / "jax"))
    if path == "off":
        return None
    import jax

    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # cache every program
    return path
