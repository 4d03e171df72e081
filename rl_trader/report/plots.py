"""The report's figures, each rendered off-screen (Agg) to a base64 PNG string."""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FormatStrFormatter,
    LogLocator,
    MaxNLocator,
    NullLocator,
)

from rl_trader.report.tearsheet import band, rolling_sharpe, rolling_volatility  # noqa: E402

COLORS = {"agent": "#1f5fbf", "buy_and_hold": "#222222", "flat": "#9a9a9a",
          "momentum_20": "#e07b00", "random": "#9b59b6", "oracle": "#2ca02c",
          "ridge": "#8c564b", "gbm": "#17becf", "vol_target": "#e377c2"}
LABELS = {"agent": "agent", "buy_and_hold": "buy & hold", "flat": "flat",
          "momentum_20": "momentum 20", "random": "random", "oracle": "oracle (planted signal)",
          "ridge": "ridge", "gbm": "gbm (boosted trees)", "vol_target": "vol target"}
_EXTRA = ("#d62728", "#bcbd22", "#7f7f7f", "#aec7e8")


@dataclass
class FoldReturns:
    """One fold's (or the stitched) test-block records, each [n] over the block's bars: x axis
    values (dates or bars), per-strategy simple returns, and where the file has them the agent's
    position (signed fraction of equity), its cost per bar (fraction of equity), the random
    policy's returns for every seed ([R, n]) and the prior the position was chosen around
    (`--prior`; all 0 under flat)."""

    fold: int
    x: np.ndarray
    series: dict[str, np.ndarray]
    position: np.ndarray | None = None
    cost: np.ndarray | None = None
    random_seeds: np.ndarray | None = None
    prior: np.ndarray | None = None


def label(name: str) -> str:
    return LABELS.get(name, name.replace("_", " "))


def _color(name: str, i: int) -> str:
    return COLORS.get(name, _EXTRA[i % len(_EXTRA)])


def _lw(name: str) -> float:
    return 2.0 if name == "agent" else 1.0


def _line(ax: plt.Axes, x: np.ndarray, y: np.ndarray, name: str, i: int, scale: float = 1.0,
          text: str | None = None) -> None:
    ax.plot(x, y, color=_color(name, i), lw=_lw(name) * scale, label=text or label(name),
            ls="--" if name == "oracle" else "-")


def equity(r: np.ndarray) -> np.ndarray:
    """Compounded growth of 1 from simple returns (NaN treated as 0)."""
    return np.cumprod(1.0 + np.nan_to_num(np.asarray(r, np.float64)))


def drawdown(r: np.ndarray) -> np.ndarray:
    """Drawdown from the running peak of the equity curve (≤ 0), starting from a peak of 1."""
    eq = equity(r)
    return eq / np.maximum.accumulate(np.maximum(eq, 1.0)) - 1.0


def to_png(fig: plt.Figure, tight: bool = True) -> str:
    """Render, close and base64-encode a figure as PNG; `tight` crops it to its content (one
    more draw: figures laid out by `_frame` do without)."""
    try:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=96, bbox_inches="tight" if tight else None,
                    metadata={"Software": None})
    finally:
        plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _join(parts: list[np.ndarray | None], axis: int = 0) -> np.ndarray | None:
    """Concatenate along `axis`, or None unless every part is there with matching shapes."""
    if any(p is None for p in parts) or len({p.shape[:axis] for p in parts}) != 1:
        return None
    return np.concatenate(parts, axis)


def _frame(height: float, nrows: int = 1, bottom: float = 0.45,
           **kw) -> tuple[plt.Figure, object]:
    """A figure with fixed margins in inches, axes 7.75 in wide (aligned from one figure to the
    next) and room on the right for the legend (`_legend`): it saves as is
    (`to_png(fig, tight=False)`), a draw cheaper than cropping."""
    left, right, top = 0.8, 2.7, 0.35
    width = left + 7.75 + right
    fig, axes = plt.subplots(nrows, 1, figsize=(width, height), **kw)
    fig.subplots_adjust(left=left / width, right=1.0 - right / width, bottom=bottom / height,
                        top=1.0 - top / height)
    return fig, axes


def _legend(ax: plt.Axes) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)


