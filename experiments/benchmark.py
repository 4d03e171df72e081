"""Speed figures, written as JSON and printed as a table. Benchmarks are not tests.

    python -m experiments.benchmark [--sections peak,env,population,length,width,peers]
                                    [--sizes 1,16,48,256] [--steps 200] [--out bench.json]

- peak:       measured matmul rate (f32 and bf16), the ceiling for achieved FLOP/s, and the
              memory bandwidth of a large elementwise pass (read + write), the ceiling for
              achieved bytes/s;
- env:        vmapped env steps/s (random targets) for growing numbers of envs;
- population: one jitted, vmapped training epoch for population sizes P: agent gradient
              updates/s (batch `--batch`), env steps/s, compile seconds, peak device memory,
              bytes per agent, achieved FLOP/s and bytes/s (XLA's cost analysis over the
              measured time) and XLA's bytes read and written per agent-update;
- length:     epoch time against data length (synthetic bars, 10^4 … 10^6);
- width:      epoch time against network width;
- peers:      stable-baselines3 DQN on the same market, and rl_trader's own agent driven one
              jitted step per Python iteration (experiments.peers; skipped when missing).
Compile time is always reported apart from steady-state rates (each rate is the second call);
each section's wall seconds are kept in `section_seconds`.
Where the time goes kernel by kernel: `python -m experiments.kernel_profile`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from rl_trader import env
from rl_trader.config import PRECISIONS, RunConfig, preset
from rl_trader.runtime.compile_cache import enable_compilation_cache

if TYPE_CHECKING:
    from rl_trader.run.prepare import Prepared
    from rl_trader.training.population import Cohort

PROG = "python -m experiments.benchmark"  # in help and errors


def device_info() -> dict:
    """The first device's platform and kind, the device count, jax and Python versions, and
    the process's `XLA_FLAGS` (the project's own and the user's: they change the kernels)."""
    d = jax.devices()[0]
    return {"platform": d.platform, "device_kind": d.device_kind, "n_devices": len(jax.devices()),
            "jax": jax.__version__, "python": platform.python_version(),
            "xla_flags": os.environ.get("XLA_FLAGS", "")}


def _peak_memory() -> int | None:
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def _timed(fn, *args) -> tuple[float, object]:
    t = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return time.perf_counter() - t, out


def matmul_peak(n: int) -> dict:
    """Achieved FLOP/s of an n×n×n matrix product, f32 (default precision) and bf16, and the
    memory bandwidth of an elementwise pass over n·n·16 float32 (bytes read + written / s)."""
    out = {}
    for name, dtype in (("f32", jnp.float32), ("bf16", jnp.bfloat16)):
        a = jax.random.normal(jax.random.PRNGKey(0), (n, n), dtype)
        b = jax.random.normal(jax.random.PRNGKey(1), (n, n), dtype)
        f = jax.jit(lambda x, y: x @ y)
        _timed(f, a, b)
        times = [_timed(f, a, b)[0] for _ in range(5)]
        out[f"{name}_tflops"] = 2 * n**3 / float(np.median(times)) / 1e12
    x = jnp.ones((n, n, 16), jnp.float32)  # 4.3 GB at n = 8192: far beyond the caches
    f = jax.jit(lambda v: v * 2.0)
    _timed(f, x)
    times = [_timed(f, x)[0] for _ in range(5)]
    out["copy_gbytes_per_s"] = 2 * x.nbytes / float(np.median(times)) / 1e9  # read + write
    return out


def env_throughput(n_envs: int, steps: int) -> dict:
    """Env steps/s of `n_envs` vmapped envs stepping `steps` times inside one scan."""
    cfg = RunConfig().env
    n_bars = steps + 2
    close = jnp.exp(jnp.cumsum(0.01 * jax.random.normal(jax.random.PRNGKey(0), (n_bars,))))
    prices = env.Prices(open=close, close=close)

    @jax.jit
    def run(key):
        states = jax.vmap(env.reset)(jnp.zeros(n_envs, jnp.int32),
                                     jnp.full(n_envs, n_bars - 1, jnp.int32))

        def body(s, k):
            target = jax.random.uniform(k, (n_envs,), minval=-1.0, maxval=1.0)
            s, out = jax.vmap(env.step, in_axes=(0, 0, None, None))(s, target, prices, cfg)
            return s, out.reward.sum()

        return jax.lax.scan(body, states, jax.random.split(key, steps))[1].sum()

    compile_s, _ = _timed(run, jax.random.PRNGKey(1))
    t, _ = _timed(run, jax.random.PRNGKey(2))
    return {"n_envs": n_envs, "steps": steps, "env_steps_per_s": n_envs * steps / t,
            "seconds": t, "compile_s": compile_s - t}


