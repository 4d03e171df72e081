"""Human-readable output of a run: the per-fold console table and the self-contained HTML report."""

from __future__ import annotations

import json
import os
import zipfile
from concurrent.futures import Executor
from html import escape
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from rl_trader.errors import InputError
from rl_trader.evaluation.record import ABSENT, FoldEntry, RunSummary
from rl_trader.evaluation.verdict import skill_verdict
from rl_trader.report.figures import Figures
from rl_trader.report.html import heading, img, note, num, table
from rl_trader.report.tables import (
    METRICS,
    NOT_RETURNS,
    NOT_RETURNS_SUFFIXES,
    STRATEGIES,
    acted,
    fold_table,
    headline,
    metrics_rows,
    rival_line,
    strategy_sharpes,
    trust_line,
)


def _fmt(x: object) -> str:
    return num(x, "+.3f")


def print_table(summary: RunSummary, console: Console | None = None) -> None:
    """Per-fold agent vs buy-and-hold on each test block, then the stitched figures."""
    table = Table(title="Out-of-sample (test) results, costs on")
    for col in ("fold", "test bars", "best epoch", "val Sharpe", "test Sharpe",
                "buy&hold Sharpe"):
        table.add_column(col, justify="right")
    for f in summary.folds:
        table.add_row(str(f.fold), f"[{f.test_start}, {f.test_end})",
                      acted(f, str(f.best_epoch)), _fmt(f.val_sharpe), _fmt(f.test_sharpe),
                      _fmt(f.buy_and_hold_test_sharpe))
    table.add_section()
    table.add_row("stitched", "", "", "", _fmt(summary.stitched_test_sharpe),
                  _fmt(summary.stitched_buy_and_hold_test_sharpe))
    geo = summary.geo_mean_test_sharpe
    console = console or Console(width=max(100, Console().width))
    console.print(table)
    console.print(
        "geometric mean of fold test Sharpes: "
        + (f"{geo:.3f}" if isinstance(geo, float) else "undefined (not every fold is > 0)"))
    for line in (rival_line(summary.folds), trust_line(summary.folds)):
        if line:
            console.print(line)
    head = summary.headline
    if head is not ABSENT:
        console.print(
            f"stitched test Sharpe {_fmt(head.stitched_test_sharpe)}: "
            f"PSR {num(head.psr, '.3f')}, DSR {num(head.dsr, '.3f')} over "
            f"{num(head.n_trials, 'd')} trials (zero-skill best "
            f"≈ {num(head.expected_max_sharpe, '.2f')}), PBO {num(head.pbo, '.2f')}")
        if spa := head.spa:
            console.print(
                f"SPA p (Hansen, Sharpe ratios): {num(spa.p_agent_beats_all, '.3f')} for "
                "'the agent beats every baseline', "
                f"{num(spa.p_some_baseline_beats_agent, '.3f')} for 'some baseline beats "
                "the agent' (below 0.05: evidence)")
        skill, why = skill_verdict(head)
        if skill is not None:
            console.print(f"evidence of skill: {'yes' if skill else 'no'} ({why})")


# ---------------------------------------------------------------- HTML report

def load_summary(run_dir: str | Path) -> RunSummary:
    """Read `run_dir/summary.json` (`RunSummary.from_json`); InputError if it is not a run."""
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
    return RunSummary.from_json(summary, str(path))


def load_returns(run_dir: Path, folds: tuple[FoldEntry, ...]) -> tuple[list, list[str]]:
    """Each fold's test returns (plots.FoldReturns) and notes on folds that could not be read.

    Every 1-D numeric array other than `NOT_RETURNS` and names ending in `NOT_RETURNS_SUFFIXES`
    is a strategy's returns (known ones first, in `STRATEGIES` order); agent_position,
    agent_cost, random_seeds and prior_position are kept when present with the right length
    (older runs lack them: None)."""
    from rl_trader.report.plots import FoldReturns

    raw, notes = [], []
    for f in folds:
        fold = f.fold
        rel = f.returns_file or f"fold_{fold}/test_returns.npz"
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
                   *sorted(n for n in set(arrays) - {*STRATEGIES, *NOT_RETURNS}
                           if not n.endswith(NOT_RETURNS_SUFFIXES))]
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
        extra = {name: arrays[name].astype(np.float64)
                 if name in arrays and arrays[name].shape[-1:] == (n,) else None
                 for name in ("agent_position", "agent_cost", "random_seeds", "prior_position")}
        if extra["random_seeds"] is not None and extra["random_seeds"].ndim != 2:
            extra["random_seeds"] = None
        out.append(FoldReturns(int(fold), x, series, extra["agent_position"],
                               extra["agent_cost"], extra["random_seeds"],
                               extra["prior_position"]))
    return out, notes


