"""Release gate: the main job over a family of planted markets, on fresh data seeds.

    python -m experiments.convergence [--markets ar1_weak,ar1_strong,regime,vol_regime,random_walk]
        [--runs 3] [--folds 3] [--bars 5000] [--preset default|smoke] [--oracle-floor 0.9]
        [--ridge-floor 0.95] [--sizing-floor 0.8] [--dsr-max 0.5] [--run-dir DIR] [--out FILE]
        [main-job options]

For each market and each run k in 0 … N−1 (N = --runs) the main job (`experiment.prepare` +
`run_experiment`, the preset and main-job options given) trains on `synthetic:MARKET:BARS:SEED`
with data seed GATE_SEED_BASE + k and run seed --seed + k, in RUN_DIR/MARKET-run<k>.

**Fresh-seed rule.** The gate scores data seeds ≥ GATE_SEED_BASE (1000) only. Tuning — sweeps,
choosing defaults, any look at validation or test figures to decide something — must use data
seeds < 1000 (`experiments.sweep` refuses the others), so the gate's markets are out of sample
for every choice made (with expanding folds a market's validation blocks are its earlier test
blocks, so a tuned market cannot gate).

Goals (in every run; each prints a PASS/FAIL line; the constants below, overridable by the
options; a negative floor is allowed, e.g. to test the gate's plumbing):

- fold_oracle: every fold of every planted market (all but random_walk) has
  agent / oracle ≥ ORACLE_FLOOR, the ratio of test Sharpes. The ratio is undefined when the
  oracle's Sharpe is ≤ 0, and such a fold fails; so does a fold with no test figure.
- fold_ridge: every such fold where ridge's test Sharpe is > 0 has agent / ridge ≥ RIDGE_FLOOR.
  Where ridge ≤ 0 there is no bar to clear (fold_oracle already asks for agent > 0 with a
  positive floor). A fold whose summary has no ridge baseline
  (`baseline_test_sharpes["ridge"]`) prints n/a and is not gated.
- sizing_vs_buy_and_hold (vol_regime): stitched agent test Sharpe > stitched buy-and-hold.
- sizing_vs_oracle (vol_regime): stitched agent ≥ SIZING_FLOOR × stitched sizing oracle
  (undefined, so failed, when the oracle's stitched Sharpe is ≤ 0).
- null_dsr (random_walk): the stitched DSR (`headline.dsr`) < DSR_MAX.

A goal whose markets were not run is reported as not run. Writes every figure to --out
(default RUN_DIR/gate.json). Exit 0 when every goal run passes, 1 when one is missed, 2 for bad
options. Same options → same figures on the CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

from experiments.multi_fold import build_parser, config_from_args, enable_compilation_cache
from rl_trader.errors import InputError

PROG = "python -m experiments.convergence"  # in help and errors; rl_trader.cli passes its own

FAMILY = ("ar1_weak", "ar1_strong", "regime", "vol_regime", "random_walk")
NULL_MARKETS = ("random_walk",)  # no skill possible: gated on the DSR, not on an oracle
SIZING_MARKETS = ("vol_regime",)  # the edge is in sizing: gated on stitched Sharpes too
GATE_SEED_BASE = 1000  # data seed of run k = GATE_SEED_BASE + k; tuning uses seeds below it
RUNS = 3
BARS = 5000
ORACLE_FLOOR = 0.9
RIDGE_FLOOR = 0.95
SIZING_FLOOR = 0.8
DSR_MAX = 0.5
UNSUPPORTED = ("data.path", "resume", "coordinator", "num_processes", "process_id", "distributed")


def build_gate_parser(prog: str = PROG) -> argparse.ArgumentParser:
    """The main job's options (training overrides, --preset, --folds, --seed, --run-dir …)
    plus the gate's."""
    p = build_parser(prog)
    p.description = "Release gate: the main job over a family of planted markets on fresh seeds."
    for action in p._actions:  # the main job's options that mean something else here
        if "--run-dir" in action.option_strings:
            action.help = ("parent of the runs, RUN_DIR/MARKET-run<k> (default "
                           "runs/<time>-convergence); never reused silently")
        elif "--seed" in action.option_strings:
            action.help = "run seed of run 0; run k uses --seed + k (default 0)"
    p.add_argument("--markets", default=",".join(FAMILY), metavar="A,B",
                   help=f"synthetic markets to run (default {','.join(FAMILY)})")
    p.add_argument("--runs", type=int, default=RUNS, metavar="N",
                   help=f"runs per market: data seed {GATE_SEED_BASE}+k, run seed --seed+k "
                        f"(default {RUNS})")
    p.add_argument("--bars", type=int, default=BARS, metavar="N",
                   help=f"bars per market (default {BARS})")
    p.add_argument("--oracle-floor", type=float, default=ORACLE_FLOOR,
                   help=f"minimum agent / oracle test Sharpe per fold (default {ORACLE_FLOOR})")
    p.add_argument("--ridge-floor", type=float, default=RIDGE_FLOOR,
                   help="minimum agent / ridge test Sharpe per fold where ridge > 0 "
                        f"(default {RIDGE_FLOOR})")
    p.add_argument("--sizing-floor", type=float, default=SIZING_FLOOR,
                   help="vol_regime: minimum stitched agent / sizing-oracle Sharpe "
                        f"(default {SIZING_FLOOR})")
    p.add_argument("--dsr-max", type=float, default=DSR_MAX,
                   help=f"random_walk: the stitched DSR must stay below this (default {DSR_MAX})")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="JSON with every figure (default RUN_DIR/gate.json)")
    return p


