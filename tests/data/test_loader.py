"""Tests for rl_trader.data.loader: the embedded file, formats, and every refusal."""

from __future__ import annotations

import gzip
import hashlib
import pathlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rl_trader.data import Bars, embedded_path, load_bars
from rl_trader.errors import InputError

HEADER = ["Date", "Open", "High", "Low", "Close", "Volume"]
GOOD = [
    ["2020-01-02", "10", "11", "9", "10.5", "100"],
    ["2020-01-03", "10.5", "12", "10", "11", "200"],
    ["2020-01-06", "11", "11.5", "10.5", "11.2", "150"],
    ["2020-01-07", "11.2", "11.8", "11", "11.5", "0"],
    ["2020-01-08", "11.5", "12", "11.1", "11.9", "300"],
]


def csv_bytes(rows: list[list[str]], header: list[str] = HEADER) -> bytes:
    return ("\n".join(",".join(r) for r in [header, *rows]) + "\n").encode()


def edited(row: int, col: str, value: str) -> bytes:
    """GOOD with data row `row` (1-based) and column `col` set to `value`."""
    rows = [list(r) for r in GOOD]
    rows[row - 1][HEADER.index(col)] = value
    return csv_bytes(rows)


# --- the embedded default -------------------------------------------------------------------


def test_embedded_sp500():
    a, b = load_bars(), load_bars(None)
    assert isinstance(a, Bars) and len(a) == 5031
    assert a.source == "embedded:sp500"
    # the name a run's summary gives it loads it too (`--data embedded:sp500`)
    named = load_bars("embedded:sp500")
    assert named.source == a.source and named.sha256 == a.sha256
    assert a.dates.dtype == np.dtype("datetime64[ns]")
    assert a.dates[0] == np.datetime64("1999-01-04") and a.dates[-1] == np.datetime64("2018-12-31")
    assert len(a.sha256) == 64 and int(a.sha256, 16) >= 0 and a.sha256 == b.sha256
    assert a.sha256 == hashlib.sha256(embedded_path().read_bytes()).hexdigest()
    assert a.periods_per_year() == 252.0
    for arr in (a.open, a.high, a.low, a.close, a.volume):
        assert arr.dtype == np.float64 and arr.shape == (5031,) and not arr.flags.writeable
    assert np.all(np.diff(a.dates) > np.timedelta64(0, "ns"))
    assert a.close[0] == pytest.approx(1228.099976)


# --- formats and accepted variations --------------------------------------------------------


def frame(rows: list[list[str]] = GOOD) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=HEADER)
    for c in HEADER[1:]:
        df[c] = df[c].astype(float)
    return df


def assert_same(bars: Bars, rows: list[list[str]] = GOOD) -> None:
    df = frame(rows)
    np.testing.assert_array_equal(bars.dates, pd.to_datetime(df["Date"]).to_numpy("datetime64[ns]"))
    for name in HEADER[1:]:
        np.testing.assert_array_equal(getattr(bars, name.lower()), df[name].to_numpy())


def test_csv_loads(tmp_path: pathlib.Path):
    p = tmp_path / "bars.csv"
    p.write_bytes(csv_bytes(GOOD))
    bars = load_bars(str(p))
    assert_same(bars)
    assert bars.source == str(p)
    assert bars.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
    assert bars.periods_per_year() == 252.0


@pytest.mark.parametrize("name", ["bars.csv.gz", "bars_gzip_no_suffix.csv"])
def test_gzip_csv_loads(tmp_path: pathlib.Path, name: str):
    p = tmp_path / name
    p.write_bytes(gzip.compress(csv_bytes(GOOD)))
    assert_same(load_bars(str(p)))


@pytest.mark.parametrize("name", ["bars.parquet", "bars.pq", "bars.bin"])
def test_parquet_round_trip(tmp_path: pathlib.Path, name: str):
    df = frame()
    df["Date"] = pd.to_datetime(df["Date"])
    df["Volume"] = df["Volume"].astype(np.int64)
    p = tmp_path / name
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), p)
    assert_same(load_bars(str(p)))


