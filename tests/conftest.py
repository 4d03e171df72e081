"""Session-wide test setup: one persistent JAX compilation cache for every run the tests start.

Most of the suite's time on a CPU is XLA compiling the training programs. Tests that train
the same configuration (`helpers.TINY_ARGS`) compile the same programs, whether they call
`main` in this process or start `python -m experiments.multi_fold` in a subprocess; with one
cache directory for the session (RL_TRADER_JAX_CACHE, read by
`experiments.multi_fold.enable_compilation_cache` and inherited by subprocesses) each program
is compiled once. The directory starts empty, as on a CI machine, unless RL_TRADER_JAX_CACHE
is already set (a warm directory of your own, or `off`).
"""

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def jax_cache(tmp_path_factory) -> str:
    """The session's compilation cache directory (or `off`), set in os.environ."""
    path = os.environ.get("RL_TRADER_JAX_CACHE") or str(tmp_path_factory.mktemp("jax_cache"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RL_TRADER_JAX_CACHE", path)
        yield path
