"""The release gate: its exit codes, its JSON of figures, and the goals' definitions.

The tiny gate runs train the tiny run (`helpers.TINY_ARGS` on 1,200 bars), as the other tests
that train do: the same programs, so the session's compilation cache serves them all.
"""

import json

import pytest
from helpers import TINY_ARGS

from experiments.convergence import GATE_SEED_BASE, check_goals, main

GATE = [*TINY_ARGS, "--bars", "1200", "--runs", "1"]
TRIVIAL = ["--oracle-floor", "-100", "--ridge-floor", "-100", "--dsr-max", "1.0"]


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
    assert status["fold_oracle"] == status["null_dsr"] == "PASS"
    assert status["fold_ridge"] in ("PASS", "n/a")  # n/a until ridge is a baseline
    assert status["sizing_vs_buy_and_hold"] == status["sizing_vs_oracle"] == "not run"
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


@pytest.mark.parametrize("argv, needle", [
    (["--markets", "ar1,nope"], "--markets"),
    (["--markets", "ar1,ar1"], "--markets"),
    (["--runs", "0"], "--runs"),
    (["--bars", "10"], "--bars"),
    (["--oracle-floor", "1000"], "--oracle-floor"),
    (["--dsr-max", "2"], "--dsr-max"),
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


def _run(market, folds, stitched=None):
    return {"market": market, "run": 0, "folds": folds, "stitched": {
        "agent": 1.0, "buy_and_hold": 0.5, "oracle": 1.0, "oracle_ratio": 1.0, "dsr": 0.1,
        **(stitched or {})}}


def _fold(agent, oracle, ridge=None):
    return {"fold": 0, "agent": agent, "oracle": oracle, "ridge": ridge,
            "oracle_ratio": agent / oracle if oracle > 0 else None,
            "ridge_ratio": agent / ridge if ridge is not None and ridge > 0 else None}


LIMITS = {"oracle_floor": 0.9, "ridge_floor": 0.95, "sizing_floor": 0.8, "dsr_max": 0.5}


def test_goals_oracle_ratio_undefined_fails_ridge_absent_or_negative_is_not_gated():
    ok = check_goals([_run("ar1_weak", [_fold(0.95, 1.0), _fold(1.0, 1.0, ridge=-0.3)])],
                     LIMITS)
    assert ok["fold_oracle"]["status"] == ok["fold_ridge"]["status"] == "PASS"
    assert check_goals([_run("ar1_weak", [_fold(0.95, 1.0)])], LIMITS)["fold_ridge"]["status"] \
        == "n/a"
    bad = check_goals([_run("regime", [_fold(0.5, -0.2), _fold(0.85, 1.0, ridge=1.0)])], LIMITS)
    assert bad["fold_oracle"]["status"] == "FAIL" and len(bad["fold_oracle"]["misses"]) == 2
    assert "undefined" in bad["fold_oracle"]["misses"][0]
    assert bad["fold_ridge"]["status"] == "FAIL"
    assert bad["null_dsr"]["status"] == bad["sizing_vs_oracle"]["status"] == "not run"


def test_goals_for_the_sizing_and_the_null_market():
    runs = [_run("vol_regime", [_fold(1.0, 1.0)], {"agent": 0.7, "oracle": 1.0,
                                                   "oracle_ratio": 0.7, "buy_and_hold": 0.8}),
            _run("random_walk", [_fold(-1.0, 0.0)], {"dsr": 0.5})]
    goals = check_goals(runs, LIMITS)
    assert goals["sizing_vs_buy_and_hold"]["status"] == "FAIL"
    assert goals["sizing_vs_oracle"]["status"] == "FAIL"
    assert goals["null_dsr"]["status"] == "FAIL"  # DSR must stay strictly below the maximum
    assert goals["fold_oracle"]["status"] == "PASS"  # the null market's folds are not gated
    runs[0]["stitched"].update(agent=0.9, oracle_ratio=0.9)
    runs[1]["stitched"]["dsr"] = 0.49
    assert {g["status"] for g in check_goals(runs, LIMITS).values()} == {"PASS", "n/a"}


def test_help_documents_the_gate_options(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for opt in ("--markets", "--runs", "--bars", "--oracle-floor", "--ridge-floor",
                "--sizing-floor", "--dsr-max", "--out", "--run-dir", "--preset"):
        assert opt in out
