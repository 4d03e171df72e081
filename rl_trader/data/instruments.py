"""Real instruments by name, from packages that ship them (no network):

    nasdaq          the NASDAQ Composite, daily 1999-01-04 .. 2018-12-31, that the `arch`
                    package ships (`arch/data/nasdaq/nasdaq.csv.gz`)
    stock:TICKER    daily OHLCV of AAPL, IBM, MSFT, GOOG or FB to 2013-03-01 (public domain,
                    from Quandl's WIKI prices) that `bokeh-sampledata` ships
                    (`bokeh_sampledata/_data/stocks.csv.gz`)

The files are found through the installed package's location, without importing it; a user
who lacks the package gets one line naming what to install (the extra `markets`,
`.venv/bin/pip install -e '.[markets]'` in the repository, installs both).

Prices are split- and dividend-adjusted with the file's adjusted close: with
f_t = AdjClose_t / Close_t, the open, high, low and close are multiplied by f_t and the volume
divided by it (the traded value O·V is unchanged), so a split leaves no jump in any column.
The adjusted bars are written as one CSV and validated as a file would be
(`loader.bars_from_bytes`); their sha256 is that CSV's.
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd

from rl_trader.data.loader import Bars, bars_from_bytes
from rl_trader.errors import InputError

NASDAQ = "nasdaq"
STOCK_PREFIX = "stock:"
# name → (package, distribution to install, the file inside the package)
_SOURCES = {NASDAQ: ("arch", "arch", ("data", "nasdaq", "nasdaq.csv.gz")),
            STOCK_PREFIX: ("bokeh_sampledata", "bokeh-sampledata", ("_data", "stocks.csv.gz"))}


def is_instrument(spec: str | None) -> bool:
    """Whether a `--data` item names a packaged instrument (`nasdaq`, `stock:TICKER`)."""
    return spec == NASDAQ or (spec or "").startswith(STOCK_PREFIX)


def _packaged_file(kind: str, spec: str) -> Path:
    """The file of `kind` inside its installed package; InputError naming what to install."""
    package, dist, parts = _SOURCES[kind]
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise InputError(f"option --data={spec}: needs the {dist} package, which is not "
                         f"installed (pip install {dist})")
    path = Path(list(found.submodule_search_locations)[0]).joinpath(*parts)
    if not path.is_file():
        raise InputError(f"option --data={spec}: the installed {dist} package has no "
                         f"{'/'.join(parts)}")
    return path


def adjusted(frame: pd.DataFrame) -> pd.DataFrame:
    """Date, Open, High, Low, Close, Volume adjusted by f = Adj Close / Close (module
    docstring) from a frame with those columns and "Adj Close"."""
    f = frame["Adj Close"].to_numpy(np.float64) / frame["Close"].to_numpy(np.float64)
    out = pd.DataFrame({"Date": frame["Date"]})
    for col in ("Open", "High", "Low", "Close"):
        out[col] = frame[col].to_numpy(np.float64) * f
    out["Volume"] = frame["Volume"].to_numpy(np.float64) / f
    return out


def load_instrument(spec: str) -> Bars:
    """The adjusted, validated bars of a packaged instrument (`is_instrument(spec)`)."""
    kind = NASDAQ if spec == NASDAQ else STOCK_PREFIX
    path = _packaged_file(kind, spec)
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        frame = pd.read_csv(fh)
    need = {"Date", "Open", "High", "Low", "Close", "Volume", "Adj Close"} | (
        {"Ticker"} if kind == STOCK_PREFIX else set())
    if missing := sorted(need - set(frame.columns)):
        raise InputError(f"option --data={spec}: {path} has no column {', '.join(missing)} "
                         "(another version of its package?)")
    if kind == STOCK_PREFIX:
        ticker = spec[len(STOCK_PREFIX):]
        tickers = sorted(frame["Ticker"].unique())
        if ticker not in tickers:
            raise InputError(f"option --data={spec}: no ticker {ticker!r} in {path.name} "
                             f"(it has {', '.join(tickers)})")
        frame = frame[frame["Ticker"] == ticker]
    text = adjusted(frame.reset_index(drop=True)).to_csv(index=False, float_format="%.10g")
    return bars_from_bytes(text.encode(), spec)


__all__ = ["NASDAQ", "STOCK_PREFIX", "adjusted", "is_instrument", "load_instrument"]
