"""Load OHLCV bars from CSV, compressed CSV or Parquet and validate them strictly.

Columns Date, Open, High, Low, Close, Volume are matched case-insensitively (surrounding
whitespace ignored); other columns (e.g. 'Adj Close') are ignored. Compression is detected from
the file's magic bytes (gzip, bz2, xz, zip, zstd), Parquet from its `PAR1` magic, so the suffix
does not matter. Dates may be M/D/YYYY (the embedded file), ISO dates or ISO datetimes;
timezone-aware stamps are converted to UTC and made naive.

Every refusal raises `InputError` with one line naming the file and, where it applies, the row and
column. "row N" is the N-th data row, counting the first row after the header as row 1 (so in a
CSV without blank lines it is on line N + 1). Checks run in this order and each reports the lowest
offending row: readable file, required columns, numeric & finite values, prices > 0 and volume
>= 0, High >= Low, Open/Close within [Low, High], parseable dates (in 1677-09-22..2262-04-11),
no duplicate dates, increasing dates, at least `min_bars` bars, Close not constant. Bars are
never re-sorted or repaired.
"""

from __future__ import annotations

import hashlib
import io
import lzma
import pathlib
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from importlib import resources

import numpy as np
import pandas as pd
import pyarrow as pa

from rl_trader.errors import InputError

__all__ = ["Bars", "bars_from_bytes", "embedded_path", "load_bars"]

EMBEDDED = "embedded:sp500"
REQUIRED = ("Date", "Open", "High", "Low", "Close", "Volume")
_MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz", b"PK\x03\x04": "zip",
          b"\x28\xb5\x2f\xfd": "zstd"}
_READ_ERRORS = (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError, zipfile.BadZipFile,
                ImportError, pa.ArrowException)


@dataclass(frozen=True, eq=False)  # eq=False: `==` on numpy fields would be ambiguous
class Bars:
    """OHLCV bars, sorted by date, validated. Arrays have shape [T] and are read-only."""

    dates: np.ndarray  # datetime64[ns], strictly increasing, naive (UTC if the file had a zone)
    open: np.ndarray  # float64, price units of the file, > 0
    high: np.ndarray  # float64, >= max(open, close)
    low: np.ndarray  # float64, <= min(open, close)
    close: np.ndarray  # float64
    volume: np.ndarray  # float64, >= 0
    source: str  # the path as given, or "embedded:sp500"
    sha256: str  # hex sha256 of the raw file bytes

    def __len__(self) -> int:
        return int(self.close.shape[0])

    def periods_per_year(self) -> float:
        """Bars per year inferred from the median spacing between consecutive bars.

        Median gap < 20 h: intraday, 252 * 6.5 h / gap (a 6.5 h US session, 252 sessions).
        20 h <= gap < 4 days: daily, 252. Coarser bars: < 20 days weekly (52), < 60 days monthly
        (12), < 200 days quarterly (4), else yearly (1). Fewer than 2 bars: 252.
        """
        if len(self) < 2:
            return 252.0
        gap_h = float(np.median(np.diff(self.dates).astype("timedelta64[s]").astype(np.int64)))
        gap_h /= 3600.0
        if gap_h < 20.0:
            return 252.0 * 6.5 / gap_h
        for limit_days, periods in ((4, 252.0), (20, 52.0), (60, 12.0), (200, 4.0)):
            if gap_h < 24.0 * limit_days:
                return periods
        return 1.0


def embedded_path() -> pathlib.Path:
    """Path of the packaged S&P 500 daily file (1999-01-04 .. 2018-12-31, Yahoo Finance)."""
    return pathlib.Path(str(resources.files("rl_trader.data").joinpath("sp500.csv.gz")))


def _where(src: str, row: int | None = None, col: str | None = None) -> str:
    out = f"data file {src!r}"
    out += f", row {row}" if row is not None else ""
    return out + (f", column {col!r}" if col is not None else "")


def _fail(src: str, msg: str, row: int | None = None, col: str | None = None) -> InputError:
    return InputError(f"{_where(src, row, col)}: {' '.join(str(msg).split())}")


def _num(v: float) -> str:
    return repr(float(v))


def _ts(d: np.datetime64) -> str:
    return str(pd.Timestamp(d)).removesuffix(" 00:00:00")


