"""The commands: train, predict, backtest, report, runs (`rl-trader COMMAND`, `main.py`), and
the command line generated from the configuration (`options.py`)."""
