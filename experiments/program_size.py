"""The size of a run's two big programs and what compiling them costs, written as JSON.

    python -m experiments.program_size [--out size.json] [--call] [--passes] [--parts]
                                       [--serialized] [--jax-cache DIR] [--gpu-target h100]
                                       [-- train options]

For the run the train options describe (default: `make train FOLDS=3`'s, `--folds 3` on the
embedded data), the population's initialisation and epoch programs are lowered and compiled
on placeholder fold data (`Prepared.placeholder_fold_data`: the run's shapes, no tree fits),
with the persistent compilation cache off (`--jax-cache DIR` uses one). For each program: its
HLO instruction count before XLA's passes (the lowered module) and after them (the compiled
module), the seconds to trace and lower and to compile, and the instruction counts by opcode
(the largest first). With `--call`, the programs are also called (init once, the epoch twice:
the second call's seconds are the steady state) and a sha256 of the epoch's output params is
kept, so that runs under other `XLA_FLAGS` can be compared bit for bit. Run it once per
`XLA_FLAGS` setting: the flags are read when the backend starts. With `--passes`, the
measurement runs in a child process with XLA's pass log on (`TF_CPP_VMODULE=
hlo_pass_pipeline=1`, read when XLA loads) and each XLA module's seconds in its HLO passes are
kept, the largest first (`pass_seconds`): what of a compile is HLO passes and what is code
generation (the rest of `compile_seconds`). With `--parts`, the epoch's two halves are also
compiled alone on the population: one env step of every env with the ε-greedy policy
(`act_step`) and one gradient update (`learn_step`), to find which part a compile's time is in.
With `--serialized`, the compiled epoch is also serialized and loaded back
(`jax.experimental.serialize_executable`): its bytes and seconds, against the trace and the
persistent cache's load (`lower_seconds`, and `compile_seconds` under `--jax-cache DIR` once
the cache holds it), what a start that skips the trace would pay.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np
from jax.experimental import serialize_executable
from jax.sharding import Mesh

from experiments import gpu_target
from rl_trader.agent import learner
from rl_trader.cli.options import config_from_args
from rl_trader.cli.train import build_parser
from rl_trader.run.prepare import build_cohort, prepare
from rl_trader.runtime.compile_cache import enable_compilation_cache
from rl_trader.training import train
from rl_trader.training.population import Cohort, threefry_kernels

PROG = "python -m experiments.program_size"
INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?[\w.\-]+ = [^=]*?\b([a-z][\w\-]*)\(", re.M)
TUPLE_INDEX = re.compile(r"/\*index=\d+\*/")
# XLA's pass log (absl's prefix: level and date, time, thread id, file:line]); a pipeline's
# start names the module its passes run on, in that thread; a pass's seconds are in (N us)
PASS_LOG = re.compile(r"^\S+ (\d+):(\d+):([\d.]+)\s+(\d+) hlo_pass_pipeline\.cc:\d+\] "
                      r"(?:Running HLO pass pipeline on module ([^:\s]+):|"
                      r"HLO pass: (.+?) time: .*?\((\d+) us\))", re.M)
CHILD = "RL_TRADER_PROGRAM_SIZE_CHILD"


def instructions(hlo_text: str) -> collections.Counter:
    """HLO instructions by opcode in an HLO module's text (every computation's); the
    `/*index=N*/` comments inside long tuple shapes are dropped first."""
    return collections.Counter(INSTRUCTION.findall(TUPLE_INDEX.sub("", hlo_text)))


def measure(lowerable, args: tuple) -> tuple[dict, object]:
    """Trace, lower and compile `lowerable` (a jitted function) for `args`: counts and
    seconds, and the compiled program."""
    t0 = time.perf_counter()
    lowered = lowerable.lower(*args)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    before, after = instructions(lowered.as_text(dialect="hlo")), instructions(compiled.as_text())
    return {"hlo_instructions": sum(before.values()),
            "hlo_instructions_optimised": sum(after.values()),
            "lower_seconds": round(t1 - t0, 3), "compile_seconds": round(t2 - t1, 3),
            "opcodes_optimised": dict(after.most_common(12))}, compiled


def parts(c: Cohort) -> dict[str, tuple]:
    """The epoch's two halves vmapped over the population, jitted, with their arguments:
    `act_step` (one env step of every env, ε-greedy) and `learn_step` (one gradient update)."""
    head, cfg = c.pop.trainer.epoch.keywords["head"], c.pop.trainer.epoch.keywords["cfg"]
    total = cfg.train.epochs * cfg.train.steps_per_epoch

    def act_step(r: train.Runner, fold, hp: learner.HParams) -> train.Runner:
        eps = learner.epsilon(r.env_steps, total, cfg.agent, hp)
        return train.env_step(r, fold, eps, head, cfg)[0]

    def learn_step(r: train.Runner, fold, hp: learner.HParams) -> train.Runner:
        return train.learn(r, fold, hp, head, cfg)[0]

    runners = jax.eval_shape(c.pop.init, c.keys, c.data)
    return {f.__name__: (jax.jit(jax.vmap(f)), (runners, c.data, c.hps))
            for f in (act_step, learn_step)}


def serialized(compiled) -> dict:
    """The compiled program serialized and loaded back: its bytes and both seconds."""
    t0 = time.perf_counter()
    payload, in_tree, out_tree = serialize_executable.serialize(compiled)
    t1 = time.perf_counter()
    serialize_executable.deserialize_and_load(payload, in_tree, out_tree)
    t2 = time.perf_counter()
    return {"serialized_bytes": len(payload), "serialize_seconds": round(t1 - t0, 3),
            "deserialize_seconds": round(t2 - t1, 3)}


def device_kind(mesh: Mesh | None) -> str:
    """The device compiled for: this process's first, or a target mesh's (deviceless)."""
    if mesh is None:
        return jax.devices()[0].device_kind
    return f"{mesh.devices.flat[0].device_kind} (deviceless compile)"


def params_digest(tree: object) -> str:
    """sha256 of every leaf's bytes, in tree order."""
    h = hashlib.sha256()
    for x in jax.tree.leaves(tree):
        h.update(np.ascontiguousarray(np.asarray(x)).tobytes())
    return h.hexdigest()