def stitch(folds: Sequence[FoldReturns]) -> FoldReturns:
    """Concatenate the folds' test blocks in order; keep only strategies every fold has."""
    names = [n for n in folds[0].series if all(n in f.series for f in folds)]
    return FoldReturns(-1, np.concatenate([f.x for f in folds]),
                       {n: np.concatenate([f.series[n] for f in folds]) for n in names},
                       _join([f.position for f in folds]), _join([f.cost for f in folds]),
                       _join([f.random_seeds for f in folds], axis=1),
                       _join([f.prior for f in folds]))


def _log_if_wide(ax: plt.Axes, label: bool = True) -> None:
    """Growth-of-1 axis: log scale when the plotted curves span more than a factor of 10 (e.g.
    an oracle beside a baseline), else linear."""
    ys = np.concatenate([ln.get_ydata() for ln in ax.get_lines()] or [np.ones(1)])
    wide = ys.min() > 0 and ys.max() / ys.min() > 10.0
    if wide:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0), numticks=10))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))  # plain text: mathtext is slow
    if label:
        ax.set_ylabel("growth of 1 (net of costs" + (", log scale)" if wide else ")"))


def stitched_equity(folds: Sequence[FoldReturns]) -> str:
    """Agent vs every baseline, compounded over the stitched test blocks, folds marked. With
    every seed of the random policy: its median path and the 5–95 % band of the seeds' paths."""
    s = stitch(folds)
    fig, ax = _frame(4.2)
    for i, (name, r) in enumerate(s.series.items()):
        if name == "random" and s.random_seeds is not None:
            mid, lo, hi = band(np.cumprod(1.0 + s.random_seeds, axis=1))
            ax.fill_between(s.x, lo, hi, color=_color(name, i), alpha=0.15, lw=0)
            _line(ax, s.x, mid, name, i,
                  text=f"random: median, 5–95 % of {len(s.random_seeds)} seeds")
        else:
            _line(ax, s.x, equity(r), name, i,
                  text="random (seed 0)" if name == "random" else None)
    _log_if_wide(ax)
    for f in folds:
        if len(f.x):
            ax.axvline(f.x[0], color="#bbbbbb", ls="--", lw=0.8)
            ax.text(f.x[0], 1.0, f" fold {f.fold}", transform=ax.get_xaxis_transform(),
                    va="top", ha="left", fontsize=8, color="#666666")
    ax.set_title("Stitched out-of-sample equity")
    ax.grid(alpha=0.3)
    _legend(ax)
    return to_png(fig, tight=False)


def fold_equity(folds: Sequence[FoldReturns]) -> str:
    """Small multiples: each fold's test block on its own, agent vs baselines (log scale on a
    fold whose curves span more than a factor of 10)."""
    ncols = min(3, len(folds))
    nrows = math.ceil(len(folds) / ncols)
    width, height = 3.6 * ncols + 0.3, 2.6 * nrows + 0.5
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False)
    for ax in axes.flat[len(folds):]:
        ax.set_visible(False)
    for ax, f in zip(axes.flat, folds, strict=False):
        for i, (name, r) in enumerate(f.series.items()):
            _line(ax, f.x, equity(r), name, i, scale=0.8)
        _log_if_wide(ax, label=False)
        ax.set_title(f"fold {f.fold}", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.tick_params(axis="x", labelrotation=30)
        ax.grid(alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), fontsize=8,
               frameon=False, bbox_to_anchor=(0.5, 0.0))
    # fixed margins in inches: no tight_layout or crop, each of which draws the figure again
    fig.subplots_adjust(wspace=0.25, hspace=0.55, left=0.5 / width, right=1.0 - 0.15 / width,
                        bottom=1.05 / height, top=1.0 - 0.3 / height)
    return to_png(fig, tight=False)


def drawdowns(folds: Sequence[FoldReturns]) -> str:
    """Drawdown of the stitched agent vs buy-and-hold."""
    s = stitch(folds)
    fig, ax = _frame(3.0)
    for name in ("buy_and_hold", "agent"):
        if name in s.series:
            dd = 100.0 * drawdown(s.series[name])
            ax.fill_between(s.x, dd, 0.0, color=_color(name, 0), alpha=0.15, lw=0)
            ax.plot(s.x, dd, color=_color(name, 0), lw=1.0, label=label(name))
    ax.set_ylabel("drawdown, %")
    ax.set_title("Stitched out-of-sample drawdown")
    ax.grid(alpha=0.3)
    _legend(ax)
    return to_png(fig, tight=False)


