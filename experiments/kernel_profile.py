"""Where the accelerator's time goes in the training epoch: a `jax.profiler` trace of the
population's epoch program (the default learner, `--size` members), its device kernels summed
by name and by kind, and the device's busy time against the wall time.

    python -m experiments.kernel_profile [--size 256] [--steps 100] [--precision tf32]
                                         [--trace-dir DIR] [--out kernel_profile.json]

Per env step of the epoch (one update of every member) it reports the kernels launched, the
device time they took and the wall time, so the gap between the rate reached and the one asked
for splits into kernel work, by kind, and time the device sat idle between kernels (launch and
loop overhead), with a digest of the members' parameters after the two epochs (equal digests:
the kernel settings compared gave the same numbers). Device events come from CUPTI on GPUs;
on the CPU the trace holds host events only and the device figures are empty. Benchmarks
are not tests: this writes JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import jax

from experiments.benchmark import device_info, population_setup
from experiments.program_size import params_digest
from rl_trader.config import PRECISIONS, preset
from rl_trader.runtime.compile_cache import enable_compilation_cache

PROG = "python -m experiments.kernel_profile"

# A kernel's kind from its name (XLA's fusion names, cuBLAS/CUTLASS gemm kernels), first match.
KINDS: tuple[tuple[str, re.Pattern], ...] = tuple((k, re.compile(p)) for k, p in (
    ("matmul", r"gemm|xmma|cutlass|cublas|wgmma|dot"),
    ("gather/scatter", r"gather|scatter|dynamic"),
    ("reduction", r"reduce|reduction"),
    ("copy/transpose", r"memcpy|memset|copy|transpose"),
    ("random", r"threefry|philox|rng|sort"),
    ("elementwise fusion", r"fusion|loop"),
))


def kind_of(name: str) -> str:
    """The kind of a device kernel, from its name (`KINDS`; "other" when none matches)."""
    low = name.lower()
    return next((k for k, pat in KINDS if pat.search(low)), "other")


def _union_seconds(spans: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals given in µs, in seconds."""
    total, end = 0.0, float("-inf")
    for s, e in sorted(spans):
        if e > end:
            total += e - max(s, end)
            end = e
    return total / 1e6


def summarise(trace: dict, steps: int, top: int = 25) -> dict:
    """Device kernels of a Chrome/Perfetto trace (`traceEvents`; complete events "X", ts and
    dur in µs) on the "Stream" threads of "/device:…" processes: seconds and counts by kind and
    by name, the device's busy seconds (union over streams) and the span from the first kernel's
    start to the last one's end; `steps` env steps were traced (per-step figures divide by it).
    Every (process, thread) line is listed with its event count and summed seconds."""
    events = trace.get("traceEvents", [])
    procs = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    lines: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    by_name: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    spans: list[tuple[float, float]] = []
    for e in events:
        if e.get("ph") != "X":
            continue
        proc = procs.get(e["pid"], str(e["pid"]))
        thread = threads.get((e["pid"], e.get("tid")), str(e.get("tid")))
        dur = float(e.get("dur", 0.0))
        line = lines[(proc, thread)]
        line[0] += 1
        line[1] += dur / 1e6
        if proc.startswith("/device:") and thread.startswith("Stream"):
            by_name[e["name"]][0] += 1
            by_name[e["name"]][1] += dur / 1e6
            spans.append((float(e["ts"]), float(e["ts"]) + dur))
    n_kernels = int(sum(n for n, _ in by_name.values()))
    kernel_s = sum(s for _, s in by_name.values())
    by_kind: dict[str, dict] = defaultdict(lambda: {"count": 0, "seconds": 0.0})
    for name, (n, s) in by_name.items():
        k = by_kind[kind_of(name)]
        k["count"] += n
        k["seconds"] += s
    for k in by_kind.values():
        k["share"] = k["seconds"] / kernel_s if kernel_s else None
    busy = _union_seconds(spans)
    span = (max(e for _, e in spans) - min(s for s, _ in spans)) / 1e6 if spans else 0.0
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]
    return {
        "kernels": n_kernels,
        "kernel_seconds": kernel_s, "device_busy_seconds": busy, "device_span_seconds": span,
        "kernels_per_step": n_kernels / steps,
        "busy_us_per_step": busy / steps * 1e6,
        "span_us_per_step": span / steps * 1e6,
        "by_kind": dict(sorted(by_kind.items(), key=lambda kv: -kv[1]["seconds"])),
        "top": [{"name": n, "kind": kind_of(n), "count": int(c), "seconds": s}
                for n, (c, s) in ranked],
        "lines": [{"process": p, "thread": t, "events": int(n), "seconds": s}
                  for (p, t), (n, s) in sorted(lines.items())],
    }


