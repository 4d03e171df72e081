"""The release gate: its exit codes, its JSON of figures, and the goals' definitions.

The tiny gate runs train the tiny run (`helpers.TINY_ARGS` on 1,200 bars), as the other tests
that train do: the same programs, so the session's compilation cache serves them all.
"""

import json

import pytest

from experiments.convergence import (
    COSTLY_COSTS,
    FAMILY,
    FLOORS,
    GATE_SEED_BASE,
    NO_DIRECTION_MARKETS,
    check_goals,
    main,
    market_config,
)
from tests.helpers import TINY_ARGS

GATE = [*TINY_ARGS, "--bars", "1200", "--runs", "1", "--no-report"]
TRIVIAL = [*(x for name in FLOORS for x in ("--" + name.replace("_", "-"),
                                             "100" if name.endswith("_margin") else "-100")),
           "--dsr-max", "1.0", "--spa-min", "0"]


@pytest.fixture(scope="module")
def trivial_gate(tmp_path_factory):
    """One tiny gate run whose goals are trivially met: a planted market and the null one."""
    parent = tmp_path_factory.mktemp("gate") / "runs"
    code = main(GATE + TRIVIAL + ["--markets", "ar1_strong,random_walk", "--run-dir",
                                  str(parent)])
    return code, parent


def test_gate_passes_when_goals_are_trivially_met_and_writes_every_figure(trivial_gate):
    code, parent = trivial_gate
    assert code == 0
    gate = json.loads((parent / "gate.json").read_text())
    assert gate["passed"] is True
    status = {name: g["status"] for name, g in gate["goals"].items()}
    assert status["fold_oracle"] == status["null_dsr"] == status["no_collapse"] == "PASS"
    assert status["null_spa"] == "PASS"
    assert status["supervised_stitched"] in ("PASS", "n/a")  # n/a: ridge and gbm ≤ 0
    for name in ("sizing_vs_vol_target", "sizing_vs_oracle", "nonlinear_gbm", "costly_drift",
                 "no_direction_vs_vol_target"):
        assert status[name] == "not run", name
    assert [(r["market"], r["run"]) for r in gate["runs"]] == [("ar1_strong", 0),
                                                              ("random_walk", 0)]
    for r in gate["runs"]:
        assert r["data"] == f"synthetic:{r['market']}:1200:{GATE_SEED_BASE}"
        assert r["run_dir"] == str(parent / f"{r['market']}-run0")
        summary = json.loads((parent / f"{r['market']}-run0" / "summary.json").read_text())
        assert [f["agent"] for f in r["folds"]] == [f["test_sharpe"] for f in summary["folds"]]
        assert [f["oracle"] for f in r["folds"]] == [f["oracle_test_sharpe"]
                                                   for f in summary["folds"]]
        assert r["stitched"]["agent"] == summary["stitched_test_sharpe"]
        assert r["stitched"]["dsr"] == summary["headline"]["dsr"]
        assert r["stitched"]["spa"] == summary["headline"]["spa"]["p_agent_beats_all"]
        # the baselines' stitched Sharpes, gbm among them, and the better supervised one
        stitched = {n: m["sharpe"] for n, m in summary["stitched"].items() if n != "agent"}
        assert {**stitched, "random": summary["stitched_random"]["sharpe"]} == \
            r["stitched"]["baselines"]
        best = max(("ridge", "gbm"), key=stitched.get)
        assert r["stitched"]["best_supervised"] == best
        assert [f["supervised"] for f in r["folds"]] == [
            f["baseline_test_sharpes"][best] for f in summary["folds"]]
        assert [f["val_last"] for f in r["folds"]] == [f["epochs"][-1]["val_sharpe"]
                                                     for f in summary["folds"]]
    planted, null = gate["runs"]
    assert all(f["oracle"] > 0 and f["oracle_ratio"] == f["agent"] / f["oracle"]
               for f in planted["folds"])
    assert all(f["oracle"] == 0 and f["oracle_ratio"] is None for f in null["folds"])


def test_gate_fails_an_impossible_goal_with_the_same_figures(trivial_gate, tmp_path, capsys):
    _, parent = trivial_gate
    out = tmp_path / "g.json"
    code = main(GATE + ["--markets", "random_walk", "--dsr-max", "0", "--run-dir",
                        str(tmp_path / "runs"), "--out", str(out)])
    assert code == 1
    text = capsys.readouterr().out
    assert "FAIL: null_dsr" in text and "not run: fold_oracle" in text
    gate = json.loads(out.read_text())
    assert gate["passed"] is False and gate["goals"]["null_dsr"]["misses"]
    before = json.loads((parent / "gate.json").read_text())["runs"][1]
    now = gate["runs"][0]
    assert (now["folds"], now["stitched"]) == (before["folds"], before["stitched"])  # same


