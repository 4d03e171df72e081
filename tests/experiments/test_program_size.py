"""The program-size measurement (experiments.program_size): instruction counts of HLO text, and
one measurement of the tiny run's programs."""

import json
import os

import jax
import jax.numpy as jnp

from experiments.program_size import instructions, main, pass_seconds
from tests.helpers import TINY_ARGS

HLO = """HloModule m

%body (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %add.1 = f32[4]{0} add(f32[4]{0} %p, f32[4]{0} %p)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %c = f32[4]{0} call(f32[4]{0} %x), to_apply=%body
  ROOT %t = (f32[4]{0}) tuple(f32[4]{0} %c)
}
"""


def test_instructions_are_counted_in_every_computation_by_opcode():
    assert instructions(HLO) == {"parameter": 2, "add": 1, "call": 1, "tuple": 1}


def test_instructions_with_long_tuple_shapes_are_counted():
    """XLA writes `/*index=5*/` inside a tuple shape of more than five elements (a loop's
    carry): such an instruction counts too."""
    def f(xs):
        return jax.lax.fori_loop(0, 3, lambda i, c: tuple(x + i for x in c), xs)

    text = jax.jit(f).lower(tuple(jnp.ones(2) for _ in range(7))).as_text(dialect="hlo")
    assert "/*index=5*/" in text
    counted = instructions(text)
    assert counted["while"] == 1 and sum(counted.values()) == sum(
        1 for line in text.splitlines() if " = " in line and "(" in line.split(" = ", 1)[1])


def test_instructions_of_a_lowered_program_grow_with_its_work():
    def f(x, n):
        for _ in range(n):
            x = jnp.sin(x) * 2.0
        return x

    small, large = (instructions(jax.jit(f, static_argnums=1).lower(jnp.ones(3), n).as_text(
        dialect="hlo")) for n in (1, 4))
    assert large["sine"] == 4 * small["sine"] == 4


def test_the_tiny_runs_programs_are_measured(tmp_path):
    args = [*TINY_ARGS, "--data", "synthetic:ar1:1200:1"]
    out = tmp_path / "size.json"
    # the session's compilation cache: the tiny run's programs, compiled once for the suite
    cache = ["--jax-cache", os.environ.get("RL_TRADER_JAX_CACHE", "off")]
    assert main(["--out", str(out), "--call", "--parts", "--serialized", *cache, "--",
                 *args]) == 0
    first = json.loads(out.read_text())
    for name in ("init", "epoch"):
        p = first[name]
        assert p["hlo_instructions"] > 100 and p["hlo_instructions_optimised"] > 100
        assert p["compile_seconds"] >= 0 and p["lower_seconds"] >= 0
        assert sum(p["opcodes_optimised"].values()) <= p["hlo_instructions_optimised"]
    assert first["members"] == 2 and len(first["epoch"]["call_seconds"]) == 2
    assert len(first["epoch"]["params_sha256"]) == 64
    assert first["epoch"]["serialized_bytes"] > 1000
    assert first["epoch"]["deserialize_seconds"] >= 0
    # the epoch's two halves alone: each a part of the epoch's program
    for name in ("act_step", "learn_step"):
        assert 100 < first[name]["hlo_instructions"] < first["epoch"]["hlo_instructions"]


RUN, PASS = "Running HLO pass pipeline on module", "HLO pass:"
PASS_LOG = "\n".join(f"I1207 23:41:{t} {thread} hlo_pass_pipeline.cc:1] {text}"
                     for t, thread, text in (
    ("19.000000", 653, f"{RUN} jit_run_epoch: optimization"),
    ("19.100000", 653, f"{PASS} algsimp time: 90 ms (90000 us) (cumulative: 90 ms)"),
    ("19.100100", 700, f"{RUN} jit_init: simplification"),
    ("19.200000", 653, f"{PASS} after layout assignment time: 12 us (12 us) (cumulative: 1 s)"),
    ("19.300000", 700, f"{PASS} dce time: 190 ms (190000 us) (cumulative: 1 s)"),
    ("19.500000", 653, f"{PASS} algsimp time: 250 ms (250000 us) (cumulative: 1 s)"),
    ("19.500001", 653, "    Invariant checker hlo-verifier"),
    ("20.000000", 653, f"{RUN} jit_init: optimization"),  # thread 653 compiles jit_init
    ("20.100000", 653, f"{PASS} dce time: 100 ms (100000 us) (cumulative: 1 s)"),
    ("21.000000", 653, f"{RUN} jit_run_epoch: optimization"),  # and the epoch again
    ("21.200000", 653, f"{PASS} algsimp time: 200 ms (200000 us) (cumulative: 1 s)")))


def test_pass_seconds_follow_each_thread_s_module():
    """Each pass's seconds (its `(N us)`, names with spaces too) go to the module its thread's
    last pipeline named, summed over runs; a module's seconds are those of its stretches of
    lines, one a compilation (not the time between two compilations of it)."""
    got = pass_seconds(PASS_LOG)
    assert list(got) == ["jit_run_epoch", "jit_init"]  # the longest first
    assert got["jit_run_epoch"] == {"seconds": 0.5 + 0.2, "passes": [["algsimp", 0.54], [
        "after layout assignment", 0.0]]}
    assert got["jit_init"] == {"seconds": 0.3, "passes": [["dce", 0.29]]}
