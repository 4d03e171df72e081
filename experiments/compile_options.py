"""XLA compile options per program: compile seconds, run seconds, and whether the outputs are
bitwise equal to the default build's. A measurement, not a test.

    python -m experiments.compile_options [--out compile_options.json] [--steps-per-epoch N]

Builds the default preset's population on the embedded data (`make train FOLDS=3`'s members)
and compiles its init and epoch programs once per option set, without the persistent cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import jax
import numpy as np

from rl_trader import population
from rl_trader.config import preset
from rl_trader.prepare import prepare

OPTION_SETS: dict[str, dict | None] = {
    "default": None,
    "O0": {"xla_backend_optimization_level": 0},
    "O0_cheap_llvm": {"xla_backend_optimization_level": 0,
                      "xla_llvm_disable_expensive_passes": True},
    "cheap_llvm": {"xla_llvm_disable_expensive_passes": True},
    "gpu_parallel": {"xla_gpu_force_compilation_parallelism": 16},
    "threefry_kernel": None,  # XLA's defaults, with JAX_CONFIG_SETS below
}
# JAX settings in force while a set's programs are traced and compiled.
JAX_CONFIG_SETS: dict[str, dict] = {
    "threefry_kernel": {"jax_threefry_gpu_kernel_lowering": True},
}


def _leaves(tree: object) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _measure(fn, args: tuple, fresh) -> tuple[dict, list[np.ndarray]]:
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


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m experiments.compile_options")
    p.add_argument("--out", default="compile_options.json")
    p.add_argument("--steps-per-epoch", type=int, default=None,
                   help="env steps per epoch (default: the preset's; fewer on a CPU)")
    p.add_argument("--sets", default=",".join(OPTION_SETS),
                   help=f"option sets to compile with, of {','.join(OPTION_SETS)}")
    args = p.parse_args()
    sets = {name: OPTION_SETS[name] for name in args.sets.split(",")}
    jax.config.update("jax_enable_compilation_cache", False)
    cfg = preset("default")
    if args.steps_per_epoch:
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(
            cfg.train, steps_per_epoch=args.steps_per_epoch))
    c = population.build(prepare(cfg))
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
        ref = None
        for name, opts in sets.items():
            jax_settings = JAX_CONFIG_SETS.get(name, {})
            before = {k: getattr(jax.config, k) for k in jax_settings}
            try:
                for k, v in jax_settings.items():
                    jax.config.update(k, v)
                rec, leaves = _measure(fn_of(opts), args_, fresh)
            except Exception as e:  # an option this backend does not know
                result["programs"].setdefault(program, {})[name] = {"error": str(e)[:300]}
                print(program, name, "error:", str(e)[:300], flush=True)
                continue
            finally:
                for k, v in before.items():
                    jax.config.update(k, v)
            if ref is None:
                ref = leaves
            pairs = list(zip(ref, leaves, strict=True))
            rec["bitwise_equal"] = all(np.array_equal(a, b) for a, b in pairs)
            rec["max_abs_diff"] = max(float(np.max(np.abs(a.astype(np.float64) - b)))
                                      if a.size else 0.0 for a, b in pairs)
            result["programs"].setdefault(program, {})[name] = rec
            print(program, name, rec, flush=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