def pass_seconds(log: str, top: int = 15) -> dict:
    """XLA's pass log → {module: {"seconds": the time its HLO passes ran, "passes": [[name,
    seconds], …] the `top` largest, each summed over its runs}}. A module's time is the sum,
    over each stretch of its thread's lines naming it (one compilation), from the stretch's
    first line to its last: a module compiled twice is not charged for what ran between. A
    nested pipeline (`simplification`, a fixed point of several passes) is logged as one pass
    beside its own passes, so the names' seconds overlap and are not summed."""
    module_of: dict[str, str] = {}
    stretch: dict[str, tuple[str, float, float]] = {}  # thread → (module, first, last)
    total: collections.Counter = collections.Counter()
    seconds: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    day, before = 0.0, 0.0
    for h, m, sec, thread, module, name, micros in PASS_LOG.findall(log):
        t = int(h) * 3600 + int(m) * 60 + float(sec)
        day += 86400.0 if t + day < before - 3600 else 0.0  # past midnight
        t, before = t + day, t + day
        if module:
            module_of[thread] = module
        module = module_of.get(thread, "?")
        current = stretch.get(thread)
        if current is None or current[0] != module:
            if current is not None:
                total[current[0]] += current[2] - current[1]
            current = (module, t, t)
        stretch[thread] = (module, current[1], t)
        if name:
            seconds[module][name] += int(micros) / 1e6
    for module, first, last in stretch.values():
        total[module] += last - first
    return {m: {"seconds": round(v, 3),
                "passes": [[n, round(x, 3)] for n, x in seconds[m].most_common(top)]}
            for m, v in total.most_common()}


def with_passes(argv: list[str], out: str, module: str = "experiments.program_size") -> int:
    """The measurement of `module` (run with `argv`) again in a child process with XLA's pass
    log on; its JSON with the modules' pass seconds added (`pass_seconds`), written to
    `out`."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="hlo_pass_pipeline=1",
               **{CHILD: "1"})
    with tempfile.TemporaryFile("w+", errors="replace") as log:  # large: a pipe could block
        done = subprocess.run([sys.executable, "-m", module, *argv],
                              env=env, stdout=subprocess.DEVNULL, stderr=log, text=True)
        log.seek(0)
        text = log.read()
    if done.returncode != 0:
        sys.stderr.write(text[-4000:])
        return done.returncode
    with open(out) as f:
        result = json.load(f)
    result["pass_seconds"] = pass_seconds(text)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="program_size.json")
    parser.add_argument("--call", action="store_true",
                        help="also call the programs: steady-state seconds and a digest")
    parser.add_argument("--passes", action="store_true",
                        help="also each XLA module's seconds in its HLO passes (measured in a "
                        "child process with XLA's pass log on)")
    parser.add_argument("--jax-cache", default="off",
                        help="a persistent compilation cache directory (default off: every "
                        "program is compiled; with one, a program found there is loaded and "
                        "its compile seconds are the load's)")
    parser.add_argument("--serialized", action="store_true",
                        help="also serialize the compiled epoch and load it back")
    parser.add_argument("--parts", action="store_true",
                        help="also compile the epoch's env step and gradient update alone")
    gpu_target.add_option(parser)
    parser.add_argument("train_args", nargs="*", help="train options (after --)")
    args = parser.parse_args(argv)
    if args.gpu_target and (args.call or args.serialized):
        parser.error("--gpu-target compiles without a device: --call and --serialized need one")
    if args.gpu_target:
        gpu_target.with_plugin("experiments.program_size", sys.argv[1:] if argv is None else argv)
    if args.passes and not os.environ.get(CHILD):
        return with_passes(sys.argv[1:] if argv is None else argv, args.out)
    mesh = gpu_target.target_mesh(args.gpu_target)  # before any backend starts
    enable_compilation_cache(args.jax_cache)
    cfg = config_from_args(build_parser(PROG).parse_args(args.train_args or ["--folds", "3"]))
    c = build_cohort(prepare(cfg, fit_trees=False), placeholder=True)
    if mesh is not None:
        c = gpu_target.retarget(c, mesh)
    out: dict = {"device": device_kind(mesh), "jax": jax.__version__,
                 "xla_flags": os.environ.get("XLA_FLAGS", ""), "members": c.n_padded,
                 "train_args": args.train_args}
    out["init"], init = threefry_kernels(measure)(c.pop.init_program, (c.keys, c.data))
    out["epoch"], epoch = measure(c.pop.epoch, (jax.eval_shape(c.pop.init, c.keys, c.data),
                                                c.data, c.hps))
    if args.serialized:
        out["epoch"].update(serialized(epoch))
    if args.parts:
        for name, (program, program_args) in parts(c).items():
            out[name] = measure(program, program_args)[0]
    if args.call:
        runners = jax.block_until_ready(init(c.keys, c.data))
        seconds = []
        for _ in range(2):
            t0 = time.perf_counter()
            runners, _ = jax.block_until_ready(epoch(runners, c.data, c.hps))
            seconds.append(round(time.perf_counter() - t0, 4))
        out["epoch"]["call_seconds"] = seconds
        out["epoch"]["params_sha256"] = params_digest(runners.learner.params)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
