"""XLA compile options per program: compile seconds, run seconds, and whether the outputs are
bitwise equal to the default build's. A measurement, not a test.

    python -m experiments.compile_options [--out compile_options.json] [--sets A,B]
                                          [--preset default] [--steps-per-epoch N]
                                          [--programs init,epoch] [--save-outputs DIR]

Builds a preset's population on the embedded data (the default preset's: `make train
FOLDS=3`'s 12 members) and compiles its init and epoch programs once per option set, without
the persistent cache.
With `--save-outputs`, two source trees' builds can be compared bit for bit afterwards.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np
from jax.experimental.compilation_cache import compilation_cache

from rl_trader.config import PRESETS, RunConfig, preset
from rl_trader.run.prepare import build_cohort, prepare
from rl_trader.runtime.rundir import write_json
from rl_trader.training import population


class OptionSet(NamedTuple):
    """XLA compile options of the programs, and JAX settings in force while they are traced
    and compiled."""

    xla: dict | None = None
    jax_settings: dict[str, object] = {}


OPTION_SETS: dict[str, OptionSet] = {
    "default": OptionSet(),
    "O0": OptionSet({"xla_backend_optimization_level": 0}),
    "O0_cheap_llvm": OptionSet({"xla_backend_optimization_level": 0,
                                "xla_llvm_disable_expensive_passes": True}),
    "cheap_llvm": OptionSet({"xla_llvm_disable_expensive_passes": True}),
    "gpu_parallel": OptionSet({"xla_gpu_force_compilation_parallelism": 16}),
    "threefry_kernel": OptionSet(jax_settings={population.THREEFRY_KERNELS: True}),
}


def _leaves(tree: object) -> list[np.ndarray]:
    """A pytree's leaves as host arrays."""
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _measure(fn: Callable, args: tuple, fresh: Callable[[tuple], tuple]
             ) -> tuple[dict, list[np.ndarray]]:
    """Compile the jitted `fn` for `args` (seconds), then run it twice on `fresh(args)` (the
    inputs again, for a program that donates them): seconds of each run, and the outputs."""
    t = time.perf_counter()
    compiled = fn.lower(*args).compile()
    compile_s = time.perf_counter() - t
    runs = []
    for _ in range(2):
        call = fresh(args)
        t = time.perf_counter()
        out = jax.block_until_ready(compiled(*call))
        runs.append(time.perf_counter() - t)
    return {"compile_s": round(compile_s, 2), "run_s": [round(r, 3) for r in runs]}, _leaves(out)


PROGRAMS = ("init", "epoch")


def measure(cfg: RunConfig, sets: dict[str, OptionSet], save_outputs: str | None = None,
            programs: tuple[str, ...] = PROGRAMS) -> dict:
    """Compile `cfg`'s population's `programs` (of PROGRAMS, as `population.Population` jits
    them, on one device) under each option set in `sets` (names of OPTION_SETS): compile and
    run seconds, and the outputs against the first set's (`bitwise_equal` None when that one
    failed to compile)."""
    c = build_cohort(prepare(cfg))
    trainer = c.pop.trainer
    runners = jax.block_until_ready(c.pop.init(c.keys, c.data))
    host = jax.tree.map(np.asarray, runners)
    result: dict = {"device": jax.devices()[0].device_kind, "jax": jax.__version__,
                    "members": len(c.members), "programs": {}}
    for program, fn_of, args_, fresh in [
        ("init", lambda o: jax.jit(jax.vmap(trainer.init), compiler_options=o),
         (c.keys, c.data), lambda a: a),
        ("epoch", lambda o: jax.jit(jax.vmap(trainer.epoch), donate_argnums=0,
                                    compiler_options=o),
         (runners, c.data, c.hps),
         lambda a: (jax.tree.map(jax.numpy.asarray, host),) + a[1:])]:
        if program not in programs:
            continue
        records = result["programs"][program] = {}
        ref = None
        for k, (name, opts) in enumerate(sets.items()):
            run = population.with_jax_settings(functools.partial(_measure, fn_of(opts.xla), args_,
                                                                 fresh), opts.jax_settings)
            try:
                rec, leaves = run()
            except Exception as e:  # an option this backend or XLA version does not know
                records[name] = {"error": str(e)[:300]}
                print(program, name, "error:", str(e)[:300], flush=True)
                continue
            if k == 0:
                ref = leaves
            if save_outputs:
                os.makedirs(save_outputs, exist_ok=True)
                np.savez(os.path.join(save_outputs, f"{program}-{name}.npz"), *leaves)
            if ref is None:
                rec["bitwise_equal"] = rec["max_abs_diff"] = None
            else:
                pairs = list(zip(ref, leaves, strict=True))
                rec["bitwise_equal"] = all(np.array_equal(a, b) for a, b in pairs)
                rec["max_abs_diff"] = max(float(np.max(np.abs(a.astype(np.float64) - b)))
                                          if a.size else 0.0 for a, b in pairs)
            records[name] = rec
            print(program, name, rec, flush=True)
    return result


def _persistent_cache(enabled: bool) -> None:
    """Turn JAX's persistent compilation cache on or off for the programs compiled next
    (`reset_cache`: JAX decides once whether to use it, at the first compile)."""
    jax.config.update("jax_enable_compilation_cache", enabled)
    compilation_cache.reset_cache()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.compile_options",
                                description=__doc__.split("\n")[0])
    p.add_argument("--out", default="compile_options.json")
    p.add_argument("--preset", default="default", choices=PRESETS)
    p.add_argument("--steps-per-epoch", type=int, default=None,
                   help="env steps per epoch (default: the preset's; fewer on a CPU)")
    p.add_argument("--save-outputs", default=None, metavar="DIR",
                   help="write each program's outputs to DIR/PROGRAM-SET.npz (to compare builds "
                        "of two source trees)")
    p.add_argument("--programs", default=",".join(PROGRAMS),
                   help=f"programs to compile, of {','.join(PROGRAMS)}")
    p.add_argument("--sets", default=",".join(OPTION_SETS),
                   help=f"option sets to compile with, of {','.join(OPTION_SETS)}")
    args = p.parse_args(argv)
    names = args.sets.split(",")
    unknown = [n for n in names if n not in OPTION_SETS]
    if unknown:
        p.error(f"--sets: unknown {','.join(unknown)} (choose from {','.join(OPTION_SETS)})")
    programs = tuple(args.programs.split(","))
    if set(programs) - set(PROGRAMS):
        p.error(f"--programs: unknown {','.join(sorted(set(programs) - set(PROGRAMS)))} "
                f"(choose from {','.join(PROGRAMS)})")
    if args.steps_per_epoch is not None and args.steps_per_epoch < 1:
        p.error(f"--steps-per-epoch must be >= 1, got {args.steps_per_epoch}")
    cfg = preset(args.preset)
    if args.steps_per_epoch:
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(
            cfg.train, steps_per_epoch=args.steps_per_epoch))
    cache = jax.config.jax_enable_compilation_cache
    _persistent_cache(False)  # every program compiled here, none loaded
    try:
        result = measure(cfg, {n: OPTION_SETS[n] for n in names}, args.save_outputs,
                         programs)
    finally:
        _persistent_cache(cache)
    write_json(Path(args.out), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
