"""Two designs' gate runs side by side: the paired differences of their stitched test Sharpes.

    python -m experiments.paired_gate BASE_DIR DESIGN_DIR [--out FILE]

Each DIR holds gate runs MARKET-run<k> (`experiments.convergence`, `experiments/gate_study.sh`);
the (market, run) pairs both hold are compared. Prints per pair the stitched test Sharpe of
each design, `vol_target`'s (DESIGN's run) and the difference DESIGN − BASE; then the planted
markets' (all but the null and the no-direction markets) mean difference ± one standard error
(ddof 1 over pairs) with the count above and below. Where DESIGN's folds record a prior
(`--prior vol_target`), the residual's mean |u| and the turnover it adds
(`metrics.prior_figures`, averaged over folds). Writes every figure as JSON to --out (default:
print only).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import numpy as np

from experiments.convergence import FAMILY, NO_DIRECTION_MARKETS, NULL_MARKETS
from rl_trader.errors import InputError
from rl_trader.evaluation.record import RunSummary
from rl_trader.report.writer import load_summary

GATE_RUN = re.compile(rf"^({'|'.join(FAMILY)})-run(\d+)$")


def gate_runs(directory: Path) -> dict[tuple[str, int], RunSummary]:
    """The finished gate runs under `directory`: (market, run) → summary."""
    out = {}
    for d in sorted(directory.iterdir()) if directory.is_dir() else []:
        m = GATE_RUN.match(d.name)
        if m and (d / "summary.json").is_file():
            out[(m[1], int(m[2]))] = load_summary(d)
    if not out:
        raise InputError(f"{directory}: holds no finished gate run (MARKET-run<k>/summary.json)")
    return out


def _vol_target(s: RunSummary) -> float | None:
    stitched = s.stitched or {}
    return stitched["vol_target"].sharpe if "vol_target" in stitched else None


def _prior(s: RunSummary) -> dict | None:
    """The folds' mean residual figures, None where the run had no prior."""
    figs = [f.prior for f in s.folds if f.prior and f.prior.prior != "flat"]
    if not figs:
        return None
    return {k: float(np.mean([getattr(f, k) for f in figs]))
            for k in ("prior_mean", "mean_abs_residual", "turnover_added")}


def compare(base: dict[tuple[str, int], RunSummary],
            design: dict[tuple[str, int], RunSummary]) -> dict:
    """Every figure of the comparison (module docstring)."""
    pairs = []
    for key in sorted(set(base) & set(design), key=lambda k: (FAMILY.index(k[0]), k[1])):
        b, d = base[key], design[key]
        sb, sd = b.stitched_test_sharpe, d.stitched_test_sharpe
        pairs.append({"market": key[0], "run": key[1], "base": sb, "design": sd,
                      "diff": None if sb is None or sd is None else sd - sb,
                      "vol_target": _vol_target(d), "prior": _prior(d)})
    planted = [p["diff"] for p in pairs if p["diff"] is not None
               and p["market"] not in (*NULL_MARKETS, *NO_DIRECTION_MARKETS)]
    diffs = np.asarray(planted, np.float64)
    return {"pairs": pairs, "planted": {
        "n": len(diffs), "mean": float(diffs.mean()) if len(diffs) else None,
        "se": float(diffs.std(ddof=1) / math.sqrt(len(diffs))) if len(diffs) > 1 else None,
        "above": int((diffs > 0).sum()), "below": int((diffs < 0).sum())}}


def _f(x: float | None, spec: str = "+.3f") -> str:
    return "n/a" if x is None else format(x, spec)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.paired_gate",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("base", type=Path)
    p.add_argument("design", type=Path)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    try:
        figures = compare(gate_runs(args.base), gate_runs(args.design))
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{'market':<14}{'run':>4}{'base':>9}{'design':>9}{'diff':>9}{'vol_t':>9}"
          f"{'|u|':>8}{'+turn':>8}")
    for r in figures["pairs"]:
        prior = r["prior"] or {}
        print(f"{r['market']:<14}{r['run']:>4}{_f(r['base']):>9}{_f(r['design']):>9}"
              f"{_f(r['diff']):>9}{_f(r['vol_target']):>9}"
              f"{_f(prior.get('mean_abs_residual'), '.3f'):>8}"
              f"{_f(prior.get('turnover_added'), '+.1f'):>8}")
    pl = figures["planted"]
    print(f"planted pairs: design − base {_f(pl['mean'])} ± {_f(pl['se'], '.3f')} over {pl['n']} "
          f"({pl['above']} above, {pl['below']} below)")
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
