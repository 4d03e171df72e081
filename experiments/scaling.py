"""Population scaling over devices and processes: the main job, timed per epoch. Not a test.

    python -m experiments.scaling [--sizes 256,1024,4096] [--layouts 1,4,4x1] [--steps 500]
                                  [--epochs 2] [--out scaling.json]

Each (layout, population) runs `rl_trader.cli.train` in fresh processes on synthetic AR(1)
bars: F folds × S seeds × P / (F·S) learning rates (a sweep, as a large population usually
is), E epochs of `--steps` env steps. A layout is `D` (one process driving D devices) or
`NxD` (N processes of D devices each, joined by `jax.distributed` over loopback; on GPUs
process i sees devices i·D … i·D + D − 1 through CUDA_VISIBLE_DEVICES). From process 0's
`timings.json`, the last epoch (the first compiles):

- the training program: agent-updates/s = P · steps · updates per step / its seconds;
- the whole epoch: training, validation, diagnostics, fold checkpoints, waiting for the
  previous epoch's resume state and starting this one's; the same rate over its seconds.

Speed-ups are against the one-device layout at the same population, when it was run. The JSON
is rewritten after every run, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PROG = "python -m experiments.scaling"
ROOT = Path(__file__).resolve().parents[1]


def parse_layout(text: str) -> tuple[int, int]:
    """'4' → (1 process, 4 devices); '4x1' → (4 processes, 1 device each)."""
    try:
        procs, devs = (int(x) for x in text.split("x")) if "x" in text else (1, int(text))
    except ValueError:
        raise SystemExit(f"{PROG}: error: option --layouts: {text!r} is not D or NxD") from None
    if procs < 1 or devs < 1:
        raise SystemExit(f"{PROG}: error: option --layouts: {text!r} needs positive counts")
    return procs, devs


def sweep_values(n: int) -> list[float]:
    """`n` learning rates spread geometrically over [3e-5, 3e-4] (one: the default's 1e-4)."""
    return [1e-4] if n == 1 else [float(f"{x:.3g}") for x in np.geomspace(3e-5, 3e-4, n)]


def job_args(size: int, folds: int, seeds: int, steps: int, epochs: int,
             extra: list[str]) -> list[str]:
    """multi_fold's options for a population of `size` members."""
    settings, rest = divmod(size, folds * seeds)
    if rest or settings < 1:
        raise SystemExit(f"{PROG}: error: option --sizes: {size} is not a multiple of "
                         f"folds × seeds = {folds * seeds}")
    args = ["--data", "synthetic:ar1", "--folds", str(folds), "--seeds", str(seeds),
            "--epochs", str(epochs), "--steps-per-epoch", str(steps), "--no-report", *extra]
    if settings > 1:
        args += ["--sweep", "learning_rate=" + ",".join(map(str, sweep_values(settings)))]
    return args


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_layout(procs: int, devs: int, args: list[str], run_dir: Path,
               timeout: float, jax_cache: str = "off") -> tuple[int, str]:
    """Run the job as `procs` processes of `devs` devices; (worst return code, stderr tail).
    A process that fails stops the others; past `timeout` seconds all stop (code 124).
    `jax_cache`: the processes' compilation cache (RL_TRADER_JAX_CACHE; off: none)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RL_TRADER_JAX_CACHE": jax_cache}
    cmd = [sys.executable, "-m", "rl_trader.cli.train", *args, "--run-dir", str(run_dir)]
    port = _free_port()
    logs = [tempfile.TemporaryFile("w+") for _ in range(procs)]  # a pipe could fill and block
    popen = []
    for i in range(procs):
        penv, extra = dict(env), ["--devices", str(devs)]  # one process: its first D devices
        if procs > 1:  # several: every device of every process
            penv["CUDA_VISIBLE_DEVICES"] = ",".join(str(i * devs + d) for d in range(devs))
            extra = ["--coordinator", f"127.0.0.1:{port}", "--num-processes", str(procs),
                     "--process-id", str(i)]
        popen.append(subprocess.Popen(cmd + extra, cwd=ROOT, env=penv, text=True,
                                      stdout=subprocess.DEVNULL, stderr=logs[i]))
    deadline, failed = time.monotonic() + timeout, None
    try:
        while failed is None and any(p.poll() is None for p in popen):
            failed = next((i for i, p in enumerate(popen) if p.returncode), None)
            if time.monotonic() > deadline:
                return 124, f"timed out after {timeout:.0f} s"
            time.sleep(0.2)
    finally:
        for p in popen:
            p.kill()
            p.wait()
    if failed is None:  # every process had ended: the first that failed, if any
        failed = next((i for i, p in enumerate(popen) if p.returncode), None)
    if failed is None:
        return 0, ""
    logs[failed].seek(0)
    return popen[failed].returncode, logs[failed].read()[-2000:]


def measure(layout: str, size: int, args: list[str], steps: int, work: Path,
            timeout: float, jax_cache: str = "off") -> dict:
    """One run's figures (its last epoch) from process 0's timings.json."""
    procs, devs = parse_layout(layout)
    run_dir = work / f"run_{layout}_{size}"
    shutil.rmtree(run_dir, ignore_errors=True)
    t0 = time.perf_counter()
    rc, err = run_layout(procs, devs, args, run_dir, timeout, jax_cache)
    wall = time.perf_counter() - t0
    out = {"layout": layout, "processes": procs, "devices": procs * devs, "population": size,
           "steps_per_epoch": steps, "wall_s": round(wall, 2), "returncode": rc}
    if rc != 0:
        out["error"] = err
        return out
    timings = json.loads((run_dir / "timings.json").read_text())
    config = json.loads((run_dir / "config.json").read_text())
    shutil.rmtree(run_dir, ignore_errors=True)
    lap = timings["epochs"][-1]
    updates = size * steps * config["train"]["updates_per_step"]
    train_s, epoch_s = lap["stages"]["train_program"], lap["seconds"]
    return {**out, "members": timings["members"], "first_epoch_s": timings["epochs"][0]["seconds"],
            "train_program_s": train_s, "epoch_s": epoch_s, "stages": lap["stages"],
            "agent_updates_per_s": updates / train_s,
            "epoch_agent_updates_per_s": updates / epoch_s,
            "seconds_total": timings["seconds_total"], "device": timings["device"]}


def speedups(runs: list[dict]) -> list[dict]:
    """Each successful run's speed-up over the one-device run of the same population."""
    base = {r["population"]: r for r in runs if r.get("epoch_s") and r["devices"] == 1}
    out = []
    for r in runs:
        b = base.get(r["population"])
        if b and r.get("epoch_s") and r["devices"] > 1:
            out.append({"layout": r["layout"], "population": r["population"],
                        "train_program": round(b["train_program_s"] / r["train_program_s"], 3),
                        "whole_epoch": round(b["epoch_s"] / r["epoch_s"], 3)})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="256,1024,4096", help="population sizes")
    p.add_argument("--layouts", default="1,4,4x1", help="D or NxD, comma-separated")
    p.add_argument("--folds", type=int, default=4)
    p.add_argument("--seeds", type=int, default=16)
    p.add_argument("--steps", type=int, default=500, help="env steps per epoch")
    p.add_argument("--epochs", type=int, default=2, help="epochs per run (≥ 2: the last is timed)")
    p.add_argument("--args", default="", help="more multi_fold options, e.g. '--preset smoke'")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    p.add_argument("--work", default=None, help="where the run directories go (default: a "
                                                "temporary directory)")
    p.add_argument("--out", default="scaling.json")
    p.add_argument("--jax-cache", default="off",
                   help="the runs' compilation cache directory (default off: every run "
                        "compiles, as a new configuration does; the timed last epoch is the "
                        "same either way, the first epoch and the total are not)")
    a = p.parse_args(argv)
    if a.epochs < 2:
        p.error("option --epochs: must be ≥ 2 (the first epoch compiles)")
    sizes = [int(x) for x in a.sizes.split(",")]
    layouts = a.layouts.split(",")
    for layout in layouts:
        parse_layout(layout)
    jobs = {s: job_args(s, a.folds, a.seeds, a.steps, a.epochs, shlex.split(a.args))
            for s in sizes}
    work = Path(a.work or tempfile.mkdtemp(prefix="rl_trader_scaling_"))
    result: dict = {"date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv),
                    "runs": [], "speedups": []}
    for layout in layouts:
        for size in sizes:
            r = measure(layout, size, jobs[size], a.steps, work, a.timeout, a.jax_cache)
            result["runs"].append(r)
            result["speedups"] = speedups(result["runs"])
            Path(a.out).write_text(json.dumps(result, indent=2))
            if r["returncode"]:
                print(f"{layout:>5} P={size:<5} failed ({r['returncode']}): "
                      f"{r['error'].strip().splitlines()[-1:]}", flush=True)
            else:
                print(f"{layout:>5} P={size:<5} training {r['train_program_s']:7.2f}s "
                      f"({r['agent_updates_per_s']:>10,.0f} upd/s)  whole epoch "
                      f"{r['epoch_s']:7.2f}s ({r['epoch_agent_updates_per_s']:>10,.0f} upd/s)  "
                      f"{r['stages']}", flush=True)
    for s in result["speedups"]:
        print(f"speed-up {s['layout']:>5} P={s['population']:<5} training "
              f"{s['train_program']:.2f}×  whole epoch {s['whole_epoch']:.2f}×")
    print(f"wrote {a.out}")
    return 1 if any(r["returncode"] for r in result["runs"]) else 0


if __name__ == "__main__":
    sys.exit(main())
