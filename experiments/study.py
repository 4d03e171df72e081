"""Summarise learner-study sweeps: out-of-sample selection and collapse, per run directory.

    python -m experiments.study RUN_DIR [RUN_DIR ...] [--cuts 5,20] [--out study.json]
                                [--against BASE_DIR [BASE_DIR ...]]

Each RUN_DIR is an `experiments.sweep` run on a planted-signal market (it holds
`validation_returns.npz`, [epoch, ensemble, bar], and `oracle_val_returns.npy`, [fold, bar]).
Per ensemble (fold × setting) it prints:

- `split@E`: the split-half agent / oracle ratio (`experiments.sweep.split_half_ratio`) when
  the epoch is chosen among the first E epochs only, so one long run also answers "what would
  E epochs have given" (the first E epochs of a longer run are the same programs and draws,
  except the ε schedule, which decays over the whole run);
- `last/best`: validation Sharpe of the last epoch over the best epoch's (collapse: 1 is none);
- `sharpe@E`: the numerator of `split@E`, the agent's Sharpe on the half it was not chosen on
  (mean of both directions), and beside it `oracle` and `buy_hold`, their Sharpes on the same
  halves (mean of both). On markets whose oracle Sharpe on a half can be near zero (the
  volatility regime's), the ratio is unstable and these differences are what to read.
  `buy_hold` needs `buy_hold_val_returns.npy`, written by sweeps since 2026-11-30;
  `ridge` (the ridge baseline on the same halves) needs `ridge_val_returns.npy`;
- `ic`: the information coefficient of the agent's forecast on validation (the aux head's,
  `forecast_ic` in summary.json) at the best validation epoch among the first E (largest cut;
  sweeps of one setting only), and `ridge_ic`, ridge's (`ridge_val_ic.npy`, since
  2026-12-01).

and the means over every ensemble of every RUN_DIR given, which is what a study's rule reads.

`--against` pairs each ensemble with the reference's ensemble of the same traded instrument,
run seed, fold and setting, and prints the paired difference of the gap to buy-and-hold at the
largest cut E, Δ = (sharpe@E − buy_hold) − (sharpe@E − buy_hold)_ref: its mean, its standard
error s/√n, the mean in standard errors, and in how many pairs it is > 0 (the rules of
docs/studies/ read these); the same for the forecast's `ic` where both have it. Where the
rows have `ic` and `ridge_ic`, the paired `ic − ridge_ic` is printed too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from experiments.sweep import split_half_picks, split_half_ratio
from rl_trader.errors import InputError
from rl_trader.evaluation.metrics import sharpe
from rl_trader.evaluation.selection import best_of
from rl_trader.report.writer import load_summary


def study_rows(run_dir: Path, cuts: list[int], ppy: float) -> list[dict]:
    """One row per ensemble of the sweep in `run_dir` (see the module docstring)."""
    try:
        val = np.load(run_dir / "validation_returns.npz")
        oracle = np.load(run_dir / "oracle_val_returns.npy")
    except OSError as err:
        raise InputError(f"{run_dir}: not a finished sweep on a synthetic market ({err})") from None
    returns = val["val_returns"]  # [epoch, ensemble, bar]
    buy_hold, ridge, ridge_ic = (np.load(run_dir / name) if (run_dir / name).exists() else None
                                 for name in ("buy_hold_val_returns.npy", "ridge_val_returns.npy",
                                              "ridge_val_ic.npy"))
    summary = load_summary(run_dir)
    # per-epoch diagnostics are the fold's best ensemble's: an ensemble's own with one setting
    epochs = ({f.fold: f.epochs for f in summary.folds}
              if len(summary.settings or []) == 1 else None)
    rows = []
    for g, (fold, setting) in enumerate(zip(val["fold"], val["setting"], strict=True)):
        curve = np.array([float(sharpe(r, ppy)) for r in returns[:, g]])
        row = {"run": run_dir.name, "fold": int(fold), "setting": int(setting),
               "val_sharpe": curve.round(3).tolist(),
               "last_over_best": float(curve[-1] / curve.max()) if curve.max() > 0 else None}
        for cut in cuts:
            if cut <= len(curve):
                row[f"split@{cut}"] = split_half_ratio(returns[:cut, g], oracle[fold], ppy)
                row[f"sharpe@{cut}"] = halves_sharpe(returns[:cut, g], ppy)
        row["oracle"] = halves_sharpe(oracle[fold][None], ppy)
        row["buy_hold"] = None if buy_hold is None else halves_sharpe(buy_hold[fold][None], ppy)
        row["ridge"] = None if ridge is None else halves_sharpe(ridge[fold][None], ppy)
        first = [] if epochs is None else epochs.get(int(fold), [])[:max(cuts)]
        ics = [e.get("forecast_ic") for e in first]
        ic = ics[best_of(range(len(first)), [e["val_sharpe"] for e in first])] if ics else None
        row["ic"] = None if ic is None else float(ic)  # at the epoch the run's own rule chose
        row["ridge_ic"] = None if ridge_ic is None else float(ridge_ic[fold])
        rows.append(row)
    return rows


def halves_sharpe(returns: np.ndarray, ppy: float) -> float:
    """Sharpe of the epoch chosen on one half of `returns` [epoch, bar], scored on the other
    half; the mean of both directions (one epoch: its Sharpe on each half, averaged)."""
    return float(np.mean([float(sharpe(returns[best, score], ppy))
                          for best, score in split_half_picks(returns, ppy)]))


def pair_key(run_dir: Path) -> tuple[str, int]:
    """(traded instrument, run seed) of a sweep, from its summary.json: what a paired
    comparison holds fixed besides the fold and setting."""
    try:
        cfg = load_summary(run_dir).config
        return cfg["data"]["path"].split(",")[0], int(cfg["seed"])
    except (KeyError, TypeError) as err:
        raise InputError(f"{run_dir}/summary.json: no config.data.path or config.seed "
                         f"({err!r})") from None


def paired_gap(rows: list[dict], ref: list[dict], cut: int) -> dict:
    """Paired Δ of the gap sharpe@cut − buy_hold between `rows` and `ref` (rows carry a
    "key" = pair_key + (fold, setting)); every row must have its reference."""
    key = f"sharpe@{cut}"
    return paired(rows, ref, lambda r: r[key] - r["buy_hold"]) | {"cut": cut}


def paired(rows: list[dict], ref: list[dict] | None, value) -> dict:
    """Mean, standard error s/√n, mean in standard errors and count > 0 of the paired
    differences d = value(row) − value(its reference in `ref`), or d = value(row) when `ref`
    is None; every row must have its reference."""
    base = None if ref is None else {r["key"]: value(r) for r in ref}
    missing = [] if base is None else [r["run"] for r in rows if r["key"] not in base]
    if missing:
        raise InputError(f"--against: no reference ensemble for {missing[0]} "
                         f"(same instrument, seed, fold and setting)")
    d = np.array([value(r) - (0.0 if base is None else base[r["key"]]) for r in rows])
    se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")
    return {"n": len(d), "mean": float(d.mean()), "se": se,
            "in_se": float(d.mean() / se) if se > 0 else float("nan"),
            "better": int((d > 0).sum())}


def _rows(run_dirs: list[str], cuts: list[int]) -> list[dict]:
    rows = []
    for d in map(Path, run_dirs):
        ppy = load_summary(d).periods_per_year
        found = study_rows(d, cuts, float(ppy))
        key = pair_key(d)
        rows += [r | {"key": (*key, r["fold"], r["setting"])} for r in found]
    return rows


def _mean(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return float(np.mean(vals)) if vals else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.study",
                                description="Split-half ratio by epoch budget and collapse "
                                            "ratio of learner-study sweep run directories.")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--cuts", default="5,20", help="epoch budgets E of split@E (default 5,20)")
    p.add_argument("--out", default=None, help="JSON output path")
    p.add_argument("--against", nargs="+", default=None, metavar="BASE_DIR",
                   help="reference sweeps: print the paired difference of the gap to "
                        "buy-and-hold at the largest cut")
    args = p.parse_args(argv)
    try:
        cuts = [int(c) for c in args.cuts.split(",")]
        rows = _rows(args.run_dirs, cuts)
        ref = None if args.against is None else _rows(args.against, cuts)
        paired_sharpe = None if ref is None else paired_gap(rows, ref, max(cuts))
        has_ic = all(r["ic"] is not None for r in rows)
        ic_ridge = (paired(rows, None, lambda r: r["ic"] - r["ridge_ic"])
                    if has_ic and all(r["ridge_ic"] is not None for r in rows) else None)
        ic_ref = (paired(rows, ref, lambda r: r["ic"]) if has_ic and ref is not None
                  and all(r["ic"] is not None for r in ref) else None)
    except (InputError, OSError, ValueError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    keys = ([f"split@{c}" for c in cuts] + ["last_over_best"] + [f"sharpe@{c}" for c in cuts]
            + ["oracle", "buy_hold", "ridge", "ic", "ridge_ic"])
    for r in rows:
        print(f"{r['run']:<40} fold {r['fold']} setting {r['setting']}  " + "  ".join(
            f"{k} {r[k]:.2f}" if r.get(k) is not None else f"{k} n/a" for k in keys))
    means = {k: _mean(rows, k) for k in keys}
    print("mean over ensembles: " + "  ".join(
        f"{k} {v:.3f}" if v is not None else f"{k} n/a" for k, v in means.items()))
    for name, p in ((f"Δ gap@{max(cuts)} vs --against", paired_sharpe),
                    ("Δ ic vs --against", ic_ref), ("ic − ridge_ic", ic_ridge)):
        if p is not None:
            print(f"paired {name}: {p['mean']:+.3f} ± {p['se']:.3f} ({p['in_se']:.2f} SE), "
                  f"> 0 in {p['better']} / {p['n']}")
    if args.out:
        out = {"rows": [r | {"key": list(r["key"])} for r in rows], "means": means}
        for name, p in (("paired_gap", paired_sharpe), ("paired_ic", ic_ref),
                        ("ic_minus_ridge_ic", ic_ridge)):
            if p is not None:
                out[name] = p
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
