"""`rl-trader COMMAND [options]`: one command line for the experiments.

Each command hands the rest of the command line to its `experiments.<module>.main(argv, prog)`,
imported only when run, so `rl-trader --help` is quick. Run it without installing the package
as `python -m rl_trader.cli COMMAND ...` from the repository root. This is the only rl_trader
module that imports `experiments` (the layer above the package), and nothing imports it.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {  # command: (experiments module, one line of help)
    "train": ("multi_fold", "train over walk-forward folds, select on validation, score on test"),
    "predict": ("predict", "the target position for the next bar from a run and a bar file"),
    "backtest": ("backtest", "score a run's saved policy on a new bar file beside the baselines"),
    "report": ("report", "write a run's self-contained HTML report"),
    "runs": ("runs", "list the runs under a directory side by side (from their summary.json)"),
    "sweep": ("sweep", "hyper-parameter sweep scored on validation only"),
    "bench": ("benchmark", "speed figures: env steps/s, updates/s, compile time, memory"),
    "convergence": ("convergence", "the release gate: planted markets on fresh data seeds"),
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
    module, _ = COMMANDS[argv[0]]
    return importlib.import_module(f"experiments.{module}").main(argv[1:],
                                                                 prog=f"{prog} {argv[0]}")


if __name__ == "__main__":
    sys.exit(main(prog="python -m rl_trader.cli"))