def vsn_weights(per_fold: Mapping[int, Mapping[str, float]], title: str) -> str:
    """Grouped horizontal bars: each variable's mean selection weight, one bar per fold."""
    names = sorted({n for w in per_fold.values() for n in w},
                   key=lambda n: np.mean([w.get(n, 0.0) for w in per_fold.values()]))
    k = len(per_fold)
    h = 0.8 / k
    fig, ax = plt.subplots(figsize=(7, 0.9 + 0.28 * len(names) * max(1.0, k / 3)))
    y = np.arange(len(names))
    for j, (fold, w) in enumerate(sorted(per_fold.items())):
        ax.barh(y - 0.4 + h * (j + 0.5), [w.get(n, 0.0) for n in names], height=h,
                color=plt.cm.viridis(j / max(1, k - 1) * 0.85), label=f"fold {fold}")
    ax.set_yticks(y, names, fontsize=8)
    ax.set_xlabel("mean selection weight")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    return to_png(fig)


# Panels of `learning_curves`: (title, solid key, dashed key or None); a row lacking a key
# (an older run) is left out of that line.
CURVES = (("training loss", "loss", None),
          ("Sharpe: validation (solid; ring: selected), train segment (dashed)", "val_sharpe",
           "train_sharpe"),
          ("validation: mean Q of the greedy action (solid), realised return (dashed)",
           "q_greedy", "realised_return"),
          ("churn: validation bars whose position changed", "churn", None),
          ("forecast IC on validation (aux head)", "forecast_ic", None))
# The |position| bins of `run_state.magnitude_fractions` (not imported: it pulls in JAX).
MAGNITUDE_LABELS = ("flat", "≤ 0.25", "≤ 0.5", "≤ 0.75", "≤ 1")


def curve_points(rows: Sequence[Mapping], key: str) -> list[tuple[int, float]]:
    """(epoch, value) of every row holding a finite number under `key` (None, NaN and
    missing keys skipped)."""
    return [(r["epoch"], float(r[key])) for r in rows if "epoch" in r
            and isinstance(r.get(key), int | float) and math.isfinite(r[key])]


def learning_curves(epochs: Mapping[int, Sequence[Mapping]], best: Mapping[int, int]) -> str:
    """The learning diagnostics per epoch, one colour per fold (`CURVES`: loss; validation and
    train-segment Sharpe, the selected epoch ringed; Q of the greedy action against the
    realised discounted return; churn; the forecast's IC), and the distribution of |position|
    on validation at each fold's selected epoch (`magnitude_fractions`)."""
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.4))
    panels = list(axes.flat)
    for j, (fold, rows) in enumerate(sorted(epochs.items())):
        c = plt.cm.viridis(j / max(1, len(epochs) - 1) * 0.85)
        for ax, (_, key, dashed) in zip(panels, CURVES, strict=False):
            for k, style in ((key, "o-"), (dashed, "s--")):
                pts = curve_points(rows, k) if k else []
                if pts:
                    xs, ys = zip(*pts, strict=True)
                    ax.plot(xs, ys, style, ms=3, color=c, lw=1.2,
                            label=f"fold {fold}" if style == "o-" else None)
            b = dict(curve_points(rows, key)).get(best.get(fold))
            if key == "val_sharpe" and b is not None:
                ax.plot([best[fold]], [b], "o", ms=9, mfc="none", color=c)
        chosen = {r["epoch"]: r.get("magnitude_fractions") for r in rows if "epoch" in r}.get(
            best.get(fold))
        if isinstance(chosen, list) and len(chosen) == len(MAGNITUDE_LABELS):
            panels[-1].bar(np.arange(len(chosen)) + 0.8 * (j / max(1, len(epochs)) - 0.4),
                           chosen, width=0.8 / max(1, len(epochs)), color=c, label=f"fold {fold}")
    for ax, (title, _, _) in zip(panels, CURVES, strict=False):
        ax.set_title(title, fontsize=8.5)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    mags = panels[-1]
    mags.set_title("|position| on validation at the selected epoch (fraction of bars)",
                   fontsize=8.5)
    mags.set_xticks(range(len(MAGNITUDE_LABELS)), MAGNITUDE_LABELS)
    mags.grid(alpha=0.3, axis="y")
    for ax in panels:
        if not (ax.lines or ax.patches):
            ax.text(0.5, 0.5, "not recorded in this run", ha="center", va="center",
                    transform=ax.transAxes, fontsize=8, color="#777777")
    if panels[0].lines or panels[1].lines:
        (panels[0] if panels[0].lines else panels[1]).legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return to_png(fig)


