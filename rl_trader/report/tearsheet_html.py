"""The report's tear-sheet sections over the stitched test blocks: positions, rolling
statistics, calendar returns, the worst drawdowns, the return distribution with beta, costs."""

from __future__ import annotations

import numpy as np

from rl_trader.evaluation.metrics import cagr, exposure, prior_figures, sharpe
from rl_trader.evaluation.record import Performance, RunSummary
from rl_trader.evaluation.stats import moments
from rl_trader.report import plots
from rl_trader.report.figures import Figures
from rl_trader.report.html import heading, heat, img, note, num, table
from rl_trader.report.plots import FoldReturns, label
from rl_trader.report.tearsheet import (
    beta_correlation,
    drawdown_episodes,
    monthly_table,
    period_returns,
)

WINDOW = 63  # bars in the rolling windows (a quarter of daily bars)
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _when(x: np.ndarray, i: int) -> str:
    """Bar i's date (YYYY-MM-DD), or 'bar N' when the x axis is bar indices."""
    if x.dtype.kind == "M":
        return str(np.datetime_as_string(x[i], unit="D"))
    return f"bar {int(x[i])}"


def positions(s: FoldReturns, ppy: float, figure: Figures) -> list[str]:
    """The agent's position over time and its long / short / flat shares of bars; with a prior,
    the residual's mean |·| and the turnover it adds (`metrics.prior_figures`)."""
    parts = [heading("Positions and exposure", "positions")]
    p = s.position
    if p is None:
        return [*parts, note("No agent_position in this run's returns files.")]
    parts += [img(figure(plots.positions, s, WINDOW), "agent position"), table(
        ["long", "short", "flat", "exposure (mean |position|)", "mean position (net long)"],
        [[num(np.mean(p > 0), "%"), num(np.mean(p < 0), "%"), num(np.mean(p == 0), "%"),
          num(exposure(p), ".2f"), num(float(np.mean(p)), "+.2f")]])]
    if not plots.has_prior(s):
        return parts
    fig = prior_figures(p, s.prior, "vol_target", ppy)
    return [*parts, table(
        ["mean prior", "mean |residual|", "turnover the residual adds (a year)"],
        [[num(fig["prior_mean"], ".2f"), num(fig["mean_abs_residual"], ".3f"),
          num(fig["turnover_added"], "+.1f")]]),
        note("The agent holds clip(prior + residual, −1, 1): the prior is vol_target's "
             "position min(1, σ*/σ̂), the residual what the agent learnt to add (--prior).")]


def rolling(s: FoldReturns, ppy: float, figure: Figures) -> list[str]:
    """Trailing-window Sharpe and volatility, agent vs buy-and-hold."""
    parts = [heading(f"Rolling {WINDOW}-bar Sharpe and volatility", "rolling")]
    if len(s.series["agent"]) < 2 * WINDOW:
        return [*parts, note(f"Fewer than {2 * WINDOW} stitched test bars: rolling statistics "
                             "skipped.")]
    return [*parts, img(figure(plots.rolling, s, WINDOW, ppy), "rolling Sharpe and volatility"),
            note(f"Each point covers the trailing {WINDOW} bars, annualised with {ppy:g} "
                 "periods per year; windows run across fold boundaries.")]


def calendar(s: FoldReturns) -> list[str]:
    """Year × month returns of the agent (coloured) and yearly returns beside buy-and-hold."""
    parts = [heading("Monthly and yearly returns", "calendar")]
    if s.x.dtype.kind != "M":
        return [*parts, note("No dates in the returns files: calendar returns skipped.")]
    years, tab = monthly_table(s.series["agent"], s.x)
    scale = float(np.nanmax(np.abs(tab))) if np.isfinite(tab).any() else 0.0
    yearly = {n: dict(zip(*period_returns(s.series[n], s.x, "Y"), strict=True))
              for n in ("agent", "buy_and_hold") if n in s.series}
    cal_years, counts = np.unique(s.x.astype("datetime64[Y]"), return_counts=True)
    rows, styles = [], []
    for y, row in zip(years, tab, strict=True):
        rows.append([str(y), *("" if np.isnan(v) else num(v, "%") for v in row)])
        styles.append(["", *(heat(v, scale) for v in row)])
    yrows = []
    for y, n in zip(cal_years, counts, strict=True):
        a, b = yearly["agent"][y], yearly.get("buy_and_hold", {}).get(y)
        yrows.append([str(y), str(n), num(a, "%"), num(b, "%"),
                      num(None if b is None else 100.0 * (a - b), "+.1f")])
    return [*parts, "<h3>Agent, monthly (compounded within the month, net of costs)</h3>",
            table(["year", *MONTHS], rows, styles, cls="monthly"),
            "<h3>Yearly</h3>",
            table(["year", "bars", "agent", "buy & hold", "agent − buy & hold, pp"], yrows),
            note("The first and last months and years are partial where the test blocks start "
                 "or end inside them (see the bars column).")]


