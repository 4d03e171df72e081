"""Studies 34–36: `vol_target` as a rival of the chosen epoch on validation, from finished
runs.

    python -m experiments.rival_study RUN_DIR [RUN_DIR ...] [--rival-t T [--pooled] [--train]]
        [--base-rival-t T0] [--out FILE]

Each RUN_DIR is a finished main-job run (`--rival off`) whose summary records each fold's
`vol_target_val_sharpe` (and, for --rival-t > 0, `vol_target_val_edge_t`). Per fold, `rival`
acts as `vol_target` on test where `selection.rival_wins` says so, as `--rival vol_target`
does, or (study 35's design, not an option: --rival-t T > 0) where the t of the agent's
validation edge over it (`metrics.edge_t`) is below T; else as the agent. With --pooled
(study 36's design, not an option either) fold k's t is taken over the validation blocks of
folds 0 … k joined in order, each traded by its own fold's chosen epoch (the folds'
`val_returns.npz`), all of them before fold k's test block. With --train (study 37's design)
the agent is also kept where the gbm forecast's edge t on fold k's train segment reaches T
(`experiments.train_evidence`, RUN_DIR/train_evidence.json). Nothing else differs from the
run, so `rival`'s returns are read from the folds' `test_returns.npz` (columns `agent` and
`vol_target`). `base` is the run itself (the agent in every fold), or with --base-rival-t
T0 the rival design at T0. Its headline (DSR, SPA) is computed again with one more trial a
fold (the rival's validation Sharpe, looked at in the choice); PBO is left out (the trial
matrix is not saved).

Prints per run the stitched test Sharpe of both designs, their difference, the folds that
switched and the rival's t per fold;
runs named MARKET-run<k> (the gate's, `experiments.convergence`) are also judged by the gate's
goals for both designs, and the planted markets' paired differences summarised. Writes the
figures as JSON to --out (default: print only).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import numpy as np

from experiments.convergence import (
    DSR_MAX,
    FAMILY,
    FLOORS,
    NO_DIRECTION_MARKETS,
    NULL_MARKETS,
    SPA_MIN,
    check_goals,
    run_figures,
)
from experiments.train_evidence import EVIDENCE_FILE
from rl_trader.baselines.suite import BASELINES
from rl_trader.errors import InputError
from rl_trader.evaluation.headline import headline
from rl_trader.evaluation.metrics import edge_t, sharpe_of
from rl_trader.evaluation.record import RunSummary, to_json
from rl_trader.evaluation.selection import rival_wins
from rl_trader.report.writer import load_summary
from rl_trader.run.scoring import rival_trials

GATE_RUN = re.compile(rf"^({'|'.join(FAMILY)})-run(\d+)$")


def pooled_edges(run_dir: Path, folds: list[dict]) -> list[float]:
    """Per fold k of `folds` (in order), the t of the agent's Sharpe edge over `vol_target`
    (`metrics.edge_t`) on the validation blocks of folds 0 … k joined, each block's returns
    those its own fold chose (`val_returns.npz`); NaN where the spread is 0."""
    agent, vol = [], []
    edges = []
    for f in folds:
        if "val_returns_file" not in f:
            raise InputError(f"{run_dir}/summary.json: no val_returns_file (a run from before "
                             "study 36's code)")
        with np.load(run_dir / f["val_returns_file"]) as z:
            agent.append(z["agent"])
            vol.append(z["vol_target"])
        edges.append(edge_t(np.concatenate(agent), np.concatenate(vol)))
    return edges


def train_edges(run_dir: Path, folds: list[dict]) -> list[float | None]:
    """Per fold of `folds`, the gbm forecast's train edge t that `experiments.train_evidence`
    wrote (None: no spread)."""
    path = run_dir / EVIDENCE_FILE
    try:
        saved = {f["fold"]: f["gbm_train_edge_t"]
                 for f in json.loads(path.read_text(encoding="utf-8"))["folds"]}
    except (OSError, ValueError, KeyError) as err:
        raise InputError(f"{path}: no train evidence ({err}); run "
                         "`python -m experiments.train_evidence` on the run first") from None
    missing = [f["fold"] for f in folds if f["fold"] not in saved]
    if missing:
        raise InputError(f"{path}: no train evidence for folds {missing}")
    return [saved[f["fold"]] for f in folds]


def _finite(t: float | None) -> float | None:
    return t if t is not None and math.isfinite(t) else None


def rival_summary(run_dir: Path, summary: dict, min_t: float = 0.0, pooled: bool = False,
                  train: bool = False) -> tuple[dict, list[int]]:
    """`rival`'s summary (the run's, with each fold's and the stitched test Sharpe, the folds'
    agent metrics and the headline of the switched returns; the stitched agent's other
    metrics left out) and the indices of the folds that act as `vol_target`. `min_t` > 0: a
    fold also needs an edge t ≥ `min_t`, its own block's (`vol_target_val_edge_t`) or with
    `pooled` that of the blocks so far (`pooled_edges`), or with `train` the gbm forecast's
    train edge t (`train_edges`): the larger of the two counts.
    Refused (InputError) for a run without `vol_target_val_sharpe` or whose saved agent returns
    do not give its own stitched Sharpe."""
    ppy = float(summary["periods_per_year"])
    folds = [dict(f) for f in summary["folds"]]
    scored = [k for k, f in enumerate(folds) if f.get("test_sharpe") is not None]
    if not scored:
        raise InputError(f"{run_dir}: no fold was scored")
    if summary["config"]["train"].get("rival", "off") != "off":
        raise InputError(f"{run_dir}: a run with --rival on, whose folds already act as "
                         "their rival: the study reads runs with --rival off")
    for key, study in (("vol_target_val_sharpe", 34), ("vol_target_val_edge_t", 35)):
        if (key == "vol_target_val_sharpe" or min_t > 0) and any(key not in folds[k]
                                                                 for k in scored):
            raise InputError(f"{run_dir}/summary.json: no {key} (a run from before study "
                             f"{study}'s code)")
    tests = [np.load(run_dir / folds[k]["returns_file"]) for k in scored]
    base = np.concatenate([t["agent"] for t in tests])
    if not math.isclose(sharpe_of(base, ppy), summary["stitched_test_sharpe"], rel_tol=1e-9,
                        abs_tol=1e-12):
        raise InputError(f"{run_dir}: the folds' saved agent returns do not give the summary's "
                         "stitched test Sharpe")
    edges = [_finite(t) for t in (pooled_edges(run_dir, [folds[k] for k in scored])
                                  if pooled and min_t > 0
                                  else [folds[k].get("vol_target_val_edge_t") for k in scored])]
    trains = (train_edges(run_dir, [folds[k] for k in scored]) if train and min_t > 0
              else [None] * len(scored))
    switched, chosen = [], []
    for k, t, edge, train_t in zip(scored, tests, edges, trains, strict=True):
        # studies 35–37: with min_t > 0 the agent also needs evidence of t ≥ min_t
        best = max((e for e in (edge, train_t) if e is not None), default=None)
        use = (rival_wins(folds[k]["vol_target_val_sharpe"], folds[k]["val_sharpe"])
               or (min_t > 0 and not (best is not None and best >= min_t)))
        switched += [k] if use else []
        folds[k]["rival_edge_t"], folds[k]["rival_train_edge_t"] = edge, train_t
        chosen.append(t["vol_target" if use else "agent"])
        folds[k]["test_sharpe"] = sharpe_of(chosen[-1], ppy)
        if use:
            folds[k]["acts_as"] = "vol_target"
            folds[k]["metrics"] = {**folds[k]["metrics"],
                                   "agent": folds[k]["metrics"]["vol_target"]}
    stitched = np.concatenate(chosen)
    cfg = summary["config"]
    trials = summary["trials"] + rival_trials(
        [(folds[k]["fold"], folds[k]["vol_target_val_sharpe"]) for k in scored], "vol_target")
    head = to_json(headline(stitched, trials, [], ppy,
                            {n: np.concatenate([t[n] for t in tests]) for n in BASELINES},
                            cfg["seed"], [folds[k]["test_sharpe"] for k in scored],
                            cfg["train"]["prior_trials"]))
    stitched_metrics = {n: m for n, m in summary["stitched"].items() if n != "agent"}
    return ({**summary, "folds": folds, "stitched_test_sharpe": head["stitched_test_sharpe"],
             "geo_mean_test_sharpe": head["geo_mean_test_sharpe"], "headline": head,
             "stitched": stitched_metrics}, switched)  # the agent's other metrics: not computed


def _record(summary: dict) -> RunSummary:
    """A study summary (its folds' `rival_*` figures aside) as a run record."""
    folds = [{k: v for k, v in f.items() if not k.startswith("rival_")} for f in summary["folds"]]
    return RunSummary.from_json({**summary, "folds": folds}, "the study's summary")


def _ts(ts: list[float | None]) -> str:
    return " ".join("n/a" if t is None else f"{t:+.2f}" for t in ts)


def _mean_se(xs: list[float]) -> tuple[float, float]:
    a = np.asarray(xs, np.float64)
    return float(a.mean()), float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else math.nan


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.rival_study",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    p.add_argument("--rival-t", type=float, default=0.0, metavar="T",
                   help="study 35's t floor (default 0: study 34's rule alone)")
    p.add_argument("--pooled", action="store_true",
                   help="study 36: fold k's t over the validation blocks of folds 0 … k")
    p.add_argument("--train", action="store_true",
                   help="study 37: the gbm forecast's train edge t counts too")
    p.add_argument("--base-rival-t", type=float, default=None, metavar="T0",
                   help="`base` is the rival design at this t floor (default: the run)")
    p.add_argument("--out", type=Path, default=None, help="write the figures here (JSON)")
    args = p.parse_args(argv)
    rows, gate = [], {"base": [], "rival": []}
    try:
        for run_dir in args.run_dirs:
            summary = load_summary(run_dir).to_json()
            rival, switched = rival_summary(run_dir, summary, args.rival_t, args.pooled,
                                            args.train)
            vt = summary["stitched"]["vol_target"]["sharpe"]
            base, base_switched = (rival_summary(run_dir, summary, args.base_rival_t)
                                   if args.base_rival_t is not None else (summary, []))
            row = {"run_dir": str(run_dir), "base": base["stitched_test_sharpe"],
                   "base_switched_folds": base_switched,
                   "rival": rival["stitched_test_sharpe"], "vol_target": vt,
                   "buy_and_hold": summary["stitched_buy_and_hold_test_sharpe"],
                   "switched_folds": switched, "n_folds": len(summary["folds"]),
                   "edge_t": [f.get("rival_edge_t") for f in rival["folds"]],
                   "train_edge_t": [f.get("rival_train_edge_t") for f in rival["folds"]],
                   "rival_dsr": rival["headline"]["dsr"],
                   "rival_spa": (rival["headline"]["spa"] or {}).get("p_agent_beats_all")}
            row["delta"] = row["rival"] - row["base"]
            rows.append(row)
            m = GATE_RUN.match(run_dir.name)
            if m:
                for name, s in (("base", base), ("rival", rival)):
                    gate[name].append({"market": m[1], "run": int(m[2]),
                                       **run_figures(_record(s))})
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{'run':<28} {'base':>7} {'rival':>7} {'Δ':>7} {'vol_t':>7} {'b&h':>7} "
          "switched (base → rival)")
    for r in rows:
        print(f"{Path(r['run_dir']).name:<28} {r['base']:+7.3f} {r['rival']:+7.3f} "
              f"{r['delta']:+7.3f} {r['vol_target']:+7.3f} {r['buy_and_hold']:+7.3f} "
              f"{r['base_switched_folds']} → {r['switched_folds']} of {r['n_folds']}"
              + (f"  t {_ts(r['edge_t'])}" if args.rival_t > 0 else "")
              + (f"  train t {_ts(r['train_edge_t'])}" if args.train else ""))
    deltas = [r["delta"] for r in rows]
    mean, se = _mean_se(deltas)
    print(f"all {len(rows)} runs: Δ {mean:+.3f} ± {se:.3f}, > 0 in "
          f"{sum(d > 0 for d in deltas)}, < 0 in {sum(d < 0 for d in deltas)}")
    out = {"runs": rows, "delta_mean": mean, "delta_se": se}
    if gate["base"]:
        limits = {**{k: v[0] for k, v in FLOORS.items()}, "dsr_max": DSR_MAX,
                  "spa_min": SPA_MIN}
        goals = {name: check_goals(runs, limits) for name, runs in gate.items()}
        unplanted = (*NULL_MARKETS, *NO_DIRECTION_MARKETS)
        planted = [r["delta"] for r in rows
                   if (m := GATE_RUN.match(Path(r["run_dir"]).name)) and m[1] not in unplanted]
        pm, ps = _mean_se(planted) if planted else (math.nan, math.nan)
        print(f"planted pairs: {len(planted)}, Δ {pm:+.3f} ± {ps:.3f}")
        for name in goals["base"]:
            b, r = goals["base"][name], goals["rival"][name]
            print(f"{name:<22} base {b['status']:<7} rival {r['status']:<7} "
                  f"misses {len(b['misses'])} → {len(r['misses'])}")
        out.update({"goals": goals, "planted_delta_mean": pm, "planted_delta_se": ps,
                    "n_planted": len(planted)})
    if args.out:
        args.out.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
