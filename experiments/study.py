"""Summarise learner-study sweeps: out-of-sample selection and collapse, per run directory.

    python -m experiments.study RUN_DIR [RUN_DIR ...] [--cuts 5,20] [--out study.json]

Each RUN_DIR is an `experiments.sweep` run on a planted-signal market (it holds
`validation_returns.npz`, [epoch, ensemble, bar], and `oracle_val_returns.npy`, [fold, bar]).
Per ensemble (fold × setting) it prints:

- `split@E`: the split-half agent / oracle ratio (`experiments.sweep.split_half_ratio`) when
  the epoch is chosen among the first E epochs only, so one long run also answers "what would
  E epochs have given" (the first E epochs of a longer run are the same programs and draws,
  except the ε schedule, which decays over the whole run);
- `last/best`: validation Sharpe of the last epoch over the best epoch's (collapse: 1 is none).

and the means over every ensemble of every RUN_DIR given, which is what a study's rule reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from experiments.sweep import split_half_ratio
from rl_trader.errors import InputError
from rl_trader.metrics import sharpe


def study_rows(run_dir: Path, cuts: list[int], ppy: float) -> list[dict]:
    """One row per ensemble of the sweep in `run_dir` (see the module docstring)."""
    try:
        val = np.load(run_dir / "validation_returns.npz")
        oracle = np.load(run_dir / "oracle_val_returns.npy")
    except OSError as err:
        raise InputError(f"{run_dir}: not a finished sweep on a synthetic market ({err})") from None
    returns = val["val_returns"]  # [epoch, ensemble, bar]
    rows = []
    for g, (fold, setting) in enumerate(zip(val["fold"], val["setting"], strict=True)):
        curve = np.array([float(sharpe(r, ppy)) for r in returns[:, g]])
        row = {"run": run_dir.name, "fold": int(fold), "setting": int(setting),
               "val_sharpe": curve.round(3).tolist(),
               "last_over_best": float(curve[-1] / curve.max()) if curve.max() > 0 else None}
        for cut in cuts:
            if cut <= len(curve):
                row[f"split@{cut}"] = split_half_ratio(returns[:cut, g], oracle[fold], ppy)
        rows.append(row)
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
    args = p.parse_args(argv)
    try:
        cuts = [int(c) for c in args.cuts.split(",")]
        rows = []
        for d in args.run_dirs:
            ppy = json.loads((Path(d) / "summary.json").read_text())["periods_per_year"]
            rows += study_rows(Path(d), cuts, float(ppy))
    except (InputError, OSError, ValueError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    keys = [f"split@{c}" for c in cuts] + ["last_over_best"]
    for r in rows:
        print(f"{r['run']:<40} fold {r['fold']} setting {r['setting']}  " + "  ".join(
            f"{k} {r[k]:.2f}" if r.get(k) is not None else f"{k} n/a" for k in keys))
    means = {k: _mean(rows, k) for k in keys}
    print("mean over ensembles: " + "  ".join(
        f"{k} {v:.3f}" if v is not None else f"{k} n/a" for k, v in means.items()))
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "means": means}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
