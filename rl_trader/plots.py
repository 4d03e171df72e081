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
from matplotlib.ticker import MaxNLocator  # noqa: E402

COLORS = {"agent": "#1f5fbf", "buy_and_hold": "#222222", "flat": "#9a9a9a",
          "momentum_20": "#e07b00", "ridge": "#2ca02c", "vol_target": "#8c564b",
          "random": "#9b59b6"}
LABELS = {"agent": "agent", "buy_and_hold": "buy & hold", "flat": "flat",
          "momentum_20": "momentum 20", "ridge": "ridge", "vol_target": "vol target",
          "random": "random"}
_EXTRA = ("#d62728", "#17becf", "#bcbd22", "#e377c2")


@dataclass
class FoldReturns:
    """One fold's test-block returns: x axis values (dates or bars) and per-strategy returns."""

    fold: int
    x: np.ndarray
    series: dict[str, np.ndarray]


def _color(name: str, i: int) -> str:
    return COLORS.get(name, _EXTRA[i % len(_EXTRA)])


def _lw(name: str) -> float:
    return 2.0 if name == "agent" else 1.0


def equity(r: np.ndarray) -> np.ndarray:
    """Compounded growth of 1 from simple returns (NaN treated as 0)."""
    return np.cumprod(1.0 + np.nan_to_num(np.asarray(r, np.float64)))


def drawdown(r: np.ndarray) -> np.ndarray:
    """Drawdown from the running peak of the equity curve (≤ 0), starting from a peak of 1."""
    eq = equity(r)
    return eq / np.maximum.accumulate(np.maximum(eq, 1.0)) - 1.0


def to_png(fig: plt.Figure) -> str:
    """Render, close and base64-encode a figure as PNG."""
    try:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=96, bbox_inches="tight",
                    metadata={"Software": None})
    finally:
        plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def stitch(folds: Sequence[FoldReturns]) -> FoldReturns:
    """Concatenate the folds' test blocks in order; keep only strategies every fold has."""
    names = [n for n in folds[0].series if all(n in f.series for f in folds)]
    return FoldReturns(-1, np.concatenate([f.x for f in folds]),
                       {n: np.concatenate([f.series[n] for f in folds]) for n in names})


def stitched_equity(folds: Sequence[FoldReturns]) -> str:
    """Agent vs every baseline, compounded over the stitched test blocks, folds marked."""
    s = stitch(folds)
    fig, ax = plt.subplots(figsize=(10, 4.2))
    for i, (name, r) in enumerate(s.series.items()):
        ax.plot(s.x, equity(r), color=_color(name, i), lw=_lw(name), label=LABELS.get(name, name))
    for f in folds:
        if len(f.x):
            ax.axvline(f.x[0], color="#bbbbbb", ls="--", lw=0.8)
            ax.text(f.x[0], 1.0, f" fold {f.fold}", transform=ax.get_xaxis_transform(),
                    va="top", ha="left", fontsize=8, color="#666666")
    ax.set_ylabel("growth of 1 (net of costs)")
    ax.set_title("Stitched out-of-sample equity")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    return to_png(fig)


def fold_equity(folds: Sequence[FoldReturns]) -> str:
    """Small multiples: each fold's test block on its own, agent vs baselines."""
    ncols = min(3, len(folds))
    nrows = math.ceil(len(folds) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 2.6 * nrows), squeeze=False)
    for ax in axes.flat[len(folds):]:
        ax.set_visible(False)
    for ax, f in zip(axes.flat, folds, strict=False):
        for i, (name, r) in enumerate(f.series.items()):
            ax.plot(f.x, equity(r), color=_color(name, i), lw=_lw(name) * 0.8,
                    label=LABELS.get(name, name))
        ax.set_title(f"fold {f.fold}", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.tick_params(axis="x", labelrotation=30)
        ax.grid(alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, -0.04))
    fig.tight_layout()
    return to_png(fig)


def drawdowns(folds: Sequence[FoldReturns]) -> str:
    """Drawdown of the stitched agent vs buy-and-hold."""
    s = stitch(folds)
    fig, ax = plt.subplots(figsize=(10, 3))
    for name in ("buy_and_hold", "agent"):
        if name in s.series:
            dd = 100.0 * drawdown(s.series[name])
            ax.fill_between(s.x, dd, 0.0, color=_color(name, 0), alpha=0.15, lw=0)
            ax.plot(s.x, dd, color=_color(name, 0), lw=1.0, label=LABELS[name])
    ax.set_ylabel("drawdown, %")
    ax.set_title("Stitched out-of-sample drawdown")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8, frameon=False)
    return to_png(fig)


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


def learning_curves(epochs: Mapping[int, Sequence[Mapping]], best: Mapping[int, int]) -> str:
    """Loss and validation Sharpe per epoch, one line per fold; best epoch ringed."""
    fig, (ax_l, ax_s) = plt.subplots(1, 2, figsize=(10, 3.2))
    for j, (fold, rows) in enumerate(sorted(epochs.items())):
        c = plt.cm.viridis(j / max(1, len(epochs) - 1) * 0.85)
        for ax, key in ((ax_l, "loss"), (ax_s, "val_sharpe")):
            pts = [(r["epoch"], r[key]) for r in rows
                   if isinstance(r.get(key), int | float) and "epoch" in r]
            if pts:
                xs, ys = zip(*pts, strict=True)
                ax.plot(xs, ys, "o-", ms=3, color=c, lw=1.2, label=f"fold {fold}")
                b = dict(pts).get(best.get(fold))
                if key == "val_sharpe" and b is not None:
                    ax.plot([best[fold]], [b], "o", ms=9, mfc="none", color=c)
    ax_l.set_title("training loss")
    ax_s.set_title("validation Sharpe (ring: selected epoch)")
    for ax in (ax_l, ax_s):
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    if ax_l.lines or ax_s.lines:
        (ax_l if ax_l.lines else ax_s).legend(fontsize=8, frameon=False)
    return to_png(fig)
