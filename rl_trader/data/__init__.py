"""Bar data: loading and validation of OHLCV files, the embedded default, synthetic markets."""

import numpy as np

from rl_trader.data.instruments import is_instrument, load_instrument
from rl_trader.data.loader import Bars, embedded_path, load_bars
from rl_trader.errors import InputError

SYNTHETIC_PREFIX = "synthetic:"


def data_specs(path: str | None) -> list[str | None]:
    """The items of `--data`: [target, pooled, …] (whitespace around commas ignored), or
    [None] for the embedded default; an empty item raises InputError."""
    if not path:
        return [None]
    items = [item.strip() for item in path.split(",")]
    if not all(items):
        raise InputError(f"option --data={path!r}: an empty item in the list")
    return items


def load_market(source: str | None) -> tuple[Bars, np.ndarray | None]:
    """Bars from a file path, `synthetic:NAME[:N_BARS[:SEED]]`, a packaged instrument
    (`nasdaq`, `stock:TICKER`: `data.instruments`), or None (embedded S&P 500); with a
    synthetic market's oracle positions [T] (None for any other source)."""
    if source is not None and source.startswith(SYNTHETIC_PREFIX):
        from rl_trader.data.synthetic import from_spec

        market = from_spec(source)
        return market.bars, market.oracle_position
    if is_instrument(source):
        return load_instrument(source), None
    return load_bars(source), None


def load(source: str | None) -> Bars:
    """The bars of `load_market(source)`."""
    return load_market(source)[0]


__all__ = ["Bars", "data_specs", "embedded_path", "load", "load_bars", "load_market"]
