"""The report's summary-only parts: the headline box and the per-fold and stitched tables."""

from __future__ import annotations

from html import escape

from rl_trader.evaluation.record import ABSENT, FoldEntry, Headline, Performance, RunSummary
from rl_trader.evaluation.verdict import skill_verdict
from rl_trader.report.html import note, num, table

STRATEGIES = ("agent", "buy_and_hold", "flat", "momentum_20", "random")
NOT_RETURNS = ("bars", "dates")  # besides names ending in NOT_RETURNS_SUFFIXES
NOT_RETURNS_SUFFIXES = ("_position", "_cost", "_seeds")  # e.g. agent_position, random_seeds
METRICS = (("sharpe", "Sharpe", "+.2f"), ("sortino", "Sortino", "+.2f"),
           ("max_drawdown", "max DD", "%"), ("calmar", "Calmar", "+.2f"), ("cagr", "CAGR", "%"),
           ("volatility", "volatility /yr", "%"), ("turnover", "turnover, × equity/yr", ".2f"),
           ("hit_rate", "hit rate", "%"), ("exposure", "exposure", "%"),
           ("n_trades", "trades", "d"))


def headline(s: RunSummary) -> str:
    """The headline box: stitched Sharpe, the verdict on skill, PSR/DSR/PBO, the SPA, geometric
    mean, random policy, oracle."""
    h = s.headline
    sharpe = h.stitched_test_sharpe if h else s.stitched_test_sharpe
    geo = s.geo_mean_test_sharpe if not h or h.geo_mean_test_sharpe is ABSENT else (
        h.geo_mean_test_sharpe)
    items = [f'<div class="big">stitched test Sharpe <b>{num(sharpe)}</b> '
             f'<span class="vs">buy &amp; hold {num(s.stitched_buy_and_hold_test_sharpe)}'
             "</span></div>"]
    if h:
        n = h.n_trials
        skill, why = skill_verdict(h)
        if skill is not None:
            items.append(f"<li>Evidence of skill: <b>{'yes' if skill else 'no'}</b> "
                         f"({escape(why)})</li>")
        items += [
            f"<li>PSR (probability the true Sharpe &gt; 0): <b>{num(h.psr, '.3f')}</b></li>",
            f"<li>DSR over all {escape(num(n, 'd'))} trials (deflated for selection): "
            f"<b>{num(h.dsr, '.3f')}</b></li>",
            f"<li>{escape(num(n, 'd'))} zero-skill trials would show a best Sharpe of about "
            f"<b>{num(h.expected_max_sharpe, '.2f')}</b> by luck (annualised).</li>",
            f"<li>PBO (probability of backtest overfitting): <b>{num(h.pbo, '.3f')}</b>"
            "</li>",
            _spa_line(h)]
    else:
        items.append("<li class='note'>No PSR / DSR / PBO in this run's summary "
                     "(older run).</li>")
    items.append("<li>geometric mean of fold test Sharpes: " + (
        f"<b>{num(geo)}</b>" if num(geo) != "n/a" else
        "<b>undefined: not every fold is &gt; 0</b>") + "</li>")
    items.append(_random_line(s))
    if line := rival_line(s.folds):
        items.append(f"<li>{escape(line)}</li>")
    if line := trust_line(s.folds):
        items.append(f"<li>{escape(line)}</li>")
    if (oracle := s.stitched_oracle_test_sharpe) is not ABSENT:
        ok = num(sharpe) != "n/a" and num(oracle) != "n/a" and oracle != 0
        ratio = sharpe / oracle if ok else None
        items.append(f"<li>oracle (the best causal forecast of the planted signal, same fills "
                     f"and costs): stitched Sharpe <b>{num(oracle)}</b>; agent / oracle "
                     f"<b>{num(ratio, '.2f')}</b></li>")
    return f'<div class="headline">{items[0]}<ul>{"".join(items[1:])}</ul></div>'


def _spa_line(h: Headline) -> str:
    """Hansen's SPA p-values of the headline `h` (`evaluation.headline.superior_ability`)."""
    if h.spa is None:
        return "<li class='note'>No SPA test: too few test bars.</li>"
    if h.spa is ABSENT:
        return "<li class='note'>No SPA test in this run's summary (older run).</li>"
    each = ", ".join(f"{escape(k.replace('_', ' '))} {num(p, '.3f')}"
                     for k, p in h.spa.agent_beats.items())
    return ("<li>SPA (Hansen; Sharpe ratios on the same bars, stationary bootstrap; a p below "
            "0.05 is evidence): p for <i>the agent beats every baseline</i> "
            f"<b>{num(h.spa.p_agent_beats_all, '.3f')}</b> (each: {each}); p for "
            "<i>some baseline beats the agent</i> "
            f"<b>{num(h.spa.p_some_baseline_beats_agent, '.3f')}</b></li>")


