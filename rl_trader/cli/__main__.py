"""`python -m rl_trader.cli COMMAND ...`: the `rl-trader` command without installing."""

import sys

from rl_trader.cli.main import main

sys.exit(main(prog="python -m rl_trader.cli"))