def _read_frame(raw: bytes, src: str) -> pd.DataFrame:
    """Parse the raw bytes as Parquet or (possibly compressed) CSV; CSV cells stay strings."""
    is_parquet = raw[:4] == b"PAR1"
    try:
        if is_parquet:
            df = pd.read_parquet(io.BytesIO(raw), engine="pyarrow")
            if not isinstance(df.index, pd.RangeIndex):  # e.g. written with Date as the index
                df = df.reset_index()
            return df
        comp = next((c for m, c in _MAGIC.items() if raw.startswith(m)), None)
        if comp is None and b"\x00" in raw[:65536]:
            raise _fail(src, "binary data (NUL bytes): not a CSV, compressed CSV or Parquet file")
        return pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False, compression=comp,
                           encoding="utf-8")
    except _READ_ERRORS as e:
        kind = "Parquet" if is_parquet else "CSV"
        raise _fail(src, f"cannot read as {kind}: {type(e).__name__}: {str(e)[:300]}") from e


def _columns(df: pd.DataFrame, src: str) -> dict[str, str]:
    """Map each required name to the file's column name (case/whitespace-insensitive)."""
    found: dict[str, str] = {}
    for name in df.columns:
        key = str(name).strip().lstrip("\ufeff").strip().lower()
        if key in found:
            raise _fail(src, f"columns {found[key]!r} and {name!r} both match {key!r}")
        found[key] = name
    missing = [r for r in REQUIRED if r.lower() not in found]
    if missing:
        have = ", ".join(repr(str(c)) for c in df.columns)
        raise _fail(src, f"missing required column(s) {', '.join(missing)} (found {have})")
    return {r: found[r.lower()] for r in REQUIRED}


def _as_text(s: pd.Series) -> np.ndarray:
    """Cells as stripped strings; missing cells become ''."""
    return np.array(["" if pd.isna(v) else str(v).strip() for v in s.tolist()], dtype=object)


def _is_num(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)


def _first(mask: np.ndarray) -> int | None:
    """Index of the first True, or None."""
    return int(np.argmax(mask)) if mask.any() else None


def _numeric(df: pd.DataFrame, cols: dict[str, str], src: str) -> dict[str, np.ndarray]:
    """Float64 columns Open..Volume; refuse the first (lowest-row) non-numeric/NaN/inf cell."""
    out: dict[str, np.ndarray] = {}
    for name in REQUIRED[1:]:
        s = df[cols[name]]
        num = s if _is_num(s) else pd.to_numeric(pd.Series(_as_text(s)), errors="coerce")
        out[name] = num.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(np.stack([out[n] for n in REQUIRED[1:]], axis=1))  # [T, 5]
    if (i := _first(bad.any(axis=1))) is None:
        return out
    name = REQUIRED[1 + int(np.argmax(bad[i]))]
    s, v = df[cols[name]], out[name][i]
    text = str(v) if _is_num(s) else _as_text(s.iloc[i : i + 1])[0]
    if text == "":
        why = "empty cell"
    elif text.lower().lstrip("+-") == "nan" or _is_num(s) and np.isnan(v):
        why = f"missing value {text!r}"
    elif np.isinf(v):
        why = f"non-finite value {text!r}"
    else:
        why = f"non-numeric value {text!r}"
    raise _fail(src, why, i + 1, cols[name])


def _check_values(v: dict[str, np.ndarray], cols: dict[str, str], src: str) -> None:
    """Prices > 0, volume >= 0, High >= Low, Open and Close within [Low, High]."""
    pos = np.stack([v[n] <= 0 for n in ("Open", "High", "Low", "Close")], axis=1)
    neg_vol = v["Volume"] < 0
    i, j = _first(pos.any(axis=1)), _first(neg_vol)
    if i is not None and (j is None or i <= j):
        name = ("Open", "High", "Low", "Close")[int(np.argmax(pos[i]))]
        raise _fail(src, f"price must be > 0, got {_num(v[name][i])}", i + 1, cols[name])
    if j is not None:
        raise _fail(src, f"volume must be >= 0, got {_num(v['Volume'][j])}", j + 1, cols["Volume"])
    hi, lo = v["High"], v["Low"]
    if (i := _first(hi < lo)) is not None:
        msg = f"{cols['High']} {_num(hi[i])} < {cols['Low']} {_num(lo[i])}"
        raise _fail(src, msg, i + 1, cols["High"])
    out = np.stack([(v[n] < lo) | (v[n] > hi) for n in ("Open", "Close")], axis=1)
    if (i := _first(out.any(axis=1))) is not None:
        name = ("Open", "Close")[int(np.argmax(out[i]))]
        msg = (f"{cols[name]} {_num(v[name][i])} outside "
               f"[{cols['Low']} {_num(lo[i])}, {cols['High']} {_num(hi[i])}]")
        raise _fail(src, msg, i + 1, cols[name])


