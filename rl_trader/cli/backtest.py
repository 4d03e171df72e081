"""Score a saved run's policy on a new bar file beside the baselines; nothing is re-trained.

    rl-trader backtest RUN_DIR BARS_FILE --out DIR [--fold K]
    rl-trader backtest --run-dir RUN_DIR --data BARS_FILE --out DIR [...]  (the same)

The last fold's ensemble (or fold K) at its best epoch acts on the whole file after the
features' warm-up and the look-back window, starting flat, through the same env and costs.
Writes DIR/summary.json, DIR/fold_<k>/test_returns.npz and DIR/report.html; RUN_DIR is only
read. Exit codes: 0 done, 2 bad input (run directory, bar file or option), 1 anything else.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rl_trader.cli.options import Parser, add_run_and_bars, run_and_bars
from rl_trader.errors import InputError

if TYPE_CHECKING:
    from rl_trader.evaluation.record import RunSummary

PROG = "rl-trader backtest"  # in help and errors


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = Parser(
        prog=prog,
        usage=f"{prog} RUN_DIR BARS_FILE --out DIR [--fold K]\n"
              f"       {prog} --run-dir RUN_DIR --data BARS_FILE --out DIR [--fold K]",
        description="Backtest a finished run's policy on BARS_FILE (e.g. the months after its "
                    "data ended) beside buy-and-hold, flat, momentum and random, costs on. "
                    "RUN_DIR is only read.")
    add_run_and_bars(p, "OHLCV bars (CSV, CSV.gz or Parquet)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="new or empty output directory, outside RUN_DIR")
    p.add_argument("--fold", type=int, default=None, metavar="K",
                   help="use fold K's ensemble (default: the last fold)")
    return p


def print_backtest(summary: RunSummary) -> None:
    """Every strategy's metrics on the backtest bars, then PSR (rich)."""
    from rich.console import Console
    from rich.table import Table

    from rl_trader.report.writer import METRICS, num

    console = Console(width=max(140, Console().width))
    table = Table(title=f"backtest of fold {summary.fold}: {summary.first_date} … "
                        f"{summary.last_date}, costs on")
    table.add_column("strategy", no_wrap=True)
    for _, title, _ in METRICS:
        table.add_column(title, justify="right")
    for name, m in summary.stitched.items():
        table.add_row(name, *(num(getattr(m, key), spec) for key, _, spec in METRICS))
    console.print(table)
    head = summary.headline
    console.print(f"agent Sharpe {num(head.stitched_test_sharpe)} over "
                  f"{head.n_test_bars} bars: PSR {num(head.psr, '.3f')}")
    if summary.bars_seen_in_training:
        console.print(f"[bold]note[/]: {summary.bars_seen_in_training} of these bars are on "
                      "or before the end of the fold's validation block (seen in training)")


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    run_dir, bars_file = run_and_bars(parser, args)
    from rl_trader.data import load
    from rl_trader.run.inference import backtest, backtest_out_dir, load_policy, write_backtest

    try:
        backtest_out_dir(args.out, run_dir)  # before the work, not after it
        policy = load_policy(run_dir, args.fold)
        bars = load(bars_file)
        summary, policies, rand, priors = backtest(policy, bars)
        out = write_backtest(args.out, run_dir, summary, policies, rand, priors,
                             bars.dates[policy.start:])
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print_backtest(summary)
    print(out / "summary.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