def check_options(args: argparse.Namespace, defaults: argparse.Namespace) -> list[str]:
    """Refuse what the gate cannot honour; the chosen market names."""
    from rl_trader.data.synthetic import MARKETS

    for name in UNSUPPORTED:
        if getattr(args, name) != getattr(defaults, name):
            flag = "--" + name.split(".")[0].replace("_", "-")
            raise InputError(f"option {flag} is not supported by the gate "
                             "(it runs its own markets, one process, from scratch)")
    markets = [m.strip() for m in args.markets.split(",")]
    unknown = [m for m in markets if m not in MARKETS]
    if not args.markets.strip() or unknown or len(set(markets)) != len(markets):
        raise InputError(f"option --markets={args.markets!r}: expected distinct names from "
                         f"{', '.join(sorted(MARKETS))}")
    if not 1 <= args.runs <= 100:
        raise InputError(f"option --runs={args.runs} is out of range: must be in [1, 100]")
    if not 100 <= args.bars <= 50_000_000:
        raise InputError(f"option --bars={args.bars} is out of range: must be in [100, 5e7]")
    for opt in ("oracle_floor", "ridge_floor", "sizing_floor"):
        value = getattr(args, opt)
        if not -100 <= value <= 100:
            raise InputError(f"option --{opt.replace('_', '-')}={value} is out of range: must "
                             "be in [-100, 100]")
    if not 0 <= args.dsr_max <= 1:
        raise InputError(f"option --dsr-max={args.dsr_max} is out of range: must be in [0, 1]")
    return markets


def _ratio(agent: float | None, reference: float | None) -> float | None:
    """agent / reference, defined when both exist and reference > 0."""
    ok = agent is not None and reference is not None and reference > 0
    return agent / reference if ok else None


def run_figures(summary: dict) -> dict:
    """The gate's figures of one main-job summary: per fold and stitched test Sharpes."""
    folds = []
    for f in summary["folds"]:
        agent, oracle = f.get("test_sharpe"), f.get("oracle_test_sharpe")
        ridge = f.get("baseline_test_sharpes", {}).get("ridge")
        folds.append({"fold": f["fold"], "agent": agent, "oracle": oracle,
                      "oracle_ratio": _ratio(agent, oracle), "ridge": ridge,
                      "ridge_ratio": _ratio(agent, ridge)})
    agent, oracle = summary["stitched_test_sharpe"], summary.get("stitched_oracle_test_sharpe")
    return {"folds": folds, "stitched": {
        "agent": agent, "buy_and_hold": summary["stitched_buy_and_hold_test_sharpe"],
        "oracle": oracle, "oracle_ratio": _ratio(agent, oracle),
        "dsr": summary.get("headline", {}).get("dsr")}}


