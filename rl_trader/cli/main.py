"""`rl-trader COMMAND [options]`: the product's commands.

Each command is a module of this package with `main(argv, prog) -> exit status`; they import
JAX and the rest of the package only when run, so `rl-trader --help` is quick. Without
installing the package, run `python -m rl_trader.cli COMMAND ...` from the repository root.
The research scripts (the sweep, the benchmarks, the release gate) live in `experiments/` and
are run as `python -m experiments.NAME`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from rl_trader.cli import backtest, predict, report, runs, train

COMMANDS: dict[str, tuple[Callable[..., int], str]] = {  # command: (its main, one line of help)
    "train": (train.main, "train over walk-forward folds, select on validation, score on test"),
    "predict": (predict.main, "the target position for the next bar from a run and a bar file"),
    "backtest": (backtest.main, "score a run's saved policy on a new bar file beside the "
                                "baselines"),
    "report": (report.main, "write a run's self-contained HTML report"),
    "runs": (runs.main, "list the runs under a directory side by side (from their "
                        "summary.json)"),
}


def usage(prog: str) -> str:
    """The command list, one line each."""
    width = max(map(len, COMMANDS))
    lines = [f"usage: {prog} COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    lines += ["", f"`{prog} COMMAND --help` lists a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None, prog: str = "rl-trader") -> int:
    """Run the command named by argv[0] with the rest of argv; its exit status (2 for a
    missing or unknown command, with one line on stderr)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(usage(prog))
        return 0
    if not argv or argv[0] not in COMMANDS:
        what = f"unknown command {argv[0]!r}" if argv else "no command given"
        print(f"error: {what}: expected one of {', '.join(COMMANDS)} (see {prog} --help)",
              file=sys.stderr)
        return 2
    return COMMANDS[argv[0]][0](argv[1:], prog=f"{prog} {argv[0]}")