def test_parquet_string_columns_and_date_index(tmp_path: pathlib.Path):
    p = tmp_path / "strings.parquet"
    pd.DataFrame(GOOD, columns=HEADER).to_parquet(p)  # every column a string
    assert_same(load_bars(str(p)))
    p2 = tmp_path / "indexed.parquet"
    frame().set_index("Date").to_parquet(p2)  # Date stored as the index
    assert_same(load_bars(str(p2)))


@pytest.mark.parametrize("header", [
    ["date", "open", "high", "low", "close", "volume"],
    ["DATE", "OPEN", "HIGH", "LOW", "CLOSE", "VOLUME"],
    ["dAtE", "Open", "hIGH", "Low", "cLoSe", "VolUme"],
    [" Date ", "  Open", "High ", "Low", " Close", "Volume  "],
])
def test_column_name_case_and_whitespace(tmp_path: pathlib.Path, header: list[str]):
    p = tmp_path / "case.csv"
    p.write_bytes(csv_bytes(GOOD, header))
    assert_same(load_bars(str(p)))


def test_extra_columns_ignored_and_any_order(tmp_path: pathlib.Path):
    header = ["Volume", "Adj Close", "Close", "Low", "Note", "High", "Open", "Date"]
    order = [5, None, 4, 3, None, 2, 1, 0]
    rows = [[r[i] if i is not None else "x y" for i in order] for r in GOOD]
    p = tmp_path / "extra.csv"
    p.write_bytes(csv_bytes(rows, header))
    assert_same(load_bars(str(p)))


def test_date_formats_and_timezones(tmp_path: pathlib.Path):
    rows = [list(r) for r in GOOD]
    rows[0][0], rows[1][0] = "1/2/2020", "2020-01-03 00:00:00"
    p = tmp_path / "mixed.csv"
    p.write_bytes(csv_bytes(rows))
    assert_same(load_bars(str(p)))
    rows = [list(r) for r in GOOD]
    for r in rows:
        r[0] += "T09:30:00-05:00"
    p2 = tmp_path / "tz.csv"
    p2.write_bytes(csv_bytes(rows))
    bars = load_bars(str(p2))
    assert bars.dates[0] == np.datetime64("2020-01-02T14:30:00")  # UTC, naive


@pytest.mark.parametrize("freq, expected", [
    ("5min", 252.0 * 78), ("1h", 252.0 * 6.5), ("B", 252.0), ("W", 52.0), ("MS", 12.0),
])
def test_periods_per_year(tmp_path: pathlib.Path, freq: str, expected: float):
    dates = pd.date_range("2020-01-01", periods=40, freq=freq)
    close = 100.0 + np.arange(40)
    df = pd.DataFrame({"Date": dates, "Open": close, "High": close + 1, "Low": close - 1,
                       "Close": close, "Volume": 1.0})
    p = tmp_path / "f.parquet"
    df.to_parquet(p)
    assert load_bars(str(p)).periods_per_year() == pytest.approx(expected)


def test_single_bar_allowed_with_min_bars_1(tmp_path: pathlib.Path):
    p = tmp_path / "one.csv"
    p.write_bytes(csv_bytes(GOOD[:1]))
    assert len(load_bars(str(p), min_bars=1)) == 1


# --- refusals -------------------------------------------------------------------------------

