"""The runs under a directory side by side, from their summary.json files (nothing recomputed).

    rl-trader runs [RUNS_DIR] [--sort KEY] [--reverse] [--json]

One row per run directory directly under RUNS_DIR (default runs/): its status, when it finished,
data, preset, epochs and folds, the stitched test Sharpe of the agent and of the baselines
(buy-and-hold, the random policy's mean over seeds, volatility targeting, ridge, gbm), DSR, PBO,
the SPA p for "the agent beats every baseline" and whether they show skill. Interrupted
runs are listed as incomplete, unreadable summaries as corrupt. Exit codes: 0 done, 2 bad input
(RUNS_DIR or option).
"""

from __future__ import annotations

import argparse
import json
import sys

from rl_trader.cli.options import Parser
from rl_trader.errors import InputError
from rl_trader.evaluation.verdict import SKILL_P, SKILL_PROB
from rl_trader.report.runs_table import SORT_KEYS, format_table, run_rows, sort_rows

PROG = "rl-trader runs"  # in help and errors


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = Parser(prog=prog, description=(
        "List the runs under RUNS_DIR, one row each, sorted by time: status, data, preset, "
        "epochs, folds, stitched test Sharpe of the agent and the baselines, DSR, PBO, the SPA "
        "p for 'the agent beats every baseline', and "
        f"skill (DSR, a backtest's PSR, >= {SKILL_PROB} and SPA p < {SKILL_P})."))
    p.add_argument("runs_dir", nargs="?", default="runs", metavar="RUNS_DIR",
                   help="directory holding run directories (default: runs)")
    p.add_argument("--sort", default="time", choices=SORT_KEYS, metavar="KEY",
                   help=f"column to sort by, one of {', '.join(SORT_KEYS)} (default: time; "
                        "rows without a value last)")
    p.add_argument("--reverse", action="store_true", help="sort in descending order")
    p.add_argument("--json", action="store_true", help="print the rows as a JSON list")
    return p


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    args = build_parser(prog).parse_args(argv)
    try:
        rows = run_rows(args.runs_dir)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    rows = sort_rows(rows, args.sort, args.reverse)
    if args.json:
        print(json.dumps(rows, indent=2))
    elif rows:
        print(format_table(rows))
    else:
        print(f"no runs under {args.runs_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