def _vsn(folds: tuple[FoldEntry, ...], key: str, title: str, figure: Figures) -> str:
    from rl_trader.report import plots

    per = {f.fold: {n: float(v) for n, v in getattr(f, key).items()}
           for f in folds if getattr(f, key)}
    if not per:
        return note(f"No {key} in this run's summary.")
    if not any(v for d in per.values() for v in d.values()):  # a softmax is never all 0
        return note(f"{key}: all 0, the network reads none of these variables (the model "
                    "head has no portfolio VSN: its continuation reads the market alone).")
    return img(figure(plots.vsn_weights, per, title), title)


def _ppy(s: RunSummary) -> tuple[float, list[str]]:
    ppy = s.periods_per_year
    if ppy is not ABSENT and ppy > 0:
        return float(ppy), []
    return 252.0, [note("No periods_per_year in this run's summary: 252 assumed.")]


def _body(run_dir: Path, s: RunSummary, figure: Figures) -> str:
    from rl_trader.report import plots
    from rl_trader.report import tearsheet_html as report_tearsheet

    folds = s.folds
    parts = [heading("Headline", "headline"), headline(s)]
    returns, notes = load_returns(run_dir, folds)
    parts.append(heading("Stitched out-of-sample equity", "equity"))
    parts += [note(n) for n in notes]
    dates = {f.fold: f"{np.datetime_as_string(f.x[0], 'D')} to "
                     f"{np.datetime_as_string(f.x[-1], 'D')}"
             for f in returns if f.x.dtype.kind == "M" and len(f.x)}
    if returns:
        ppy, ppy_note = _ppy(s)
        parts += [img(figure(plots.stitched_equity, returns), "stitched equity"),
                  heading("Per-fold equity", "fold-equity"),
                  img(figure(plots.fold_equity, returns), "per-fold equity"),
                  heading("Drawdown", "drawdown"),
                  img(figure(plots.drawdowns, returns), "drawdown"),
                  *ppy_note, *report_tearsheet.sections(plots.stitch(returns), s, ppy, figure)]
    else:
        parts.append(note("No per-fold returns files: equity, drawdown and tear-sheet charts "
                          "skipped."))
    parts += [heading("Per-fold results (test block, costs on)", "folds"),
              fold_table(folds, dates), "<h3>Per-fold test Sharpe, every strategy</h3>",
              strategy_sharpes(folds)]
    if s.stitched:
        parts += ["<h3>Stitched metrics, all strategies</h3>",
                  table(["strategy", *(t for _, t, _ in METRICS)], metrics_rows(s))]
    parts += [heading("Variable selection (VSN) importance", "vsn"),
              _vsn(folds, "market_vsn_weights", "market features: mean selection weight", figure),
              _vsn(folds, "portfolio_vsn_weights", "portfolio state: mean selection weight",
                   figure)]
    epochs = {f.fold: [r for r in f.epochs if isinstance(r, dict)] for f in folds if f.epochs}
    parts.append(heading("Learning curves", "learning"))
    if epochs:
        best = {f.fold: None if f.best_epoch is ABSENT else f.best_epoch for f in folds}
        parts.append(img(figure(plots.learning_curves, epochs, best), "learning curves"))
    else:
        parts.append(note("No per-epoch history in this run's summary."))
    return "\n".join(parts)


def _footer(s: RunSummary) -> str:
    rows = [("data source", s.data_source), ("data sha256", s.data_sha256),
            ("bars", s.n_bars), ("periods per year", s.periods_per_year),
            ("fingerprint", s.fingerprint), ("device", s.device),
            ("trials", len(s.trials) if s.trials is not ABSENT else None)]
    dl = "".join(f"<dt>{escape(k)}</dt><dd>"
                 f"{escape('n/a' if v is None or v is ABSENT else str(v))}</dd>"
                 for k, v in rows)
    cfg = escape(json.dumps(s.config, indent=2, sort_keys=True, default=str))
    feats = escape(", ".join(map(str, s.feature_names or [])) or "n/a")
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


def render_html(run_dir: str | Path, summary: RunSummary, pool: Executor | None = None) -> str:
    """The whole report as one self-contained HTML string; its figures drawn by `pool`'s
    workers side by side (`figures.start_workers`), or here one after another."""
    title = f"rl_trader run report: {Path(run_dir).resolve().name}"
    figure = Figures(pool)
    body = _body(Path(run_dir), summary, figure)
    return figure.fill(f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
                       f"<title>{escape(title)}</title><style>{CSS}</style></head>\n<body>"
                       f"<h1>{escape(title)}</h1>\n{body}\n{_footer(summary)}"
                       f"\n<script>{SCRIPT}</script></body></html>\n")


def write_report(run_dir: str | Path, pool: Executor | None = None) -> Path:
    """Build `run_dir/report.html` from summary.json and the returns files (atomically); with
    a `pool`, its figures are drawn in that pool's workers."""
    run_dir = Path(run_dir)
    text = render_html(run_dir, load_summary(run_dir), pool)
    out = run_dir / "report.html"
    tmp = run_dir / f".report.html.{os.getpid()}.tmp"
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out