def population_setup(cfg: RunConfig, size: int, data_spec: str = "synthetic:ar1",
                     devices: int = 1) -> tuple[RunConfig, Prepared, Cohort, Any]:
    """`size` fresh members (fold 0 of `data_spec`, seeds 0..size−1), sharded over `devices`
    devices (size must be a multiple): (cfg, prep, cohort, runners), ready for `pop.epoch`."""
    from rl_trader.run.prepare import build_cohort, prepare

    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, path=data_spec),
                              train=dataclasses.replace(cfg.train, seeds=size))
    prep = prepare(cfg)
    prep = dataclasses.replace(prep, folds=prep.folds[:1])  # fold 0, `size` seeds
    cohort = build_cohort(prep, devices)
    runners = jax.block_until_ready(cohort.pop.init(cohort.keys, cohort.data))
    return cfg, prep, cohort, runners


def population_epoch(cfg: RunConfig, size: int, data_spec: str = "synthetic:ar1",
                     devices: int = 1) -> dict:
    """One vmapped epoch of `size` members (fold 0, seeds 0..size−1), sharded over `devices`
    devices (size must be a multiple): rates, memory, FLOP/s."""
    cfg, prep, cohort, runners = population_setup(cfg, size, data_spec, devices)
    pop, data, hps = cohort.pop, cohort.data, cohort.hps
    n_params = sum(int(np.prod(x.shape[1:])) for x in jax.tree.leaves(runners.learner.params))
    t0 = time.perf_counter()
    compiled = pop.epoch.lower(runners, data, hps).compile()
    compile_s = time.perf_counter() - t0
    try:  # XLA's cost analysis is best effort across backends and versions
        cost = compiled.cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        # It counts a while loop's body once (seen on the H200: ~0.5 GFLOP "per epoch" for one
        # member, the cost of one step), so scale by the epoch's scan trip count.
        flops = float(cost.get("flops", 0.0)) * cfg.train.steps_per_epoch or None
        moved = float(cost.get("bytes accessed", 0.0)) * cfg.train.steps_per_epoch or None
    except Exception:
        flops = moved = None
    runners, _ = jax.block_until_ready(compiled(runners, data, hps))
    t, (runners, _) = _timed(compiled, runners, data, hps)
    steps, upd = cfg.train.steps_per_epoch, cfg.train.updates_per_step
    return {
        "population": size, "devices": devices, "n_params": n_params, "batch": cfg.agent.batch_size,
        "n_envs": cfg.train.n_envs, "steps_per_epoch": steps, "n_bars": len(prep.bars),
        "hidden": cfg.net.hidden, "trunk": cfg.net.trunk,
        "epoch_s": t, "compile_s": compile_s,
        "agent_updates_per_s": size * steps * upd / t,
        "env_steps_per_s": size * cfg.train.n_envs * steps / t,
        "flops_per_epoch": flops, "achieved_tflops": flops / t / 1e12 if flops else None,
        # XLA's estimate of the bytes its kernels read and write (each fusion's operands and
        # results), per agent-update, and the rate achieved
        "bytes_per_update": moved / (size * steps * upd) if moved else None,
        "achieved_gbytes_per_s": moved / t / 1e9 if moved else None,
        "peak_device_bytes": _peak_memory(),
    }