def has_prior(s: FoldReturns) -> bool:
    """Whether `s` records a prior the positions were chosen around (not flat)."""
    return s.prior is not None and bool(np.any(s.prior != 0))


def positions(s: FoldReturns, window: int) -> str:
    """The agent's position over the stitched test blocks and its trailing `window`-bar mean;
    with a prior (`--prior vol_target`) the prior and the residual (position − prior) too."""
    fig, ax = _frame(2.4)
    ax.fill_between(s.x, s.position, step="post", color=COLORS["agent"], alpha=0.35, lw=0,
                    label="position (fraction of equity)")
    if has_prior(s):
        ax.step(s.x, s.prior, where="post", color=COLORS["vol_target"], lw=1.0,
                label="prior (vol target)")
        ax.step(s.x, s.position - s.prior, where="post", color="#d62728", lw=0.7,
                label="residual (position − prior)")
    if len(s.position) >= window:
        mean = np.convolve(s.position, np.ones(window) / window, "valid")
        ax.plot(s.x[window - 1:], mean, color="#111111", lw=1.0,
                label=f"{window}-bar mean position")
    ax.axhline(0.0, color="#888888", lw=0.6)
    ax.set_ylabel("position")
    ax.set_title("Agent position (−1 short, 0 flat, +1 long)")
    ax.grid(alpha=0.3)
    _legend(ax)
    return to_png(fig, tight=False)


def rolling(s: FoldReturns, window: int, ppy: float) -> str:
    """Trailing `window`-bar annualised Sharpe and volatility: agent vs buy-and-hold."""
    fig, (ax_s, ax_v) = _frame(4.6, nrows=2, sharex=True)
    for i, name in enumerate(n for n in ("buy_and_hold", "agent") if n in s.series):
        _line(ax_s, s.x, rolling_sharpe(s.series[name], window, ppy), name, i)
        _line(ax_v, s.x, 100.0 * rolling_volatility(s.series[name], window, ppy), name, i)
    ax_s.axhline(0.0, color="#888888", lw=0.6)
    ax_s.set_ylabel("Sharpe (annualised)")
    ax_v.set_ylabel("volatility, %/yr")
    ax_s.set_title(f"Rolling {window}-bar Sharpe and volatility")
    for ax in (ax_s, ax_v):
        ax.grid(alpha=0.3)
    _legend(ax_s)
    fig.subplots_adjust(hspace=0.12)
    return to_png(fig, tight=False)


def distribution(s: FoldReturns) -> str:
    """Histogram of per-bar returns (%): agent vs buy-and-hold, on common bins."""
    names = [n for n in ("buy_and_hold", "agent") if n in s.series]
    values = [100.0 * s.series[n] for n in names]
    lo, hi = np.percentile(np.concatenate(values), [0.5, 99.5])
    bins = np.linspace(lo, hi, 61) if hi > lo else 20
    fig, ax = _frame(3.0, bottom=0.6)
    for i, (name, v) in enumerate(zip(names, values, strict=True)):
        ax.hist(np.clip(v, lo, hi), bins=bins, histtype="step", color=_color(name, i),
                lw=_lw(name), label=label(name))
    ax.set_xlabel("return per bar, % (outer 0.5 % of bars clipped to the edges)")
    ax.set_ylabel("bars")
    ax.set_title("Distribution of per-bar returns")
    ax.grid(alpha=0.3)
    _legend(ax)
    return to_png(fig, tight=False)


def gross_net(s: FoldReturns) -> str:
    """The agent's equity before costs (r_t + cost_t each bar) and after (net), cost drag
    shaded."""
    net, gross = equity(s.series["agent"]), equity(s.series["agent"] + s.cost)
    fig, ax = _frame(3.0)
    ax.fill_between(s.x, net, gross, color="#d62728", alpha=0.2, lw=0, label="cost drag")
    ax.plot(s.x, gross, color="#1f5fbf", lw=1.0, ls="--", label="gross (before costs)")
    ax.plot(s.x, net, color=COLORS["agent"], lw=2.0, label="net (after costs)")
    ax.set_ylabel("growth of 1")
    ax.set_title("Agent equity: gross vs net of costs")
    ax.grid(alpha=0.3)
    _legend(ax)
    return to_png(fig, tight=False)