def check_goals(runs: list[dict], limits: dict[str, float]) -> dict[str, dict]:
    """Each goal's rule, status (PASS, FAIL, n/a, not run) and misses, over `runs` (each
    {market, run, folds, stitched} as from `run_figures`)."""
    planted = [r for r in runs if r["market"] not in NULL_MARKETS]
    sizing = [r for r in runs if r["market"] in SIZING_MARKETS]
    null = [r for r in runs if r["market"] in NULL_MARKETS]
    goals = {
        "fold_oracle": (f"agent / oracle test Sharpe ≥ {limits['oracle_floor']} in every fold "
                        "of every planted market (oracle ≤ 0: ratio undefined, the fold fails)",
                        planted, []),
        "fold_ridge": (f"agent / ridge test Sharpe ≥ {limits['ridge_floor']} in every fold of "
                       "every planted market where ridge > 0 (no ridge baseline: n/a)",
                       planted, []),
        "sizing_vs_buy_and_hold": ("vol_regime: stitched agent Sharpe > stitched buy-and-hold",
                                   sizing, []),
        "sizing_vs_oracle": (f"vol_regime: stitched agent / sizing oracle Sharpe ≥ "
                             f"{limits['sizing_floor']} (oracle ≤ 0: undefined, fails)",
                             sizing, []),
        "null_dsr": (f"random_walk: stitched DSR < {limits['dsr_max']}", null, []),
    }
    ridge_seen = False
    for r in planted:
        where = f"{r['market']} run {r['run']}"
        for f in r["folds"]:
            at = f"{where} fold {f['fold']}"
            if f["agent"] is None:
                goals["fold_oracle"][2].append(f"{at}: no test figure (fold stopped)")
            elif f["oracle_ratio"] is None:
                goals["fold_oracle"][2].append(
                    f"{at}: ratio undefined (oracle {_num(f['oracle'], '+.3f')} ≤ 0)")
            elif f["oracle_ratio"] < limits["oracle_floor"]:
                goals["fold_oracle"][2].append(f"{at}: agent / oracle {f['oracle_ratio']:.3f}")
            if f["ridge"] is not None:
                ridge_seen = True
                low = f["ridge_ratio"] is not None and f["ridge_ratio"] < limits["ridge_floor"]
                if f["agent"] is None or low:
                    goals["fold_ridge"][2].append(f"{at}: agent / ridge "
                                                  f"{_num(f['ridge_ratio'], '.3f')}")
    for r in sizing:
        s, at = r["stitched"], f"{r['market']} run {r['run']}"
        if s["agent"] is None or not s["agent"] > s["buy_and_hold"]:
            goals["sizing_vs_buy_and_hold"][2].append(
                f"{at}: agent {_num(s['agent'], '+.3f')}, buy-and-hold "
                f"{_num(s['buy_and_hold'], '+.3f')}")
        if s["oracle_ratio"] is None or s["oracle_ratio"] < limits["sizing_floor"]:
            goals["sizing_vs_oracle"][2].append(
                f"{at}: agent {_num(s['agent'], '+.3f')}, oracle {_num(s['oracle'], '+.3f')}")
    for r in null:
        dsr = r["stitched"]["dsr"]
        if dsr is None or not dsr < limits["dsr_max"]:
            goals["null_dsr"][2].append(f"{r['market']} run {r['run']}: DSR {_num(dsr, '.3f')}")
    out = {}
    for name, (rule, covered, misses) in goals.items():
        status = "not run" if not covered else "FAIL" if misses else "PASS"
        if name == "fold_ridge" and covered and not ridge_seen:
            status = "n/a"
        out[name] = {"rule": rule, "status": status, "misses": misses}
    return out


def _num(x: float | None, fmt: str) -> str:
    return "n/a" if x is None or not math.isfinite(x) else format(x, fmt)


