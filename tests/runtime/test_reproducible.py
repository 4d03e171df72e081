"""Reproducible GPU kernels by default, overridable by the user."""

import os
import subprocess
import sys

from rl_trader.runtime.reproducible import FLAG, reproducible_xla_flags


def test_flag_added_to_empty_and_existing_flags():
    assert reproducible_xla_flags({}) == FLAG
    assert reproducible_xla_flags({"XLA_FLAGS": "--xla_dump_to=/tmp/x"}) == (
        f"--xla_dump_to=/tmp/x {FLAG}")


def test_user_choice_and_opt_out_are_kept():
    for flags in ("--xla_gpu_deterministic_ops=false", "--xla_gpu_autotune_level=0"):
        assert reproducible_xla_flags({"XLA_FLAGS": flags}) is None
    assert reproducible_xla_flags({"RL_TRADER_DETERMINISTIC": "0"}) is None


def test_importing_the_package_sets_the_flag_before_jax_starts():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    code = ("import os, rl_trader, jax; jax.numpy.ones(2).block_until_ready(); "
            "print(os.environ['XLA_FLAGS'])")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == FLAG
