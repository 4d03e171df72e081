"""Human-readable output of a run: the per-fold console table and the self-contained HTML report."""

from __future__ import annotations

import json
import math
import os
import zipfile
from html import escape
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from rl_trader.errors import InputError

STRATEGIES = ("agent", "buy_and_hold", "flat", "momentum_20", "ridge", "vol_target", "random")
METRICS = (("sharpe", "Sharpe", "+.2f"), ("sortino", "Sortino", "+.2f"),
           ("max_drawdown", "max DD", "%"), ("calmar", "Calmar", "+.2f"), ("cagr", "CAGR", "%"),
           ("volatility", "volatility", "%"), ("turnover", "turnover", ".3f"),
           ("hit_rate", "hit rate", "%"), ("exposure", "exposure", "%"),
           ("n_trades", "trades", "d"))


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.3f}"


def print_table(summary: dict, console: Console | None = None) -> None:
    """Per-fold agent vs buy-and-hold on each test block, then the stitched figures."""
    table = Table(title="Out-of-sample (test) results, costs on")
    for col in ("fold", "test bars", "best epoch", "val Sharpe", "test Sharpe",
                "buy&hold Sharpe"):
        table.add_column(col, justify="right")
    for f in summary["folds"]:
        table.add_row(str(f["fold"]), f"[{f['test_start']}, {f['test_end']})",
                      str(f["best_epoch"]), _fmt(f["val_sharpe"]), _fmt(f["test_sharpe"]),
                      _fmt(f["buy_and_hold_test_sharpe"]))
    table.add_section()
    table.add_row("stitched", "", "", "", _fmt(summary["stitched_test_sharpe"]),
                  _fmt(summary["stitched_buy_and_hold_test_sharpe"]))
    geo = summary["geo_mean_test_sharpe"]
    console = console or Console(width=max(100, Console().width))
    console.print(table)
    console.print(
        "geometric mean of fold test Sharpes: "
        + (f"{geo:.3f}" if geo is not None else "undefined (not every fold is > 0)"))
    head = summary.get("headline")
    if head:
        console.print(
            f"stitched test Sharpe {_fmt(head['stitched_test_sharpe'])}: "
            f"PSR {num(head['psr'], '.3f')}, DSR {num(head['dsr'], '.3f')} over "
            f"{head['n_trials']} trials (zero-skill best "
            f"≈ {num(head['expected_max_sharpe'], '.2f')}), PBO {num(head['pbo'], '.2f')}")


# ---------------------------------------------------------------- HTML report

def num(x: object, spec: str = "+.3f") -> str:
    """Format a number for the report: None, NaN, inf and non-numbers → 'n/a'; '%' → percent."""
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return "n/a"
    if spec == "%":
        return f"{100.0 * x:.1f}%"
    return f"{int(x)}" if spec == "d" else format(x, spec)


def load_summary(run_dir: str | Path) -> dict:
    """Read and minimally validate `run_dir/summary.json`; InputError if it is not a run."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(f"run directory not found: {run_dir}")
    path = run_dir / "summary.json"
    if not path.is_file():
        raise InputError(f"{path}: no summary.json (not a run directory, or the run did not "
                         "finish)")
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: invalid JSON at line {err.lineno} column {err.colno}: "
                         f"{err.msg}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read: {err}") from None
    folds = summary.get("folds") if isinstance(summary, dict) else None
    if not isinstance(folds, list) or not all(isinstance(f, dict) for f in folds):
        raise InputError(f"{path}: not a run summary (needs a 'folds' list of objects)")
    return summary


def load_returns(run_dir: Path, folds: list[dict]) -> tuple[list, list[str]]:
    """Each fold's test returns (plots.FoldReturns) and notes on folds that could not be read."""
    from rl_trader.plots import FoldReturns

    raw, notes = [], []
    for k, f in enumerate(folds):
        fold = _fid(f, k)
        rel = f.get("returns_file") or f"fold_{fold}/test_returns.npz"
        try:
            with np.load(run_dir / rel, allow_pickle=False) as z:
                arrays = {name: np.asarray(z[name]) for name in z.files}
        except FileNotFoundError:
            notes.append(f"fold {fold}: no returns file ({rel})")
            continue
        except (OSError, ValueError, zipfile.BadZipFile) as err:
            notes.append(f"fold {fold}: cannot read {rel}: {err}")
            continue
        series = {n: arrays[n].astype(np.float64) for n in
                  [*[s for s in STRATEGIES if s in arrays],
                   *sorted(set(arrays) - {*STRATEGIES, "bars", "dates", "agent_position"})]
                  if arrays[n].ndim == 1 and arrays[n].dtype.kind in "fiu"}
        lengths = {len(a) for a in series.values()}
        if "agent" not in series or len(lengths) != 1:
            notes.append(f"fold {fold}: {rel} lacks 'agent' returns or has unequal lengths")
            continue
        raw.append((fold, arrays, series))
    with_dates = bool(raw) and all("dates" in a for _, a, _ in raw)
    out = []
    for fold, arrays, series in raw:
        n = len(series["agent"])
        if with_dates:
            x = arrays["dates"].astype("int64").astype("datetime64[ns]")
        else:
            x = arrays["bars"] if "bars" in arrays else np.arange(n)
        if len(x) != n:
            notes.append(f"fold {fold}: dates/bars length {len(x)} ≠ returns length {n}")
            continue
        out.append(FoldReturns(int(fold), x, series))
    return out, notes


