"""The target position for the next bar, from a saved run and a bar file ending at the latest bar.

    rl-trader predict RUN_DIR BARS_FILE [--fold K] [--position F] [--json]
    rl-trader predict --run-dir RUN_DIR --data BARS_FILE [...]   (the same)

Uses the last fold's ensemble (or fold K) at its best epoch; the file's features are normalised
with the statistics saved with that fold (never re-fit). The position is decided at the close of
the file's last bar and would be filled at the next bar's open. Exit codes: 0 done, 2 bad input
(run directory, bar file or option), 1 anything else.
"""

from __future__ import annotations

import argparse
import json
import sys

from rl_trader.cli.options import Parser, add_run_and_bars, run_and_bars
from rl_trader.errors import InputError

PROG = "rl-trader predict"  # in help and errors


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = Parser(
        prog=prog,
        usage=f"{prog} RUN_DIR BARS_FILE [--fold K] [--position F] [--json]\n"
              f"       {prog} --run-dir RUN_DIR --data BARS_FILE [...]",
        description="Target position (direction, magnitude, signed fraction of equity) for the "
                    "bar after the last one in BARS_FILE, with each ensemble member's Q-values "
                    "and the VSN weights.")
    add_run_and_bars(p, "OHLCV bars (CSV, CSV.gz or Parquet) ending at the latest bar, with "
                        "at least the features' warm-up + look-back bars")
    p.add_argument("--fold", type=int, default=None, metavar="K",
                   help="use fold K's ensemble (default: the last fold)")
    p.add_argument("--position", type=float, default=0.0, metavar="F",
                   help="signed fraction of equity held now, in [-1, 1] (default 0: flat); "
                        "taken as entered at the last close one bar ago, with no drawdown")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    return p


FORECASTS = (("next log return", "aux_next_log_return", "+.5f"),
             ("its square", "next_return_second_moment", ".2e"))


def print_prediction(pred: dict) -> None:
    """Members' Q-values and actions, the ensemble's target, then the VSN weights (rich)."""
    from rich.console import Console
    from rich.table import Table

    from rl_trader.report.writer import num

    console = Console(width=max(140, Console().width))
    first = pred["members"][0]
    # the head's Q-values (a dict each: one column per position, direction or magnitude),
    # then its forecasts
    q_keys = [k for k, v in first.items() if isinstance(v, dict)]
    q_cols = [f"Q {label}" for k in q_keys for label in first[k]]
    rows = [[q for k in q_keys for q in m[k].values()] for m in pred["members"]]
    tail = [(title, key, spec) for title, key, spec in FORECASTS if key in first]
    table = Table(title=f"fold {pred['fold']} (epoch {pred['epoch']}) at the close of "
                        f"{pred['last_date']} (bar {pred['last_bar']})")
    for col in ("member", "direction", "fraction", *q_cols, *(t for t, _, _ in tail)):
        table.add_column(col, justify="right", no_wrap=True)
    for m, qs in zip(pred["members"], rows, strict=True):
        table.add_row(str(m["member"]), m["direction"], num(m["fraction"], "+.2f"),
                      *(num(q) for q in qs), *(num(m[key], spec) for _, key, spec in tail))
    console.print(table)
    t = pred["target"]
    prior = pred["prior"]
    split = ("" if prior["kind"] == "flat" else
             f" = prior {prior['fraction']:+.3f} ({prior['kind']}) + residual "
             f"{prior['residual']:+.3f}")
    console.print(f"target for the next bar (filled at its open): [bold]{t['direction']}[/] "
                  f"{t['magnitude']:.3f} of equity (fraction {t['fraction']:+.3f}{split}; held "
                  f"now {pred['position_held']:+.3f})")
    vsn = Table(title="mean VSN selection weights")
    vsn.add_column("market feature")
    vsn.add_column("weight", justify="right")
    for name, w in sorted(pred["market_vsn_weights"].items(), key=lambda kv: -kv[1]):
        vsn.add_row(name, f"{w:.3f}")
    vsn.add_section()
    portfolio = pred["portfolio_vsn_weights"]
    if any(portfolio.values()):
        for name, w in portfolio.items():
            vsn.add_row(f"portfolio: {name}", f"{w:.3f}")
    else:  # all 0: the model head reads no portfolio variable
        vsn.add_row("portfolio", "not read")
    console.print(vsn)


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    run_dir, bars = run_and_bars(parser, args)
    from rl_trader.data import load
    from rl_trader.run.inference import load_policy, predict

    try:
        policy = load_policy(run_dir, args.fold)
        pred = predict(policy, load(bars), args.position)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(pred, indent=2))
    else:
        print_prediction(pred)
    return 0


if __name__ == "__main__":
    sys.exit(main())
