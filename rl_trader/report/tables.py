"""The report's summary-only parts: the headline box and the per-fold and stitched tables."""

from __future__ import annotations

from html import escape

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


def fid(f: dict, k: int) -> int:
    """A fold's index: its 'fold' key when it is an integer, else its position."""
    return f["fold"] if isinstance(f.get("fold"), int) else k


def headline(s: dict) -> str:
    """The headline box: stitched Sharpe, the verdict on skill, PSR/DSR/PBO, the SPA, geometric
    mean, random policy, oracle."""
    h = s.get("headline") if isinstance(s.get("headline"), dict) else {}
    sharpe = h.get("stitched_test_sharpe", s.get("stitched_test_sharpe"))
    geo = h.get("geo_mean_test_sharpe", s.get("geo_mean_test_sharpe"))
    items = [f'<div class="big">stitched test Sharpe <b>{num(sharpe)}</b> '
             f'<span class="vs">buy &amp; hold {num(s.get("stitched_buy_and_hold_test_sharpe"))}'
             "</span></div>"]
    if h:
        n = h.get("n_trials")
        skill, why = skill_verdict(h)
        if skill is not None:
            items.append(f"<li>Evidence of skill: <b>{'yes' if skill else 'no'}</b> "
                         f"({escape(why)})</li>")
        items += [
            f"<li>PSR (probability the true Sharpe &gt; 0): <b>{num(h.get('psr'), '.3f')}</b></li>",
            f"<li>DSR over all {escape(num(n, 'd'))} trials (deflated for selection): "
            f"<b>{num(h.get('dsr'), '.3f')}</b></li>",
            f"<li>{escape(num(n, 'd'))} zero-skill trials would show a best Sharpe of about "
            f"<b>{num(h.get('expected_max_sharpe'), '.2f')}</b> by luck (annualised).</li>",
            f"<li>PBO (probability of backtest overfitting): <b>{num(h.get('pbo'), '.3f')}</b>"
            "</li>",
            _spa_line(h)]
    else:
        items.append("<li class='note'>No PSR / DSR / PBO in this run's summary "
                     "(older run).</li>")
    items.append("<li>geometric mean of fold test Sharpes: " + (
        f"<b>{num(geo)}</b>" if num(geo) != "n/a" else
        "<b>undefined: not every fold is &gt; 0</b>") + "</li>")
    items.append(_random_line(s))
    if line := rival_line(s.get("folds") or []):
        items.append(f"<li>{escape(line)}</li>")
    if "stitched_oracle_test_sharpe" in s:
        oracle = s["stitched_oracle_test_sharpe"]
        ok = num(sharpe) != "n/a" and num(oracle) != "n/a" and oracle != 0
        ratio = sharpe / oracle if ok else None
        items.append(f"<li>oracle (the best causal forecast of the planted signal, same fills "
                     f"and costs): stitched Sharpe <b>{num(oracle)}</b>; agent / oracle "
                     f"<b>{num(ratio, '.2f')}</b></li>")
    return f'<div class="headline">{items[0]}<ul>{"".join(items[1:])}</ul></div>'


def _spa_line(h: dict) -> str:
    """Hansen's SPA p-values of the headline `h` (`evaluation.headline.superior_ability`)."""
    spa = h.get("spa")
    if "spa" in h and spa is None:
        return "<li class='note'>No SPA test: too few test bars.</li>"
    if not isinstance(spa, dict) or not isinstance(spa.get("agent_beats"), dict):
        return "<li class='note'>No SPA test in this run's summary (older run).</li>"
    each = ", ".join(f"{escape(k.replace('_', ' '))} {num(p, '.3f')}"
                     for k, p in spa["agent_beats"].items())
    return ("<li>SPA (Hansen; Sharpe ratios on the same bars, stationary bootstrap; a p below "
            "0.05 is evidence): p for <i>the agent beats every baseline</i> "
            f"<b>{num(spa.get('p_agent_beats_all'), '.3f')}</b> (each: {each}); p for "
            "<i>some baseline beats the agent</i> "
            f"<b>{num(spa.get('p_some_baseline_beats_agent'), '.3f')}</b></li>")


def _random_line(s: dict) -> str:
    """The random policy's stitched Sharpe: mean over seeds with its band, or (older runs)
    seed 0's, said so."""
    mean = (s.get("stitched_random") or {}).get("sharpe")
    lo_hi = s.get("stitched_random_test_sharpe_band")
    if mean is not None and isinstance(lo_hi, list) and len(lo_hi) == 2:
        return (f"<li>random policy: stitched Sharpe <b>{num(mean)}</b> (mean over its seeds; "
                f"5–95 % of seeds: {num(lo_hi[0])} to {num(lo_hi[1])})</li>")
    seed0 = ((s.get("stitched") or {}).get("random") or {}).get("sharpe")
    return (f"<li class='note'>random policy: stitched Sharpe {num(seed0)} from seed 0 only "
            "(older run: no mean over seeds in its summary).</li>")


