"""Small HTML building blocks of the report: number formatting, images, notes, tables."""

from __future__ import annotations

import math
from html import escape

import numpy as np


def num(x: object, spec: str = "+.3f") -> str:
    """Format a number for the report: None, NaN, inf and non-numbers → 'n/a'; '%' → percent."""
    if isinstance(x, np.floating | np.integer):
        x = x.item()
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return "n/a"
    if spec == "%":
        return f"{100.0 * x:.1f}%"
    return f"{int(x)}" if spec == "d" else format(x, spec)


def img(b64: str, alt: str) -> str:
    return f'<img src="data:image/png;base64,{b64}" alt="{escape(alt)}">'


def note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def heading(text: str, anchor: str) -> str:
    """A section heading with an id (the report's sections are found by these ids)."""
    return f'<h2 id="{escape(anchor)}">{escape(text)}</h2>'


def table(head: list[str], rows: list[list[str]], styles: list[list[str]] | None = None,
          cls: str = "") -> str:
    """A table of escaped text cells; `styles` (same shape as `rows`) adds inline CSS per cell."""
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    styles = styles or [[""] * len(r) for r in rows]
    trs = "".join("<tr>" + "".join(
        f'<td style="{escape(st)}">{escape(c)}</td>' if st else f"<td>{escape(c)}</td>"
        for c, st in zip(r, srow, strict=True)) + "</tr>" for r, srow in zip(rows, styles,
                                                                             strict=True))
    attr = f' class="{escape(cls)}"' if cls else ""
    return f"<table{attr}><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def heat(x: float, scale: float) -> str:
    """Background colour of a return cell: green for gains, red for losses, stronger with |x|
    relative to `scale` (> 0); '' for NaN."""
    if not math.isfinite(x):
        return ""
    a = min(1.0, abs(x) / scale) * 0.6 if scale > 0 else 0.0
    rgb = "44,160,44" if x >= 0 else "214,39,40"
    return f"background:rgba({rgb},{a:.2f})"
