"""Build the self-contained HTML report of a finished run.

    rl-trader report RUN_DIR

Writes RUN_DIR/report.html and prints its path. Exit codes: 0 done, 2 bad run directory.
"""

from __future__ import annotations

import argparse
import sys

from rl_trader.errors import InputError

PROG = "rl-trader report"  # in help and errors


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Write RUN_DIR/report.html (plots embedded, no external resources) from "
                    "RUN_DIR/summary.json and the per-fold test returns.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory holding summary.json")
    return p


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    args = build_parser(prog).parse_args(argv)
    from rl_trader.report.writer import write_report

    try:
        path = write_report(args.run_dir)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
