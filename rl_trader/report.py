"""Human-readable output of a run: the per-fold console table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


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