def _fid(f: dict, k: int) -> int:
    """A fold's index: its 'fold' key when it is an integer, else its position."""
    return f["fold"] if isinstance(f.get("fold"), int) else k


def _img(b64: str, alt: str) -> str:
    return f'<img src="data:image/png;base64,{b64}" alt="{escape(alt)}">'


def _note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def _headline(s: dict) -> str:
    h = s.get("headline") if isinstance(s.get("headline"), dict) else {}
    sharpe = h.get("stitched_test_sharpe", s.get("stitched_test_sharpe"))
    geo = h.get("geo_mean_test_sharpe", s.get("geo_mean_test_sharpe"))
    items = [f'<div class="big">stitched test Sharpe <b>{num(sharpe)}</b> '
             f'<span class="vs">buy &amp; hold {num(s.get("stitched_buy_and_hold_test_sharpe"))}'
             "</span></div>"]
    if h:
        n = h.get("n_trials")
        items += [
            f"<li>PSR (probability the true Sharpe &gt; 0): <b>{num(h.get('psr'), '.3f')}</b></li>",
            f"<li>DSR over all {escape(num(n, 'd'))} trials (deflated for selection): "
            f"<b>{num(h.get('dsr'), '.3f')}</b></li>",
            f"<li>{escape(num(n, 'd'))} zero-skill trials would show a best Sharpe of about "
            f"<b>{num(h.get('expected_max_sharpe'), '.2f')}</b> by luck (annualised).</li>",
            f"<li>PBO (probability of backtest overfitting): <b>{num(h.get('pbo'), '.3f')}</b>"
            "</li>"]
    else:
        items.append("<li class='note'>No PSR / DSR / PBO in this run's summary "
                     "(older run).</li>")
    items.append("<li>geometric mean of fold test Sharpes: " + (
        f"<b>{num(geo)}</b>" if num(geo) != "n/a" else
        "<b>undefined: not every fold is &gt; 0</b>") + "</li>")
    return f'<div class="headline">{items[0]}<ul>{"".join(items[1:])}</ul></div>'


def _metrics_rows(by_strategy: dict) -> list[list[str]]:
    return [[name.replace("_", " "), *(num(m.get(k), spec) for k, _, spec in METRICS)]
            for name, m in by_strategy.items() if isinstance(m, dict)]


def _fold_table(folds: list[dict]) -> str:
    head = ["fold", "test bars", "best epoch", "val Sharpe", "test Sharpe", "Sortino", "max DD",
            "turnover", "buy&hold Sharpe", "buy&hold max DD"]
    rows = []
    for k, f in enumerate(folds):
        m = f.get("metrics") if isinstance(f.get("metrics"), dict) else {}
        a, b = m.get("agent") or {}, m.get("buy_and_hold") or {}
        rows.append([str(f.get("fold", k)),
                     f"[{f.get('test_start', '?')}, {f.get('test_end', '?')})",
                     num(f.get("best_epoch"), "d"), num(f.get("val_sharpe")),
                     num(a.get("sharpe", f.get("test_sharpe"))), num(a.get("sortino")),
                     num(a.get("max_drawdown"), "%"), num(a.get("turnover"), ".3f"),
                     num(b.get("sharpe", f.get("buy_and_hold_test_sharpe"))),
                     num(b.get("max_drawdown"), "%")])
    return _table(head, rows)


def _vsn(folds: list[dict], key: str, title: str) -> str:
    from rl_trader import plots

    per = {_fid(f, k): {n: float(v) for n, v in f[key].items()
                                   if isinstance(v, int | float)}
           for k, f in enumerate(folds) if isinstance(f.get(key), dict) and f[key]}
    if not per:
        return _note(f"No {key} in this run's summary.")
    return _img(plots.vsn_weights(per, title), title)