def _random_line(s: RunSummary) -> str:
    """The random policy's stitched Sharpe: mean over seeds with its band, or (older runs)
    seed 0's, said so."""
    mean, lo_hi = s.stitched_random, s.stitched_random_test_sharpe_band
    if mean and len(lo_hi or []) == 2:
        return (f"<li>random policy: stitched Sharpe <b>{num(mean.sharpe)}</b> (mean over its "
                f"seeds; 5–95 % of seeds: {num(lo_hi[0])} to {num(lo_hi[1])})</li>")
    seed0 = (s.stitched or {}).get("random")
    return (f"<li class='note'>random policy: stitched Sharpe "
            f"{num(seed0.sharpe if seed0 else None)} from seed 0 only "
            "(older run: no mean over seeds in its summary).</li>")


def metrics_rows(s: RunSummary) -> list[list[str]]:
    """Rows of the stitched metrics table; the random policy's row is its mean over seeds when
    the summary has it, else seed 0 (labelled)."""
    mean = s.stitched_random
    rows = {(name if name != "random" else "random (mean over seeds)" if mean
             else "random (seed 0)"): mean if name == "random" and mean else m
            for name, m in s.stitched.items()}
    return [[name.replace("_", " "), *(num(getattr(m, k), spec) for k, _, spec in METRICS)]
            for name, m in rows.items()]


def _block(f: FoldEntry, dates: dict[int, str]) -> str:
    """The fold's test block: its first and last dates, then the half-open bar range."""
    bars = f"bars [{num(f.test_start, 'd')}, {num(f.test_end, 'd')})"
    return f"{dates[f.fold]}, {bars}" if f.fold in dates else bars


def rival_line(folds: tuple[FoldEntry, ...]) -> str:
    """Which folds acted as their rival (`--rival`, in runs before 2026-12-07), in words; ''
    where none did."""
    acting = [(f.fold, f.acts_as) for f in folds if f.acts_as not in (ABSENT, "agent")]
    if not acting:
        return ""
    names = sorted({r for _, r in acting})
    return (f"{len(acting)} of {len(folds)} folds acted as {' or '.join(names)} (fold "
            f"{', '.join(str(k) for k, _ in acting)}): the agent's chosen epoch showed no "
            "edge over it on validation (--rival, before 2026-12-07), so the agent's figures "
            "there are its")


def trust_line(folds: tuple[FoldEntry, ...]) -> str:
    """Each fold's trust in its forecast (`--view trusted`), in words; '' where no fold has
    one."""
    trusts = [(f.fold, f.trust) for f in folds if isinstance(f.trust, dict)]
    if not trusts:
        return ""
    each = ", ".join(f"fold {k} w = {num(t.get('w'), '.2f')} (t {num(t.get('t'), '+.2f')})"
                     for k, t in trusts)
    return (f"trust in the forecast (--view trusted): {each}; a fold at w = 0 holds the prior, "
            "at w = 1 sizes by its forecast as --prior flat does")


def acted(f: FoldEntry, epoch: str) -> str:
    """A fold's best-epoch cell: the epoch, and the rival it acted as where the agent showed no
    edge over it on validation (`--rival`, in runs before 2026-12-07)."""
    return epoch if f.acts_as in (ABSENT, "agent") else f"{epoch} → {f.acts_as}"


def fold_table(folds: tuple[FoldEntry, ...], dates: dict[int, str]) -> str:
    """The agent per fold beside buy-and-hold; `dates`: fold → its test block's 'first to last'
    dates (folds without dates show bar indices only)."""
    head = ["fold", "test block", "best epoch", "val Sharpe", "test Sharpe", "Sortino", "max DD",
            "turnover, × equity/yr", "buy&hold Sharpe", "buy&hold max DD"]
    rows = []
    for f in folds:
        m = f.metrics or {}
        a, b = m.get("agent", Performance()), m.get("buy_and_hold", Performance())
        rows.append([str(f.fold), _block(f, dates), acted(f, num(f.best_epoch, "d")),
                     num(f.val_sharpe),
                     num(f.test_sharpe if a.sharpe is ABSENT else a.sharpe),
                     num(a.sortino), num(a.max_drawdown, "%"), num(a.turnover, ".2f"),
                     num(f.buy_and_hold_test_sharpe if b.sharpe is ABSENT else b.sharpe),
                     num(b.max_drawdown, "%")])
    return table(head, rows)


def strategy_sharpes(folds: tuple[FoldEntry, ...]) -> str:
    """Per-fold test Sharpe of the agent, every baseline any fold has, and the oracle."""
    from rl_trader.report.plots import label

    have = [f.baseline_test_sharpes or {} for f in folds]
    names = [n for n in STRATEGIES[1:] if any(n in b for b in have)]
    names += sorted({n for b in have for n in b} - set(names))
    oracle = any(f.oracle_test_sharpe is not ABSENT for f in folds)
    rows = []
    for f, base in zip(folds, have, strict=True):
        cells = [num(base.get(n)) for n in names]
        if "random" in names and f.random_test_sharpe_mean is not ABSENT:
            cells[names.index("random")] = (f"{num(f.random_test_sharpe_mean)} ± "
                                            f"{num(f.random_test_sharpe_std, '.3f')}")
        rows.append([str(f.fold), num(f.test_sharpe), *cells,
                     *([num(f.oracle_test_sharpe)] if oracle else [])])
    head = ["fold", "agent", *(label(n) for n in names), *(["oracle"] if oracle else [])]
    return table(head, rows) + note("random: mean ± standard deviation over its seeds.")
