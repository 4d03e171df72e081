"""The population's program wrappers (rl_trader/population.py)."""

import jax
import pytest

from rl_trader.population import THREEFRY_KERNELS, threefry_kernels


def test_threefry_kernels_on_only_while_the_wrapped_program_runs():
    seen = []

    def program(x):
        seen.append(getattr(jax.config, THREEFRY_KERNELS))
        return x + 1

    before = getattr(jax.config, THREEFRY_KERNELS)
    assert threefry_kernels(program)(1) == 2
    assert seen == [True]
    assert getattr(jax.config, THREEFRY_KERNELS) == before


def test_threefry_kernels_restored_after_an_error():
    def program(x):
        raise ValueError("boom")

    before = getattr(jax.config, THREEFRY_KERNELS)
    with pytest.raises(ValueError, match="boom"):
        threefry_kernels(program)(1)
    assert getattr(jax.config, THREEFRY_KERNELS) == before


def test_threefry_kernels_keep_the_random_bits():
    """On a GPU the hash runs as one kernel; on any backend the bits must not change."""
    key = jax.random.PRNGKey(3)
    draw = jax.jit(lambda k: jax.random.normal(k, (64,)))
    assert (threefry_kernels(draw)(key) == jax.jit(
        lambda k: jax.random.normal(k, (64,)))(key)).all()