def _body(run_dir: Path, s: dict) -> str:
    from rl_trader import plots

    folds = s["folds"]
    parts = ["<h2>Headline</h2>", _headline(s)]
    returns, notes = load_returns(run_dir, folds)
    parts.append("<h2>Stitched out-of-sample equity</h2>")
    parts += [_note(n) for n in notes]
    if returns:
        parts += [_img(plots.stitched_equity(returns), "stitched equity"),
                  "<h2>Per-fold equity</h2>", _img(plots.fold_equity(returns), "per-fold equity"),
                  "<h2>Drawdown</h2>", _img(plots.drawdowns(returns), "drawdown")]
    else:
        parts.append(_note("No per-fold returns files: equity and drawdown charts skipped."))
    parts += ["<h2>Per-fold results (test block, costs on)</h2>", _fold_table(folds)]
    if isinstance(s.get("stitched"), dict):
        parts += ["<h3>Stitched metrics, all strategies</h3>",
                  _table(["strategy", *(t for _, t, _ in METRICS)], _metrics_rows(s["stitched"]))]
    parts += ["<h2>Variable selection (VSN) importance</h2>",
              _vsn(folds, "market_vsn_weights", "market features: mean selection weight"),
              _vsn(folds, "portfolio_vsn_weights", "portfolio state: mean selection weight")]
    epochs = {_fid(f, k): [r for r in f["epochs"] if isinstance(r, dict)]
              for k, f in enumerate(folds) if isinstance(f.get("epochs"), list) and f["epochs"]}
    parts.append("<h2>Learning curves</h2>")
    if epochs:
        best = {_fid(f, k): f.get("best_epoch") for k, f in enumerate(folds)}
        parts.append(_img(plots.learning_curves(epochs, best), "learning curves"))
    else:
        parts.append(_note("No per-epoch history in this run's summary."))
    return "\n".join(parts)


def _footer(s: dict) -> str:
    rows = [("data source", s.get("data_source")), ("data sha256", s.get("data_sha256")),
            ("bars", s.get("n_bars")), ("periods per year", s.get("periods_per_year")),
            ("fingerprint", s.get("fingerprint")), ("device", s.get("device")),
            ("trials", len(s["trials"]) if isinstance(s.get("trials"), list) else None)]
    dl = "".join(f"<dt>{escape(k)}</dt><dd>{escape('n/a' if v is None else str(v))}</dd>"
                 for k, v in rows)
    cfg = escape(json.dumps(s.get("config"), indent=2, sort_keys=True, default=str))
    feats = escape(", ".join(map(str, s.get("feature_names") or [])) or "n/a")
    return (f"<footer><dl>{dl}</dl><details><summary>features</summary><p>{feats}</p>"
            f"</details><details><summary>config (JSON)</summary><pre>{cfg}</pre></details>"
            "</footer>")


CSS = """body{font-family:sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
img{max-width:100%;display:block;margin:.6em 0}.note{color:#8a6d3b;font-style:italic}
.headline{background:#f4f7fb;border:1px solid #c9d6e8;border-radius:6px;padding:.8em 1.2em}
.headline .big{font-size:1.4em}.headline .vs{color:#555;font-size:.75em;margin-left:1em}
table{border-collapse:collapse;font-size:.9em}th,td{border:1px solid #ddd;padding:.25em .6em;
text-align:right}th{background:#f0f0f0}footer{margin-top:2em;font-size:.85em;color:#444}
dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dd{margin:0;
font-family:monospace;word-break:break-all}pre{background:#f7f7f7;padding:.6em;overflow:auto}"""

# Records in <body data-images-total/-loaded> how many images decoded (for headless checks).
SCRIPT = """window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  document.body.dataset.imagesTotal = String(imgs.length);
  document.body.dataset.imagesLoaded = String(ok.length);
});"""


def render_html(run_dir: str | Path, summary: dict) -> str:
    """The whole report as one self-contained HTML string."""
    title = f"rl_trader run report: {Path(run_dir).resolve().name}"
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{escape(title)}</title><style>{CSS}</style></head>\n<body>"
            f"<h1>{escape(title)}</h1>\n{_body(Path(run_dir), summary)}\n{_footer(summary)}"
            f"\n<script>{SCRIPT}</script></body></html>\n")


def write_report(run_dir: str | Path) -> Path:
    """Build `run_dir/report.html` from summary.json and the returns files (atomically)."""
    run_dir = Path(run_dir)
    text = render_html(run_dir, load_summary(run_dir))
    out = run_dir / "report.html"
    tmp = run_dir / f".report.html.{os.getpid()}.tmp"
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out