def test_rescore_judges_the_saved_runs_without_training(trivial_gate, tmp_path, capsys):
    _, parent = trivial_gate
    argv = GATE + TRIVIAL + ["--markets", "ar1_strong,random_walk", "--run-dir", str(parent),
                             "--rescore"]
    assert main(argv + ["--out", str(tmp_path / "again.json")]) == 0
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["runs"] == json.loads((parent / "gate.json").read_text())["runs"]
    assert main(argv + ["--dsr-max", "0", "--out", str(tmp_path / "strict.json")]) == 1
    capsys.readouterr()
    assert main(argv + ["--lr", "0.001", "--out", str(tmp_path / "other.json")]) == 2
    err = capsys.readouterr().err
    assert "holds a run of another configuration" in err
    assert "agent.learning_rate 0.0001 saved, 0.001 given" in err
    assert main(GATE + ["--markets", "cubic", "--run-dir", str(parent), "--rescore",
                        "--out", str(tmp_path / "none.json")]) == 2
    assert "is not a finished run" in capsys.readouterr().err


@pytest.mark.parametrize("argv, needle", [
    (["--markets", "ar1,nope"], "--markets"),
    (["--markets", "ar1,ar1"], "--markets"),
    (["--runs", "0"], "--runs"),
    (["--bars", "10"], "--bars"),
    (["--oracle-floor", "1000"], "--oracle-floor"),
    (["--dsr-max", "2"], "--dsr-max"),
    (["--spa-min", "-1"], "--spa-min"),
    (["--data", "synthetic:ar1"], "--data"),
    (["--resume"], "--resume"),
    (["--folds", "9", "--bars", "400"], "--folds"),
    (["--out", "/nonexistent/dir/g.json"], "--out"),
])
def test_bad_options_exit_2_with_one_line_and_nothing_written(argv, needle, tmp_path, capsys):
    code = main(GATE + argv + ["--run-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert needle in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_an_existing_run_is_refused_before_any_training(tmp_path, capsys):
    (tmp_path / "runs" / "random_walk-run0").mkdir(parents=True)
    (tmp_path / "runs" / "random_walk-run0" / "summary.json").write_text("{}")
    assert main(GATE + ["--markets", "random_walk", "--run-dir", str(tmp_path / "runs")]) == 2
    assert "already exists" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["random_walk-run0"]


def _run(market, folds, stitched=None, baselines=None):
    base = {"buy_and_hold": 0.5, "vol_target": 0.6, "ridge": 0.8, "gbm": 0.9, "random": 0.0,
            **(baselines or {})}
    best = max(("ridge", "gbm"), key=base.get)
    s = {"agent": 1.0, "buy_and_hold": 0.5, "oracle": 1.0, "oracle_ratio": 1.0, "dsr": 0.1,
         "spa": 0.5, "baselines": base, "best_supervised": best, "supervised": base[best],
         **(stitched or {})}
    s["supervised_ratio"] = s["agent"] / s["supervised"] if s["supervised"] > 0 else None
    return {"market": market, "run": 0, "folds": folds, "stitched": s}


def _fold(agent, oracle, sup=None, last=1.0, best=1.0):
    return {"fold": 0, "agent": agent, "oracle": oracle, "supervised": sup,
            "oracle_ratio": agent / oracle if oracle > 0 else None,
            "supervised_ratio": agent / sup if sup is not None and sup > 0 else None,
            "val_last": last, "val_best": best}


LIMITS = {name: default for name, (default, _) in FLOORS.items()} | {"dsr_max": 0.5,
                                                                      "spa_min": 0.1}


def test_goals_per_fold_oracle_undefined_fails_supervised_absent_or_negative_is_not_gated():
    ok = check_goals([_run("ar1_weak", [_fold(0.95, 1.0), _fold(1.0, 1.0, sup=-0.3)])],
                     LIMITS)
    assert ok["fold_oracle"]["status"] == ok["supervised_stitched"]["status"] == "PASS"
    assert ok["supervised_fold"]["status"] == "n/a"  # no fold where the baseline is > 0
    bad = check_goals([_run("regime", [_fold(0.5, -0.2), _fold(0.7, 1.0, sup=1.0)])], LIMITS)
    assert bad["fold_oracle"]["status"] == "FAIL" and len(bad["fold_oracle"]["misses"]) == 2
    assert "undefined" in bad["fold_oracle"]["misses"][0]
    assert bad["supervised_fold"]["status"] == "FAIL"  # 0.7 < 0.75 × 1.0
    assert bad["null_dsr"]["status"] == bad["sizing_vs_oracle"]["status"] == "not run"
    low = check_goals([_run("ar1_strong", [_fold(1.0, 1.0)], {"agent": 0.8})], LIMITS)
    assert low["supervised_stitched"]["status"] == "FAIL"  # 0.8 < 0.9 × gbm 0.9
    assert "gbm" in low["supervised_stitched"]["misses"][0]


def test_no_collapse_compares_the_last_epoch_with_the_best():
    goals = check_goals([_run("ar1_weak", [_fold(1.0, 1.0, last=0.95, best=1.0),
                                           _fold(1.0, 1.0, last=-1.05, best=-1.0)])], LIMITS)
    assert goals["no_collapse"]["status"] == "PASS"
    goals = check_goals([_run("ar1_weak", [_fold(1.0, 1.0, last=0.5, best=1.0)])], LIMITS)
    assert goals["no_collapse"]["status"] == "FAIL"
    assert "last +0.500, best +1.000" in goals["no_collapse"]["misses"][0]


def test_goals_for_the_nonlinear_and_the_costly_markets():
    runs = [_run("cubic", [_fold(1.0, 1.0)], {"agent": 0.85}, {"gbm": 1.0}),
            _run("slow_drift", [_fold(1.0, 1.0)], {"agent": 0.7, "oracle": 1.0,
                                                   "oracle_ratio": 0.7},
                 {"momentum_20": 0.75, "ridge": 0.1, "gbm": 0.1})]
    goals = check_goals(runs, LIMITS)
    assert goals["nonlinear_gbm"]["status"] == "FAIL"  # 0.85 < 0.9 × 1.0
    assert goals["costly_drift"]["status"] == "FAIL"
    assert goals["costly_drift"]["misses"][0].endswith("not above momentum_20")
    runs[0]["stitched"]["agent"] = 0.95
    runs[1]["stitched"]["agent"] = 0.8
    runs[1]["stitched"]["oracle_ratio"] = 0.8
    goals = check_goals(runs, LIMITS)
    assert goals["nonlinear_gbm"]["status"] == goals["costly_drift"]["status"] == "PASS"
    runs[0]["stitched"]["baselines"]["gbm"] = -0.5  # gbm ≤ 0: the agent need only beat it
    runs[0]["stitched"]["agent"] = -0.4
    assert check_goals(runs[:1], LIMITS)["nonlinear_gbm"]["status"] == "PASS"


def test_goals_for_the_sizing_and_the_null_market():
    runs = [_run("vol_regime", [_fold(1.0, 1.0)], {"agent": 0.7, "oracle": 1.0,
                                                   "oracle_ratio": 0.7},
                 {"vol_target": 0.8, "ridge": 0.1, "gbm": 0.1}),
            _run("random_walk", [_fold(-1.0, 0.0)], {"dsr": 0.5, "spa": 0.1})]
    goals = check_goals(runs, LIMITS)
    assert goals["sizing_vs_vol_target"]["status"] == "FAIL"
    assert goals["sizing_vs_oracle"]["status"] == "FAIL"
    assert goals["null_dsr"]["status"] == "FAIL"  # DSR must stay strictly below the maximum
    assert goals["null_spa"]["status"] == "FAIL"  # SPA p must stay strictly above the minimum
    assert goals["fold_oracle"]["status"] == "PASS"  # the null market's folds are not gated
    runs[0]["stitched"].update(agent=0.9, oracle_ratio=0.9)
    runs[1]["stitched"].update(dsr=0.49, spa=None)  # a run from before the SPA: not gated
    assert check_goals(runs, LIMITS)["null_spa"]["status"] == "n/a"
    runs[1]["stitched"]["spa"] = 0.11
    assert {g["status"] for g in check_goals(runs, LIMITS).values()} == {
        "PASS", "n/a", "not run"}


def test_no_direction_goal_allows_the_agent_the_margin_below_vol_target():
    """Pass when stitched agent ≥ vol_target − --no-direction-margin (0.1); each judged run's
    agent, vol_target and gap are in the goal's figures; no vol_target: not gated."""
    runs = [_run("garch_up", [_fold(1.0, 1.0)], {"agent": 0.5}, {"vol_target": 0.6}),
            _run("garch_flat", [_fold(0.0, 0.0)], {"agent": -0.05}, {"vol_target": 0.0}),
            _run("garch_down", [_fold(1.0, 1.0)], {"agent": 0.2}, {"vol_target": 0.35})]
    goal = check_goals(runs, LIMITS)["no_direction_vs_vol_target"]
    assert goal["status"] == "FAIL" and len(goal["misses"]) == 1  # 0.2 < 0.35 − 0.1
    assert goal["misses"][0] == ("garch_down run 0: agent +0.200, vol_target +0.350, "
                                 "gap -0.150")
    assert [(f["market"], f["agent"], f["vol_target"]) for f in goal["figures"]] == [
        ("garch_up", 0.5, 0.6), ("garch_flat", -0.05, 0.0), ("garch_down", 0.2, 0.35)]
    assert [f["gap"] for f in goal["figures"]] == pytest.approx([-0.1, -0.05, -0.15])
    assert check_goals(runs, LIMITS | {"no_direction_margin": 0.2})[
        "no_direction_vs_vol_target"]["status"] == "PASS"
    assert check_goals(runs[:2], LIMITS | {"no_direction_margin": 0.0})[
        "no_direction_vs_vol_target"]["misses"] == [
        "garch_up run 0: agent +0.500, vol_target +0.600, gap -0.100",
        "garch_flat run 0: agent -0.050, vol_target +0.000, gap -0.050"]
    runs[2]["stitched"]["agent"] = None  # no stitched figure: a miss
    assert "agent n/a" in check_goals(runs, LIMITS)["no_direction_vs_vol_target"]["misses"][0]
    del runs[0]["stitched"]["baselines"]["vol_target"]
    alone = check_goals(runs[:1], LIMITS)["no_direction_vs_vol_target"]
    assert (alone["status"], alone["figures"]) == ("n/a", [])
    assert "figures" not in check_goals(runs, LIMITS)["fold_oracle"]


def test_no_direction_markets_are_left_out_of_every_signal_goal():
    """Their oracle is flat on garch_flat (Sharpe 0: fold_oracle undefined) and no supervised
    baseline or validation figure gates them: alone, every signal goal is not run; beside a
    planted market, only its figures are judged."""
    from rl_trader.data.synthetic import MARKETS, NO_DIRECTION

    assert NO_DIRECTION_MARKETS == NO_DIRECTION == ("garch_up", "garch_flat", "garch_down")
    assert FAMILY[-3:] == NO_DIRECTION_MARKETS and set(FAMILY) <= set(MARKETS)
    bad = [_fold(-1.0, 0.0, sup=1.0, last=-1.0, best=1.0)]
    runs = [_run(m, bad, {"agent": -1.0, "oracle": 0.0, "oracle_ratio": None, "dsr": 0.9,
                          "spa": 0.0}, {"vol_target": -1.0}) for m in NO_DIRECTION_MARKETS]
    signal = ("fold_oracle", "supervised_stitched", "supervised_fold", "nonlinear_gbm",
              "no_collapse", "costly_drift", "sizing_vs_vol_target", "sizing_vs_oracle",
              "null_dsr", "null_spa")
    goals = check_goals(runs, LIMITS)
    assert {name: goals[name]["status"] for name in signal} == dict.fromkeys(signal, "not run")
    assert goals["no_direction_vs_vol_target"]["status"] == "PASS"  # −1.0 ≥ −1.0 − 0.1
    goals = check_goals([_run("ar1_weak", [_fold(1.0, 1.0, sup=1.0)]), *runs], LIMITS)
    for name in ("fold_oracle", "supervised_stitched", "supervised_fold", "no_collapse"):
        assert goals[name]["status"] == "PASS", (name, goals[name]["misses"])


def test_no_direction_markets_run_on_fresh_seeds_at_the_default_costs():
    from rl_trader.config import RunConfig
    from rl_trader.data import load

    for k, market in enumerate(NO_DIRECTION_MARKETS):
        cfg = market_config(RunConfig(), market, 300, k)
        assert cfg.data.path == f"synthetic:{market}:300:{GATE_SEED_BASE + k}"
        assert cfg.env == RunConfig().env
        assert len(load(cfg.data.path).close) == 300


def test_the_costly_market_trades_at_twenty_bp_whatever_the_costs_given():
    from rl_trader.config import RunConfig

    cfg = market_config(RunConfig(), "slow_drift", 5000, 2)
    assert (cfg.env.commission_bps, cfg.env.slippage_bps) == (
        COSTLY_COSTS["commission_bps"], COSTLY_COSTS["slippage_bps"])
    assert cfg.data.path == f"synthetic:slow_drift:5000:{GATE_SEED_BASE + 2}" and cfg.seed == 2
    assert market_config(RunConfig(), "cubic", 5000, 0).env == RunConfig().env


def test_help_documents_the_gate_options(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for opt in ("--markets", "--runs", "--bars", "--oracle-floor", "--supervised-floor",
                "--supervised-fold-floor", "--gbm-floor", "--costly-floor", "--sizing-floor",
                "--collapse-floor", "--no-direction-margin", "--dsr-max", "--out",
                "--run-dir", "--preset"):
        assert opt in out
