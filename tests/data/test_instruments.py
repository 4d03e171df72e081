"""rl_trader.data.instruments: packaged real instruments by name, adjusted for splits.

The packages are stood in for by fakes on sys.path (the suite does not install them): a
package directory holding a file in the real one's format."""

import gzip
import importlib

import numpy as np
import pandas as pd
import pytest

from rl_trader.data import load
from rl_trader.data.instruments import adjusted, is_instrument
from rl_trader.errors import InputError


def fake_package(root, package: str, parts: tuple[str, ...], frame: pd.DataFrame) -> None:
    """`root/package/...parts` a gzipped CSV of `frame`, `root/package/__init__.py` empty."""
    path = root.joinpath(package, *parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    (root / package / "__init__.py").write_text("")
    with gzip.open(path, "wt") as fh:
        frame.to_csv(fh, index=False)


def stocks(n: int = 40, split_at: int = 20) -> pd.DataFrame:
    """Two tickers in bokeh-sampledata's layout; SPLT's unadjusted prices halve (a 2:1 split)
    at row `split_at` while its volume doubles, FLAT has no split; Adj Close is continuous."""
    rng = np.random.default_rng(0)
    dates = pd.bdate_range("2010-01-04", periods=n).strftime("%Y-%m-%d")
    rows = []
    for ticker in ("SPLT", "FLAT"):
        adj = 50 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
        factor = np.where((np.arange(n) < split_at) & (ticker == "SPLT"), 0.5, 1.0)  # Adj/Close
        close = adj / factor
        rows.append(pd.DataFrame({
            "Ticker": ticker, "Date": dates, "Open": close * 0.999, "High": close * 1.01,
            "Low": close * 0.99, "Close": close, "Volume": 1e6 * factor, "Adj Close": adj}))
    return pd.concat(rows, ignore_index=True)


@pytest.fixture
def packages(tmp_path, monkeypatch):
    frame = stocks()
    fake_package(tmp_path, "bokeh_sampledata", ("_data", "stocks.csv.gz"), frame)
    nasdaq = frame[frame.Ticker == "FLAT"].drop(columns="Ticker").assign(
        **{"Adj Close": lambda f: f["Close"]})
    fake_package(tmp_path, "arch", ("data", "nasdaq", "nasdaq.csv.gz"), nasdaq)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    return frame


def test_a_split_leaves_no_jump_in_any_column(packages):
    bars = load("stock:SPLT")
    raw = packages[packages.Ticker == "SPLT"]
    assert bars.source == "stock:SPLT" and len(bars) == len(raw)
    assert np.abs(np.diff(np.log(np.asarray(raw["Close"])))).max() > 0.6  # the raw jump
    for prices in (bars.open, bars.high, bars.low, bars.close):
        assert np.abs(np.diff(np.log(prices))).max() < 0.1
    np.testing.assert_allclose(bars.close, raw["Adj Close"], rtol=1e-9)
    np.testing.assert_allclose(bars.high / bars.close, 1.01 / 1.0, rtol=1e-9)
    np.testing.assert_allclose(bars.volume, 1e6)  # in shares after the split, on both sides
    np.testing.assert_allclose(bars.open * bars.volume,
                               np.asarray(raw["Open"] * raw["Volume"]), rtol=1e-9)


def test_nasdaq_and_the_other_ticker_load_as_they_are(packages):
    flat = packages[packages.Ticker == "FLAT"]
    for spec in ("nasdaq", "stock:FLAT"):
        bars = load(spec)
        assert is_instrument(spec) and bars.source == spec and bars.periods_per_year() == 252
        np.testing.assert_allclose(bars.close, flat["Close"], rtol=1e-9)
    assert not is_instrument("nasdaq.csv") and not is_instrument(None)


def test_unknown_ticker_missing_column_and_missing_package_are_one_line_errors(
        packages, tmp_path, monkeypatch):
    with pytest.raises(InputError, match=r"no ticker 'XYZ' in stocks.csv.gz \(it has FLAT, "
                                         r"SPLT\)"):
        load("stock:XYZ")
    other = packages.drop(columns="Adj Close")
    fake_package(tmp_path, "bokeh_sampledata", ("_data", "stocks.csv.gz"), other)
    with pytest.raises(InputError, match=r"stocks.csv.gz has no column Adj Close"):
        load("stock:SPLT")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "arch" else real(name, *a))
    with pytest.raises(InputError, match=r"^option --data=nasdaq: needs the arch package, which "
                                         r"is not installed \(pip install arch\)$"):
        load("nasdaq")


def test_adjusted_keeps_the_traded_value():
    frame = pd.DataFrame({"Date": ["2020-01-02"], "Open": [10.0], "High": [11.0], "Low": [9.0],
                          "Close": [10.0], "Volume": [100.0], "Adj Close": [2.5]})
    out = adjusted(frame)
    assert out.iloc[0].tolist() == ["2020-01-02", 2.5, 2.75, 2.25, 2.5, 400.0]
