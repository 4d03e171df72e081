"""The HTML report: built from a fake run directory, then rendered in a real headless browser."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from rl_trader.cli.report import main
from rl_trader.errors import InputError
from rl_trader.report.writer import load_summary, num, print_table, write_report

STRATEGIES = ("agent", "buy_and_hold", "flat", "momentum_20", "random")
METRIC_KEYS = ("sharpe", "sortino", "max_drawdown", "calmar", "cagr", "volatility", "turnover",
               "hit_rate", "exposure", "n_trades")
MARKET = [f"ret_{i}" for i in range(1, 22)]
PORTFOLIO = ["position", "unrealised_pnl", "time_in_position", "cash", "drawdown"]
INSTALL_HINT = "apt-get update && apt-get install -y chromium (Debian), or `make test` in CI"
IMG_TAG = '<img src="data:image/png;base64,'
SECTION_IDS = ("headline", "equity", "fold-equity", "drawdown", "positions", "rolling", "calendar",
               "drawdown-table", "distribution", "costs", "folds", "vsn", "learning")
N_SEEDS = 16
# stitched equity, per-fold equity, drawdown, position, rolling, distribution, gross vs net,
# 2 × VSN, learning curves
N_IMAGES = 10


def _metrics(rng: np.random.Generator) -> dict:
    m = {k: float(rng.normal(0.3, 0.5)) for k in METRIC_KEYS}
    m.update(max_drawdown=-float(rng.uniform(0.05, 0.4)), turnover=float(rng.uniform(0, 0.2)),
             hit_rate=float(rng.uniform(0.4, 0.6)), exposure=float(rng.uniform(0, 1)),
             n_trades=int(rng.integers(0, 200)))
    return m


def _weights(rng: np.random.Generator, names: list[str]) -> dict[str, float]:
    w = rng.dirichlet(np.ones(len(names)))
    return {n: float(x) for n, x in zip(names, w, strict=True)}


def make_fake_run(run_dir: Path, n_folds: int = 3, n_epochs: int = 4, seed: int = 0,
                  legacy: bool = False) -> Path:
    """A run directory shaped like the trainer's output, filled with random-but-valid data, on a
    synthetic market (with an oracle) and an extra baseline `vol_target`. `legacy`: as written
    before the returns files had agent_cost, random_seeds and oracle (and the summary the
    stitched random mean and band)."""
    rng = np.random.default_rng(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    n_bars, block, first = 5031, 780, 5031 - 780 * n_folds
    day0 = np.datetime64("2005-01-03", "ns")
    folds, trials = [], []
    for k in range(n_folds):
        start, end = first + k * block, first + (k + 1) * block
        bars = np.arange(start, end, dtype=np.int64)
        dates = (day0 + bars * np.timedelta64(1, "D")).view(np.int64)
        bh = rng.normal(3e-4, 0.011, block)
        pos = rng.choice([-1.0, 0.0, 1.0], block, p=[0.2, 0.2, 0.6])
        trend = np.convolve(bh, np.ones(20), "full")[:block - 1]  # known at the previous close
        mom = np.sign(np.concatenate([[0.0], trend])) * bh
        cost = 1e-4 * np.abs(np.diff(pos, prepend=0.0))
        seeds = rng.choice([-1.0, 1.0], (N_SEEDS, block)) * bh * 0.5
        ret = {"agent": pos * bh - cost, "buy_and_hold": bh, "flat": np.zeros(block),
               "momentum_20": mom, "random": seeds[0], "vol_target": 0.8 * bh}
        oracle = np.where(rng.random(block) < 0.6, 1.0, -1.0) * np.abs(bh)  # right 60 % of bars
        new = {"agent_cost": cost, "random_seeds": seeds, "oracle": oracle,
               "vol_target_position": np.full(block, 0.8)}  # not a strategy's returns
        rel = f"fold_{k}/test_returns.npz"
        (run_dir / f"fold_{k}").mkdir(exist_ok=True)
        np.savez(run_dir / rel, bars=bars, dates=dates, agent_position=pos, **ret,
                 **({} if legacy else new))
        epochs = [{"epoch": e, "val_sharpe": float(rng.normal(0.3, 0.4)),
                   "loss": float(1.0 / (e + 1) + rng.uniform(0, 0.1)),
                   "td_abs": float(rng.uniform(0, 1)), "aux_loss": float(rng.uniform(0, 1)),
                   "q_mean": float(rng.normal()), "epsilon": max(0.05, 1.0 - 0.3 * e),
                   "reward": float(rng.normal(0, 1e-3))} for e in range(n_epochs)]
        best = max(epochs, key=lambda r: r["val_sharpe"])
        metrics = {s: _metrics(rng) for s in (*STRATEGIES, "vol_target")}
        folds.append({
            "fold": k, "best_epoch": best["epoch"], "val_sharpe": best["val_sharpe"],
            "test_sharpe": metrics["agent"]["sharpe"],
            "buy_and_hold_test_sharpe": metrics["buy_and_hold"]["sharpe"],
            "test_start": start, "test_end": end, "checkpoint_dir": f"fold_{k}/checkpoints",
            "market_vsn_weights": _weights(rng, MARKET),
            "portfolio_vsn_weights": _weights(rng, PORTFOLIO),
            "baseline_test_sharpes": {s: metrics[s]["sharpe"] for s in metrics if s != "agent"},
            "random_test_sharpe_mean": 0.01 * k, "random_test_sharpe_std": 0.5,
            "metrics": metrics, "epochs": epochs, "returns_file": rel,
            **({} if legacy else {"oracle_test_sharpe": 3.0 + k})})
        trials += [{"fold": k, "epoch": e["epoch"], "seed": 0, "config": "default",
                    "val_sharpe": e["val_sharpe"]} for e in epochs]
    summary = {
        "folds": folds, "stitched_test_sharpe": 0.42, "stitched_buy_and_hold_test_sharpe": 0.61,
        "geo_mean_test_sharpe": None, "stitched": {s: _metrics(rng) for s in STRATEGIES},
        "headline": {"stitched_test_sharpe": 0.42, "psr": 0.83, "dsr": 0.12,
                     "n_trials": len(trials), "expected_max_sharpe": 1.734, "pbo": 0.375,
                     "geo_mean_test_sharpe": None},
        "trials": trials, "fingerprint": "fp-0123456789abcdef",
        "config": {"seed": 0, "agent": {"learning_rate": 3e-4, "gamma": 0.99}},
        "data_sha256": "ab" * 32, "data_source": "embedded:sp500", "n_bars": n_bars,
        "periods_per_year": 252.0, "feature_names": MARKET, "device": "cpu: cpu (1 device)"}
    if not legacy:
        summary["headline"]["spa"] = {"agent_beats": {"buy_and_hold": 0.971, "flat": 0.046},
                                      "p_agent_beats_all": 0.971,
                                      "p_some_baseline_beats_agent": 0.012, "block_bars": 48,
                                      "reps": 1000}
        summary.update(stitched_random=_metrics(rng) | {"sharpe": -0.031},
                       stitched_random_test_sharpe_band=[-0.512, 0.468],
                       stitched_oracle_test_sharpe=3.5)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return run_dir


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    return write_report(make_fake_run(tmp_path_factory.mktemp("runs") / "fake"))


def test_report_embeds_every_plot_and_the_headline(report):
    assert report.name == "report.html" and report.is_file()
    assert not list(report.parent.glob(".report.html*"))  # atomic: no temp file left
    html = report.read_text()
    assert html.count(IMG_TAG) == html.count("<img") == N_IMAGES
    for key in ("stitched test Sharpe", "+0.420", "buy &amp; hold +0.610", "PSR", "0.830",
                "DSR over all 12 trials", "12 zero-skill trials would show a best Sharpe of "
                "about <b>1.73</b> by luck", "PBO", "0.375",
                "undefined: not every fold is &gt; 0", "Per-fold results", "Learning curves",
                "embedded:sp500", "ab" * 32, "fp-0123456789abcdef", "cpu: cpu (1 device)",
                "<details><summary>config (JSON)</summary>", "learning_rate",
                # tear sheet
                "random policy: stitched Sharpe <b>-0.031</b>", "-0.512 to +0.468",
                "stitched Sharpe <b>+3.500</b>; agent / oracle <b>0.12</b>",
                "random (mean over seeds)", "× equity per year", "Worst 5 drawdowns",
                "2012-05-17 to 2014-07-05, bars [2691, 3471)", "<th>vol target</th>",
                "<th>oracle</th>", "+0.010 ± 0.500", "Costs paid, summed over bars",
                "<th>Dec</th>", "beta to buy &amp; hold", "excess kurtosis",
                "every baseline</i> <b>0.971</b> (each: buy and hold 0.971, flat 0.046)",
                "some baseline beats the agent</i> <b>0.012</b>",
                "Evidence of skill: <b>no</b> (DSR 0.120 &lt; 0.95"):
        assert key in html, key
    for anchor in SECTION_IDS:
        assert f'<h2 id="{anchor}">' in html, anchor
    assert "seed 0" not in html and "no agent_cost" not in html and "target position" not in html
    # self-contained: nothing fetched from anywhere
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html, re.I)
    assert "@import" not in html and "url(" not in html


def test_geo_mean_and_missing_sections_degrade_to_notes(tmp_path):
    run = make_fake_run(tmp_path / "old", n_folds=2)
    summary = json.loads((run / "summary.json").read_text())
    for key in ("headline", "stitched", "trials"):
        del summary[key]
    summary["geo_mean_test_sharpe"] = 0.25
    summary["stitched_buy_and_hold_test_sharpe"] = None
    for f in summary["folds"]:
        for key in ("metrics", "epochs", "portfolio_vsn_weights", "returns_file"):
            del f[key]
    (run / "fold_1" / "test_returns.npz").unlink()
    (run / "summary.json").write_text(json.dumps(summary))
    html = write_report(run).read_text()
    # equity ×2, drawdown, position, rolling, distribution, costs from fold 0; market VSN
    assert html.count(IMG_TAG) == 8
    for key in ("fold 1: no returns file", "No PSR / DSR / PBO", "No portfolio_vsn_weights",
                "No per-epoch history", "buy &amp; hold n/a", "+0.250"):
        assert key in html, key


def test_no_returns_at_all_skips_the_charts(tmp_path):
    run = make_fake_run(tmp_path / "r", n_folds=1)
    (run / "fold_0" / "test_returns.npz").write_bytes(b"not a zip")
    html = write_report(run).read_text()
    assert "cannot read" in html and "equity, drawdown and tear-sheet charts skipped" in html
    assert html.count(IMG_TAG) == 3


def test_an_older_run_renders_with_notes(tmp_path):
    run = make_fake_run(tmp_path / "old", n_folds=1, n_epochs=2, legacy=True)
    html = write_report(run).read_text()
    assert html.count(IMG_TAG) == N_IMAGES - 1  # no gross vs net
    for key in ("no agent_cost", "gross-vs-net view is unavailable", "× equity per year",
                "random (seed 0)", "from seed 0 only", "Worst 5 drawdowns", "Dec"):
        assert key in html, key
    assert "oracle" not in html and "random (mean over seeds)" not in html
    assert "No SPA test in this run's summary (older run)." in html
    # returns files without dates: bar numbers instead, and no calendar
    path = run / "fold_0" / "test_returns.npz"
    with np.load(path) as z:
        arrays = {n: z[n] for n in z.files if n != "dates"}
    np.savez(path, **arrays)
    html = write_report(run).read_text()
    assert "No dates in the returns files" in html and "<td>bars [4251, 5031)</td>" in html
    assert re.search(r"<td>bar \d+</td>", html)


def test_bad_run_dirs_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="not found"):
        write_report(tmp_path / "nope")
    with pytest.raises(InputError, match="no summary.json"):
        write_report(tmp_path)
    (tmp_path / "summary.json").write_text("{bad")
    with pytest.raises(InputError, match="invalid JSON at line 1"):
        write_report(tmp_path)
    (tmp_path / "summary.json").write_text("[]")
    with pytest.raises(InputError, match="not a run summary"):
        write_report(tmp_path)


def test_cli(tmp_path, capsys):
    run = make_fake_run(tmp_path / "cli", n_folds=1, n_epochs=2)
    assert main([str(run)]) == 0
    assert capsys.readouterr().out.strip() == str(run / "report.html")
    assert main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: run directory not found") and err.count("\n") == 1


def test_num_formats():
    assert [num(None), num(float("nan")), num("x"), num(True)] == ["n/a"] * 4
    assert (num(0.1234), num(-0.05, "%"), num(7.0, "d")) == ("+0.123", "-5.0%", "7")


def test_print_table_still_works(tmp_path):
    summary = load_summary(make_fake_run(tmp_path / "t", 2))
    buf = io.StringIO()
    print_table(summary, Console(file=buf, width=120))
    out = buf.getvalue()
    assert "stitched" in out and "+0.420" in out and "undefined (not every fold is > 0)" in out
    assert "SPA p (Hansen, Sharpe ratios): 0.971 for 'the agent beats every baseline', 0.012" \
        in " ".join(out.split())
    assert "evidence of skill: no (DSR 0.120 < 0.95" in " ".join(out.split())


def _chromium(*args: str, tmp: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip(f"chromium not installed: {INSTALL_HINT}")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", f"--user-data-dir={tmp / 'profile'}"]
    return subprocess.run([exe, *flags, *args], capture_output=True, text=True, timeout=60,
                          check=False)


def test_report_renders_in_headless_chromium(report, tmp_path):
    url = report.resolve().as_uri()
    dom = _chromium("--virtual-time-budget=5000", "--dump-dom", url, tmp=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    total = re.search(r'data-images-total="(\d+)"', dom.stdout)
    loaded = re.search(r'data-images-loaded="(\d+)"', dom.stdout)
    assert total and loaded, dom.stdout[:500]
    assert int(total.group(1)) == int(loaded.group(1)) == N_IMAGES
    for anchor in SECTION_IDS:
        assert re.search(f'<h2 id="{anchor}">', dom.stdout), anchor
    assert dom.stdout.count('<table class="monthly">') == 1
    shot = tmp_path / "shot.png"
    run = _chromium(f"--screenshot={shot}", "--window-size=1200,2400", "--hide-scrollbars",
                    url, tmp=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_weights_all_zero_say_the_network_reads_none_of_those_variables():
    """The model head has no portfolio VSN, so its portfolio weights are all 0: a note, not a
    chart of zeros."""
    from rl_trader.evaluation.record import FoldEntry
    from rl_trader.report.figures import Figures
    from rl_trader.report.writer import _vsn

    folds = tuple(FoldEntry(fold=k, portfolio_vsn_weights=dict.fromkeys(PORTFOLIO, 0.0))
                  for k in range(2))
    got = _vsn(folds, "portfolio_vsn_weights", "portfolio state", Figures())
    assert "reads none of these variables" in got and IMG_TAG not in got