def load_trace(trace_dir: Path) -> dict:
    """The newest `perfetto_trace.json.gz` that `jax.profiler.trace(…, create_perfetto_trace=
    True)` wrote under `trace_dir`."""
    found = sorted(trace_dir.rglob("perfetto_trace.json.gz"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise FileNotFoundError(f"{trace_dir}: no perfetto_trace.json.gz (did the trace run?)")
    with gzip.open(found[-1], "rt") as fh:
        return json.load(fh)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=256, help="population size (members)")
    p.add_argument("--steps", type=int, default=100, help="env steps in the traced epoch")
    p.add_argument("--precision", choices=PRECISIONS, default="tf32")
    p.add_argument("--trace-dir", default="kernel_trace", help="where the profiler writes")
    p.add_argument("--out", default="kernel_profile.json")
    args = p.parse_args(argv)
    if args.size < 1 or args.steps < 1:
        p.error("--size and --steps must be ≥ 1")
    enable_compilation_cache()
    base = preset("default")
    base = dataclasses.replace(
        base, train=dataclasses.replace(base.train, steps_per_epoch=args.steps),
        net=dataclasses.replace(base.net, precision=args.precision))
    cfg, _, cohort, runners = population_setup(base, args.size)
    epoch = cohort.pop.epoch.lower(runners, cohort.data, cohort.hps).compile()
    runners, _ = jax.block_until_ready(epoch(runners, cohort.data, cohort.hps))  # warm
    with jax.profiler.trace(args.trace_dir, create_perfetto_trace=True):
        t = time.perf_counter()
        runners, _ = jax.block_until_ready(epoch(runners, cohort.data, cohort.hps))
        wall = time.perf_counter() - t
    steps = cfg.train.steps_per_epoch
    updates = args.size * steps * cfg.train.updates_per_step
    result = {"device": device_info(), "date": time.strftime("%Y-%m-%d"),
              "command": " ".join(sys.argv), "population": args.size, "steps": steps,
              "precision": args.precision, "wall_seconds": wall,
              "wall_us_per_step": wall / steps * 1e6,
              "agent_updates_per_s": updates / wall,
              # the online params after both epochs: same kernels, same digest
              "params_sha256": params_digest(runners.learner.params)[:16],
              **summarise(load_trace(Path(args.trace_dir)), steps)}
    result["busy_fraction"] = result["device_busy_seconds"] / wall
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"P={args.size}, {steps} steps: {result['agent_updates_per_s']:,.0f} agent-updates/s; "
          f"per step {result['wall_us_per_step']:.0f} µs wall, "
          f"{result['busy_us_per_step']:.0f} µs device busy "
          f"({100 * result['busy_fraction']:.0f} %), {result['kernels_per_step']:.0f} kernels; "
          f"params {result['params_sha256']}")
    for kind, k in result["by_kind"].items():
        print(f"  {kind:<20} {k['seconds'] / steps * 1e6:>9.1f} µs/step  {k['count'] / steps:>7.1f}"
              f" kernels/step  {100 * (k['share'] or 0):>5.1f} %")
    for row in result["top"][:12]:
        print(f"  {row['seconds'] / steps * 1e6:>9.1f} µs/step  {row['count'] / steps:>6.1f}×  "
              f"{row['kind']:<18} {row['name'][:90]}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
