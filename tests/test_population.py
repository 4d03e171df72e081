"""The population's program wrappers (rl_trader/population.py)."""

import jax
import pytest

from rl_trader.population import THREEFRY_KERNELS, threefry_kernels, with_jax_settings


def _cuda_text() -> str:
    """A random draw's program lowered for CUDA (possible on any machine)."""
    draw = jax.jit(lambda k: jax.random.normal(k, (8,)))
    return draw.trace(jax.random.PRNGKey(0)).lower(lowering_platforms=("cuda",)).as_text()


def test_threefry_kernels_lower_the_hash_to_the_gpu_kernel_only_inside():
    inside = threefry_kernels(_cuda_text)()
    assert "threefry2x32_ffi" in inside  # one custom call: the GPU kernel
    assert "threefry2x32_ffi" not in _cuda_text()  # outside: the inlined hash, as before


def test_with_jax_settings_on_while_called_and_restored():
    seen = []
    names = (THREEFRY_KERNELS, "jax_enable_checks")
    before = {n: getattr(jax.config, n) for n in names}

    def program(x):
        seen.append({n: getattr(jax.config, n) for n in names})
        return x + 1

    assert with_jax_settings(program, {n: not before[n] for n in names})(1) == 2
    assert seen == [{n: not before[n] for n in names}]
    assert {n: getattr(jax.config, n) for n in names} == before


def test_with_jax_settings_restored_after_an_error():
    def program(x):
        raise ValueError("boom")

    before = getattr(jax.config, THREEFRY_KERNELS)
    with pytest.raises(ValueError, match="boom"):
        threefry_kernels(program)(1)
    assert getattr(jax.config, THREEFRY_KERNELS) == before