def _dates(s: pd.Series, col: str, src: str) -> np.ndarray:
    """Parse dates to naive-UTC datetime64[ns]; refuse unparseable, duplicate, unsorted dates."""
    if pd.api.types.is_datetime64_any_dtype(s):
        parsed = pd.to_datetime(s, utc=True)
    else:
        text = pd.Series(_as_text(s))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:  # fast path: one format inferred from the first row
                parsed = pd.to_datetime(text, utc=True)
            except (ValueError, TypeError, OverflowError):
                parsed = pd.to_datetime(text, utc=True, format="mixed", errors="coerce")
    if (i := _first(parsed.isna().to_numpy())) is not None:
        raise _fail(src, f"unparseable date {str(s.iloc[i]).strip()!r}", i + 1, col)
    naive = parsed.dt.tz_localize(None)
    # pandas may parse at a coarser unit than ns; the cast to ns below would silently wrap.
    outside = ((naive < pd.Timestamp.min) | (naive > pd.Timestamp.max)).to_numpy()
    if (i := _first(outside)) is not None:
        raise _fail(src, f"date {str(s.iloc[i]).strip()!r} is out of range: must be within "
                    f"{pd.Timestamp.min.ceil('D').date()}..{pd.Timestamp.max.floor('D').date()}",
                    i + 1, col)
    try:
        d = naive.to_numpy(dtype="datetime64[ns]")
    except (ValueError, OverflowError) as e:
        raise _fail(src, f"dates out of range: {e}", None, col) from e
    first_seen = pd.Series(np.arange(len(d))).groupby(d).transform("min").to_numpy()
    if (i := _first(first_seen != np.arange(len(d)))) is not None:
        raise _fail(src, f"duplicate date {_ts(d[i])} (same as row {first_seen[i] + 1})",
                    i + 1, col)
    if (i := _first(d[1:] < d[:-1])) is not None:  # not np.diff: it overflows past 292 years
        msg = f"date {_ts(d[i + 1])} is before the previous row's {_ts(d[i])}; dates must increase"
        raise _fail(src, msg, i + 2, col)
    return d


def load_bars(path: str | None = None, min_bars: int = 2) -> Bars:
    """Load and validate OHLCV bars from `path` (None or `EMBEDDED`, the name a run's summary
    gives it: the embedded S&P 500 daily file)."""
    if min_bars < 1:
        raise InputError(f"min_bars must be >= 1, got {min_bars}")
    embedded = path is None or str(path) == EMBEDDED
    src = EMBEDDED if embedded else str(path)
    p = embedded_path() if embedded else pathlib.Path(path)
    if not p.exists():
        raise _fail(src, "no such file")
    if p.is_dir():
        raise _fail(src, "is a directory, not a file")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise _fail(src, f"cannot read: {e.strerror or e}") from e
    return bars_from_bytes(raw, src, min_bars)


def bars_from_bytes(raw: bytes, src: str, min_bars: int = 2) -> Bars:
    """Validated bars from a file's raw bytes (CSV, compressed CSV or Parquet); `src` names
    it in errors and in `Bars.source`."""
    if not raw:
        raise _fail(src, "file is empty (0 bytes)")
    df = _read_frame(raw, src)
    cols = _columns(df, src)
    if len(df) == 0:
        raise _fail(src, "no data rows (header only)")
    v = _numeric(df, cols, src)
    _check_values(v, cols, src)
    dates = _dates(df[cols["Date"]], cols["Date"], src)
    n = len(dates)
    if n < min_bars:
        raise _fail(src, f"only {n} bar{'s' * (n != 1)}, need at least {min_bars}")
    if n >= 2 and np.all(v["Close"] == v["Close"][0]):
        raise _fail(src, f"close price is constant ({_num(v['Close'][0])} in all {n} rows)",
                    None, cols["Close"])
    arrays = [dates] + [np.ascontiguousarray(v[k]) for k in REQUIRED[1:]]
    for a in arrays:
        a.setflags(write=False)
    return Bars(*arrays, source=src, sha256=hashlib.sha256(raw).hexdigest())