def drawdown_table(s: FoldReturns) -> list[str]:
    """The agent's 5 deepest drawdowns: peak, trough and recovery dates, depth, duration."""
    parts = [heading("Worst 5 drawdowns of the agent", "drawdown-table")]
    eps = drawdown_episodes(s.series["agent"], 5)
    if not eps:
        return [*parts, note("The agent's equity never fell below a previous high.")]
    rows = [[str(i + 1), "start" if e.peak < 0 else _when(s.x, e.peak), _when(s.x, e.trough),
             "not recovered" if e.recovery is None else _when(s.x, e.recovery),
             num(e.depth, "%"), str(e.bars)] for i, e in enumerate(eps)]
    parts.append(table(["#", "peak", "trough", "recovery", "depth",
                        "duration, bars (peak → recovery or last bar)"], rows))
    if any(e.peak < 0 for e in eps):
        parts.append(note("Peak 'start': the equity fell from its starting value, before the "
                          "first test bar."))
    return parts


def distribution(s: FoldReturns, figure: Figures) -> list[str]:
    """Histogram of per-bar returns; moments, extremes, beta and correlation per strategy."""
    parts = [heading("Return distribution, beta and correlation", "distribution")]
    if len(s.series["agent"]) < 2:
        return [*parts, note("Fewer than 2 stitched test bars.")]
    bench = s.series.get("buy_and_hold")
    rows = []
    for name, r in s.series.items():
        try:
            _, skew, kurt, _ = moments(r)
        except ValueError:  # a non-finite return in the file
            skew = kurt = float("nan")
        beta, rho = (beta_correlation(r, bench) if bench is not None
                     else (float("nan"), float("nan")))
        rows.append([label(name), num(100.0 * float(np.mean(r)), "+.3f"),
                     num(100.0 * float(np.std(r, ddof=1)), ".3f"), num(skew, "+.2f"),
                     num(kurt - 3.0, "+.2f"), num(float(r.min()), "%"), num(float(r.max()), "%"),
                     num(beta, "+.2f"), num(rho, "+.2f")])
    return [*parts, img(figure(plots.distribution, s), "return distribution"),
            table(["strategy", "mean per bar, %", "std per bar, %", "skew", "excess kurtosis",
                   "worst bar", "best bar", "beta to buy & hold", "correlation to buy & hold"],
                  rows),
            note("Skew and kurtosis are the population moments of the per-bar returns (as in "
                 "the PSR); excess kurtosis is 0 for a normal. Beta = cov(r, b) / var(b) with "
                 "b the buy-and-hold returns of the same bars.")]


def costs(s: FoldReturns, stitched: dict[str, Performance], ppy: float,
          figure: Figures) -> list[str]:
    """Turnover (from the summary), gross vs net equity, costs paid and their drag on CAGR."""
    parts = [heading("Costs: gross vs net, turnover", "costs")]
    turn = stitched["agent"].turnover if "agent" in stitched else None
    parts.append(f"<p>Turnover of the agent: <b>{num(turn, '.2f')} × equity per year</b> (mean "
                 f"over bars of |traded notional| / equity, × {ppy:g} bars a year; 2 = one "
                 "round trip into and out of a full position a year).</p>")
    if s.cost is None:
        return [*parts, note("This run's returns files have no agent_cost (a run from before "
                             "costs were saved per bar): the gross-vs-net view is unavailable.")]
    net = s.series["agent"]
    gross = net + s.cost
    rows = [[kind, num(cagr(r, ppy), "%"), num(float(sharpe(r, ppy)), "+.2f")]
            for kind, r in (("gross (before costs)", gross), ("net (after costs)", net))]
    return [*parts, img(figure(plots.gross_net, s), "gross vs net equity"),
            table(["agent", "CAGR", "Sharpe"], rows),
            f"<p>Costs paid, summed over bars: <b>{num(float(s.cost.sum()), '%')}</b> of "
            f"equity ({num(float(s.cost.mean()) * ppy, '%')} a year); cost drag on CAGR: "
            f"<b>{num(cagr(gross, ppy) - cagr(net, ppy), '%')} a year</b>. Gross = net + "
            "each bar's cost (fraction of equity).</p>"]


def sections(s: FoldReturns, summary: RunSummary, ppy: float, figure: Figures) -> list[str]:
    """Every tear-sheet section over the stitched record `s`, as HTML fragments (the figures
    drawn by `figure`)."""
    return [*positions(s, ppy, figure), *rolling(s, ppy, figure), *calendar(s), *drawdown_table(s),
            *distribution(s, figure), *costs(s, summary.stitched or {}, ppy, figure)]