def run_peers(peers, n_steps: int) -> dict:
    """SB3 DQN vs rl_trader's agent on the embedded S&P 500, same env steps and updates."""
    from rl_trader.run.prepare import prepare

    cfg = preset("default")
    prep = prepare(cfg)
    single = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, n_envs=1))
    out = {"sb3_dqn": peers.sb3_dqn(n_steps, single, prep),
           "per_step_loop": peers.per_step_loop(min(n_steps, 5000), single, prep),
           "fused_single": peers.fused_epoch(n_steps, single, prep),
           "fused_default": peers.fused_epoch(1000, cfg, prep)}
    sb3 = out["sb3_dqn"]
    out["speedup_single_updates"] = (out["fused_single"]["updates_per_s"]
                                     / sb3["updates_per_s"])
    return out


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sections", default="peak,env,population,length,width,peers")
    p.add_argument("--sizes", default="1,16,48,256",
                   help="population sizes (the first one is used by the length and width sections)")
    p.add_argument("--steps", type=int, default=200, help="env steps per epoch measured")
    p.add_argument("--peer-steps", type=int, default=5_000,
                   help="env steps for the peers (5,000: the section in 159 s on one H200)")
    p.add_argument("--devices", type=int, default=1, help="devices for the population section")
    p.add_argument("--precision", choices=PRECISIONS, default="tf32",
                   help="matmul precision of the network (see NetConfig.precision)")
    p.add_argument("--out", default="bench.json")
    return p


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    args = build_parser(prog).parse_args(argv)
    enable_compilation_cache()
    sections = set(args.sections.split(","))
    sizes = [int(x) for x in args.sizes.split(",")]
    on_gpu = jax.devices()[0].platform == "gpu"
    base = preset("default")
    base = dataclasses.replace(base, train=dataclasses.replace(base.train,
                                                               steps_per_epoch=args.steps),
                               net=dataclasses.replace(base.net, precision=args.precision))
    result: dict = {"device": device_info(), "date": time.strftime("%Y-%m-%d"),
                    "command": " ".join(sys.argv)}

    def save() -> None:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=2)

    started = {"t": time.perf_counter()}

    def done(section: str) -> None:
        """Keep the section's wall seconds (`section_seconds`, from `begin`) and save."""
        result.setdefault("section_seconds", {})[section] = round(
            time.perf_counter() - started["t"], 1)
        save()

    def begin() -> None:
        started["t"] = time.perf_counter()

    if "peak" in sections:
        begin()
        result["matmul_peak"] = matmul_peak(8192 if on_gpu else 1024)
        print(f"matmul peak: {result['matmul_peak']}", flush=True)
        done("peak")
    if "env" in sections:
        begin()
        result["env"] = [env_throughput(n, 1000) for n in
                         ((1024, 65536, 1 << 20) if on_gpu else (1024, 16384))]
        for r in result["env"]:
            print(f"env: {r['n_envs']:>8} envs  {r['env_steps_per_s']:>14,.0f} env steps/s",
                  flush=True)
        done("env")
    if "population" in sections:
        begin()
        result["population"] = []
        for size in sizes:
            r = population_epoch(base, size, devices=args.devices)
            result["population"].append(r)
            save()
            print(f"population {size:>4} on {args.devices} device(s): "
                  f"{r['agent_updates_per_s']:>12,.0f} agent-updates/s "
                  f"{r['env_steps_per_s']:>14,.0f} env steps/s  compile {r['compile_s']:.1f}s  "
                  f"peak mem {(r['peak_device_bytes'] or 0) / 2**30:.2f} GiB  "
                  f"{r['achieved_tflops'] or 0:.2f} TFLOP/s  "
                  f"{(r['bytes_per_update'] or 0) / 1e6:.1f} MB/update  "
                  f"{r['achieved_gbytes_per_s'] or 0:,.0f} GB/s", flush=True)
        done("population")
    if "length" in sections:
        begin()
        result["length"] = []
        for n in (10_000, 100_000, 1_000_000):
            r = population_epoch(base, sizes[0], f"synthetic:ar1:{n}", args.devices)
            result["length"].append(r)
            save()
            print(f"length {n:>9} bars: epoch {r['epoch_s']:.3f}s (P={sizes[0]})", flush=True)
        done("length")
    if "width" in sections:
        begin()
        result["width"] = []
        for hidden, trunk in ((16, 32), (32, 64), (64, 128), (128, 256)):
            cfg = dataclasses.replace(base, net=dataclasses.replace(
                base.net, hidden=hidden, trunk=trunk, context=hidden))
            r = population_epoch(cfg, sizes[0], devices=args.devices)
            result["width"].append(r)
            save()
            print(f"width {hidden}/{trunk}: {r['n_params']:,} params, epoch {r['epoch_s']:.3f}s "
                  f"(P={sizes[0]}), {r['achieved_tflops'] or 0:.2f} TFLOP/s", flush=True)
        done("width")
    if "peers" in sections:
        begin()
        try:
            from experiments import peers
        except ImportError as err:  # optional: needs stable-baselines3 and gymnasium
            result["peers"] = {"skipped": str(err)}
        else:
            result["peers"] = run_peers(peers, args.peer_steps)
            if result.get("population"):  # the population against SB3, in the same run
                best = max(result["population"], key=lambda r: r["agent_updates_per_s"])
                result["peers"]["population_size"] = best["population"]
                result["peers"]["speedup_population_updates"] = (
                    best["agent_updates_per_s"] / result["peers"]["sb3_dqn"]["updates_per_s"])
        print(f"peers: {json.dumps(result['peers'], indent=1)}", flush=True)
        done("peers")
    save()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