REFUSALS = [
    # id, file bytes (None: no file; "dir": a directory), min_bars, expected fragments
    ("missing_path", None, 2, ["no such file"]),
    ("directory", "dir", 2, ["directory"]),
    ("empty_file", b"", 2, ["empty"]),
    ("header_only", csv_bytes([]), 2, ["no data rows"]),
    ("binary_garbage", bytes(range(256)) * 8, 2, ["binary data"]),
    ("binary_no_nul", bytes(range(1, 256)) * 8, 2, ["cannot read as CSV"]),
    ("truncated_gzip", gzip.compress(csv_bytes(GOOD * 20))[:60], 2, ["cannot read"]),
    ("corrupt_parquet", b"PAR1" + bytes(range(200)) + b"PAR1", 2, ["cannot read as Parquet"]),
    ("missing_column", csv_bytes([r[:5] for r in GOOD], HEADER[:5]), 2, ["missing", "Volume"]),
    ("non_numeric", edited(3, "Close", "abc"), 2, ["row 3", "'Close'", "non-numeric", "abc"]),
    ("currency", edited(2, "Open", '"$1,234.5"'), 2, ["row 2", "'Open'", "$1,234.5"]),
    ("nan_cell", edited(4, "High", "NaN"), 2, ["row 4", "'High'", "missing value"]),
    ("empty_cell", edited(2, "Low", ""), 2, ["row 2", "'Low'", "empty cell"]),
    ("inf_cell", edited(5, "Volume", "inf"), 2, ["row 5", "'Volume'", "non-finite"]),
    ("zero_price", edited(1, "Open", "0"), 2, ["row 1", "'Open'", "> 0"]),
    ("negative_price", edited(4, "Close", "-1"), 2, ["row 4", "'Close'", "> 0"]),
    ("negative_volume", edited(3, "Volume", "-5"), 2, ["row 3", "'Volume'", ">= 0"]),
    ("high_below_low", edited(2, "High", "9.5"), 2, ["row 2", "'High'", "High 9.5 < Low 10.0"]),
    ("open_above_high", edited(3, "Open", "12"), 2, ["row 3", "'Open'", "outside"]),
    ("close_below_low", edited(5, "Close", "11"), 2, ["row 5", "'Close'", "outside"]),
    ("bad_date", edited(4, "Date", "2020-13-45"), 2, ["row 4", "'Date'", "unparseable"]),
    ("garbage_date", edited(2, "Date", "soon"), 2, ["row 2", "'Date'", "unparseable", "soon"]),
    ("empty_date", edited(3, "Date", ""), 2, ["row 3", "'Date'", "unparseable"]),
    ("duplicate_date", edited(3, "Date", "2020-01-03"), 2, ["row 3", "'Date'", "duplicate",
                                                            "row 2"]),
    ("unsorted_dates", edited(4, "Date", "2020-01-04"), 2, ["row 4", "'Date'", "must increase"]),
    ("too_few_one", csv_bytes(GOOD[:1]), 2, ["only 1 bar", "need at least 2"]),
    ("too_few_five", csv_bytes(GOOD), 10, ["only 5 bars", "need at least 10"]),
    ("constant_close", csv_bytes([r[:4] + ["11.0"] + r[5:] for r in GOOD[1:4]]), 2,
     ["close price is constant"]),
]


@pytest.mark.parametrize("case_id, content, min_bars, fragments", REFUSALS,
                         ids=[c[0] for c in REFUSALS])
def test_refusals(tmp_path: pathlib.Path, case_id: str, content, min_bars: int,
                  fragments: list[str]):
    p = tmp_path / f"{case_id}.csv"
    if content == "dir":
        p.mkdir()
    elif content is not None:
        p.write_bytes(content)
    with pytest.raises(InputError) as info:
        load_bars(str(p), min_bars=min_bars)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"data file {str(p)!r}")
    for frag in fragments:
        assert frag in msg, (frag, msg)


@pytest.mark.parametrize("value, fragment", [(np.nan, "missing value"), (np.inf, "non-finite")])
def test_parquet_numeric_refusals_name_row_and_column(tmp_path: pathlib.Path, value, fragment):
    df = frame()
    df.loc[2, "Close"] = value
    p = tmp_path / "bad.parquet"
    df.to_parquet(p)
    with pytest.raises(InputError, match=rf"bad.parquet', row 3, column 'Close': {fragment}"):
        load_bars(str(p))


def test_first_bad_row_is_reported(tmp_path: pathlib.Path):
    rows = [list(r) for r in GOOD]
    rows[3][HEADER.index("Open")] = "x"
    rows[1][HEADER.index("Volume")] = "y"
    p = tmp_path / "two_bad.csv"
    p.write_bytes(csv_bytes(rows))
    with pytest.raises(InputError, match=r"row 2, column 'Volume'"):
        load_bars(str(p))


def test_column_named_as_in_file(tmp_path: pathlib.Path):
    p = tmp_path / "lower.csv"
    rows = [list(r) for r in GOOD]
    rows[1][HEADER.index("High")] = "9.5"
    p.write_bytes(csv_bytes(rows, [h.lower() for h in HEADER]))
    with pytest.raises(InputError, match=r"row 2, column 'high': high 9.5 < low 10.0"):
        load_bars(str(p))


def test_bad_min_bars():
    with pytest.raises(InputError, match="min_bars"):
        load_bars(None, min_bars=0)