def metrics_rows(s: dict) -> list[list[str]]:
    """Rows of the stitched metrics table; the random policy's row is its mean over seeds when
    the summary has it, else seed 0 (labelled)."""
    mean = s.get("stitched_random")
    rows = {(name if name != "random" else "random (mean over seeds)" if isinstance(mean, dict)
             else "random (seed 0)"): mean if name == "random" and isinstance(mean, dict) else m
            for name, m in s["stitched"].items()}
    return [[name.replace("_", " "), *(num(m.get(k), spec) for k, _, spec in METRICS)]
            for name, m in rows.items() if isinstance(m, dict)]


def _block(f: dict, dates: dict[int, str], k: int) -> str:
    """The fold's test block: its first and last dates, then the half-open bar range."""
    bars = f"bars [{f.get('test_start', '?')}, {f.get('test_end', '?')})"
    return f"{dates[fid(f, k)]}, {bars}" if fid(f, k) in dates else bars


def rival_line(folds: list[dict]) -> str:
    """Which folds act as their rival (`--rival`), in words; '' where none does."""
    acting = [(f.get("fold", k), f["acts_as"]) for k, f in enumerate(folds)
              if f.get("acts_as", "agent") != "agent"]
    if not acting:
        return ""
    names = sorted({r for _, r in acting})
    return (f"{len(acting)} of {len(folds)} folds act as {' or '.join(names)} (fold "
            f"{', '.join(str(k) for k, _ in acting)}): the agent's chosen epoch showed no "
            "edge over it on validation (--rival), so the agent's figures there are its")


def acted(f: dict, epoch: str) -> str:
    """A fold's best-epoch cell: the epoch, and the rival it acts as where the agent showed no
    edge over it on validation (`--rival`)."""
    rival = f.get("acts_as", "agent")
    return epoch if rival == "agent" else f"{epoch} → {rival}"


def fold_table(folds: list[dict], dates: dict[int, str]) -> str:
    """The agent per fold beside buy-and-hold; `dates`: fold → its test block's 'first to last'
    dates (folds without dates show bar indices only). "edge t": the t of the chosen epoch's
    validation Sharpe edge over `vol_target` (`metrics.edge_t`; n/a in runs before it)."""
    head = ["fold", "test block", "best epoch", "val Sharpe", "val edge t vs vol_target",
            "test Sharpe", "Sortino", "max DD",
            "turnover, × equity/yr", "buy&hold Sharpe", "buy&hold max DD"]
    rows = []
    for k, f in enumerate(folds):
        m = f.get("metrics") if isinstance(f.get("metrics"), dict) else {}
        a, b = m.get("agent") or {}, m.get("buy_and_hold") or {}
        rows.append([str(f.get("fold", k)), _block(f, dates, k),
                     acted(f, num(f.get("best_epoch"), "d")), num(f.get("val_sharpe")),
                     num(f.get("vol_target_val_edge_t"), "+.2f"),
                     num(a.get("sharpe", f.get("test_sharpe"))), num(a.get("sortino")),
                     num(a.get("max_drawdown"), "%"), num(a.get("turnover"), ".2f"),
                     num(b.get("sharpe", f.get("buy_and_hold_test_sharpe"))),
                     num(b.get("max_drawdown"), "%")])
    return table(head, rows)


def strategy_sharpes(folds: list[dict]) -> str:
    """Per-fold test Sharpe of the agent, every baseline any fold has, and the oracle."""
    from rl_trader.report.plots import label

    names = [n for n in STRATEGIES[1:] if any(n in (f.get("baseline_test_sharpes") or {})
                                               for f in folds)]
    names += sorted({n for f in folds for n in (f.get("baseline_test_sharpes") or {})} -
                    set(names))
    oracle = any("oracle_test_sharpe" in f for f in folds)
    rows = []
    for k, f in enumerate(folds):
        base = f.get("baseline_test_sharpes") or {}
        cells = [num(base.get(n)) for n in names]
        if "random" in names and "random_test_sharpe_mean" in f:
            cells[names.index("random")] = (f"{num(f['random_test_sharpe_mean'])} ± "
                                            f"{num(f.get('random_test_sharpe_std'), '.3f')}")
        rows.append([str(f.get("fold", k)), num(f.get("test_sharpe")), *cells,
                     *([num(f.get("oracle_test_sharpe"))] if oracle else [])])
    head = ["fold", "agent", *(label(n) for n in names), *(["oracle"] if oracle else [])]
    return table(head, rows) + note("random: mean ± standard deviation over its seeds.")
