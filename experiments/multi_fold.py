"""The design card's entry point: `python -m experiments.multi_fold [options]` is `rl-trader
train [options]` (walk-forward training and out-of-sample scoring, `rl_trader.cli.train`)."""

import sys

from rl_trader.cli.train import main

PROG = "python -m experiments.multi_fold"

if __name__ == "__main__":
    sys.exit(main(prog=PROG))