def print_tables(runs: list[dict]) -> None:
    """Per market, run and fold: agent, oracle, agent / oracle, ridge, agent / ridge; then the
    stitched figures per market and run."""
    print(f"{'market':<12} {'run':>3} {'fold':>4} {'agent':>7} {'oracle':>7} {'a/o':>6} "
          f"{'ridge':>7} {'a/r':>6}")
    for r in runs:
        for f in r["folds"]:
            print(f"{r['market']:<12} {r['run']:>3} {f['fold']:>4} {_num(f['agent'], '+.3f'):>7} "
                  f"{_num(f['oracle'], '+.3f'):>7} {_num(f['oracle_ratio'], '.2f'):>6} "
                  f"{_num(f['ridge'], '+.3f'):>7} {_num(f['ridge_ratio'], '.2f'):>6}")
    print(f"{'stitched':<12} {'run':>3} {'agent':>7} {'b&h':>7} {'oracle':>7} {'a/o':>6} "
          f"{'DSR':>6}")
    for r in runs:
        s = r["stitched"]
        print(f"{r['market']:<12} {r['run']:>3} {_num(s['agent'], '+.3f'):>7} "
              f"{_num(s['buy_and_hold'], '+.3f'):>7} {_num(s['oracle'], '+.3f'):>7} "
              f"{_num(s['oracle_ratio'], '.2f'):>6} {_num(s['dsr'], '.3f'):>6}")


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    parser = build_gate_parser(prog)
    args = parser.parse_args(argv)
    try:
        from rl_trader.rundir import check_run_dir, write_json

        markets = check_options(args, parser.parse_args([]))
        enable_compilation_cache()
        import jax

        jax.config.update("jax_debug_nans", bool(args.debug_nans))
        base = config_from_args(argparse.Namespace(**{**vars(args), "data.path": None}))
        from rl_trader.devices import describe_device
        from rl_trader.experiment import run_experiment
        from rl_trader.prepare import prepare

        parent = Path(args.run_dir or f"runs/{time.strftime('%Y%m%d-%H%M%S')}-convergence")
        out = Path(args.out) if args.out else parent / "gate.json"
        if args.out and not out.parent.is_dir():
            raise InputError(f"option --out={args.out!r}: directory '{out.parent}' does not "
                             "exist")
        if out.exists() and not args.overwrite:
            raise InputError(f"option --out: '{out}' already exists: pass --overwrite to "
                             "replace it or choose another --out")
        jobs = []  # every market and run prepared first: bad options fail before any training
        for market in markets:
            for k in range(args.runs):
                data = dataclasses.replace(
                    base.data, path=f"synthetic:{market}:{args.bars}:{GATE_SEED_BASE + k}")
                cfg = dataclasses.replace(base, seed=base.seed + k, data=data)
                run_dir = parent / f"{market}-run{k}"
                check_run_dir(run_dir, args.overwrite)
                jobs.append((market, k, prepare(cfg), run_dir))
        print(f"convergence gate: markets {', '.join(markets)}; {args.runs} run(s) each, data "
              f"seeds {GATE_SEED_BASE}…{GATE_SEED_BASE + args.runs - 1}; "
              f"preset {args.preset or 'default'}, "
              f"{base.folds.n_folds} folds, {args.bars} bars; {describe_device()}; run dirs "
              f"under {parent}", flush=True)
        runs = []
        for market, k, prep, run_dir in jobs:
            print(f"== {market} run {k}: {prep.cfg.data.path}, run seed {prep.cfg.seed}",
                  flush=True)
            summary = run_experiment(prep, run_dir, overwrite=args.overwrite,
                                     log=lambda line: print(line, flush=True),
                                     devices=args.devices)
            runs.append({"market": market, "run": k, "data": prep.cfg.data.path,
                         "data_seed": GATE_SEED_BASE + k, "run_seed": prep.cfg.seed,
                         "run_dir": str(run_dir), **run_figures(summary)})
            print_tables(runs[-1:])
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    limits = {name: getattr(args, name)
              for name in ("oracle_floor", "ridge_floor", "sizing_floor", "dsr_max")}
    goals = check_goals(runs, limits)
    print("\nagent / oracle and agent / ridge are ratios of test Sharpes; a ratio is n/a when "
          "the reference is ≤ 0 or absent (agent / oracle n/a fails a planted market's fold)")
    print_tables(runs)
    for name, g in goals.items():
        print(f"{g['status']}: {name}: {g['rule']}")
        for miss in g["misses"]:
            print(f"    {miss}")
    passed = all(g["status"] != "FAIL" for g in goals.values())
    write_json(out, {"passed": passed, "goals": goals, "limits": limits,
                     "markets": markets, "runs_per_market": args.runs, "bars": args.bars,
                     "preset": args.preset or "default", "folds": base.folds.n_folds,
                     "gate_seed_base": GATE_SEED_BASE, "device": describe_device(),
                     "runs": runs})
    print(f"{'PASS' if passed else 'FAIL'}: the convergence gate; figures in {out}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
