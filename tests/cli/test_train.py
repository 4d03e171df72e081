"""End to end: the main job on the CPU, its outputs and its refusals."""

import contextlib
import io
import json

import numpy as np
import pytest

from rl_trader.cli.train import main

FOLD_KEYS = {"fold", "best_epoch", "val_sharpe", "test_sharpe", "buy_and_hold_test_sharpe",
             "checkpoint_dir", "test_start", "test_end", "market_vsn_weights"}
TOP_KEYS = {"folds", "stitched_test_sharpe", "geo_mean_test_sharpe", "fingerprint", "config",
            "data_sha256"}


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """The smoke run, its gbm baselines fit while it trains, as on an accelerator (on the
    CPU they are fit at scoring time: the other runs of the suite); its log."""
    from rl_trader.baselines import gbm
    from rl_trader.run import experiment

    run_dir = tmp_path_factory.mktemp("runs") / "smoke"
    started = []
    out = io.StringIO()

    class Recorded(gbm.GbmFits):
        def __init__(self, data, val_steps, cfg, background, made):
            started.append((len(data), background, len(made)))
            super().__init__(data, val_steps, cfg, background, made)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(experiment, "host_is_idle", lambda: True)
        mp.setattr(experiment, "GbmFits", Recorded)
        with contextlib.redirect_stdout(out):
            code = main(["--preset", "smoke", "--folds", "3", "--epochs", "1", "--run-dir",
                         str(run_dir)])
    # every fold's fit made before training, by the tree forecast's choice (the default)
    assert started == [(3, True, 3)]
    return code, run_dir, out.getvalue()


def test_smoke_run_writes_three_checkpoints_and_a_summary(smoke_run):
    code, run_dir, _ = smoke_run
    assert code == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert TOP_KEYS <= set(summary)
    assert len(summary["folds"]) == 3
    for f in summary["folds"]:  # the fits made for the tree forecast reached the scores
        assert f["gbm_choice"]["leaves"] in (4, 8, 16)
        assert np.isfinite(f["baseline_test_sharpes"]["gbm"])
    ends = []
    for k, fold in enumerate(summary["folds"]):
        assert FOLD_KEYS <= set(fold)
        assert fold["fold"] == k and fold["best_epoch"] == 0
        ckpt = run_dir / fold["checkpoint_dir"]
        assert ckpt.is_dir() and (ckpt / "0").is_dir()
        assert (run_dir / f"fold_{k}" / "best_params.safetensors").is_file()
        assert abs(sum(fold["market_vsn_weights"].values()) - 1.0) < 1e-3
        ends.append((fold["test_start"], fold["test_end"]))
    assert ends[-1][1] == summary["n_bars"] == 5031
    assert all(a[1] == b[0] for a, b in zip(ends, ends[1:], strict=False))  # stitched, in order
    assert summary["config"]["folds"]["n_folds"] == 3
    assert (run_dir / "report.html").is_file()  # by default; test_reliability: --no-report
    assert len(summary["data_sha256"]) == 64
    assert list((run_dir / "tensorboard").iterdir())
    with np.load(run_dir / summary["folds"][0]["returns_file"]) as z:
        n = z["agent"].shape[0]
        assert z["agent_cost"].shape == (n,) and (z["agent_cost"] >= 0).all()
        assert z["random_seeds"].shape == (16, n)
        np.testing.assert_array_equal(z["random_seeds"][0], z["random"])  # random: seed 0
    lo, hi = summary["stitched_random_test_sharpe_band"]
    assert lo <= hi and set(summary["stitched_random"]) == set(summary["stitched"]["random"])
    timings = json.loads((run_dir / "timings.json").read_text())
    stages = timings["stage_seconds"]  # where the time went, every stage of the run
    assert set(stages) == {"trees", "compile_ahead", "population", "start", "train_program",
                           "validation", "diagnostics", "checkpoints", "resume_state",
                           "resume_wait", "score", "report"}
    assert all(v >= 0 for v in stages.values())
    assert sum(stages.values()) <= timings["seconds_total"] + 1e-3
    [lap] = timings["epochs"]  # the one epoch, whole, and its stages
    assert lap["epoch"] == 0 and set(lap["stages"]) == stages.keys() - {
        "trees", "compile_ahead", "population", "start", "score", "report"}
    assert sum(lap["stages"].values()) <= lap["seconds"] + 1e-3
    assert timings["seconds_per_epoch"][0] <= lap["seconds"]


def test_the_training_program_is_compiled_while_the_trees_are_fit(smoke_run):
    """The programs compiled ahead on the placeholder fold data (`run.ahead`) are the ones the
    run calls: its initialisation, first epoch and first validation compile nothing, nor load
    from the persistent cache."""
    _, _, log = smoke_run
    lines = log.splitlines()
    ahead = [i for i, line in enumerate(lines) if "compiled in" in line and "beside the tree "
             "fits" in line]
    assert ahead
    for what in ("initialisation", "training", "validation"):
        assert ahead[0] < lines.index(f"{what} program: already compiled in this process")


def test_the_runs_table_reads_a_real_summary(smoke_run):
    """The keys `rl-trader runs` reads are the ones a run writes (its own tests fabricate them)."""
    from rl_trader.report.runs_table import run_rows

    _, run_dir, _ = smoke_run
    [row] = run_rows(run_dir.parent)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (row["status"], row["preset"], row["epochs"], row["folds"]) == ("done", "smoke", 1, 3)
    assert row["agent"] == summary["stitched_test_sharpe"]
    assert row["dsr"] == summary["headline"]["dsr"]
    assert None not in [row[k] for k in ("buy_and_hold", "random", "vol_target", "ridge", "dsr",
                                         "spa")]


def test_the_spa_is_of_the_stitched_test_returns_the_run_wrote(smoke_run):
    """The headline's SPA is Hansen's test of the agent against every baseline over the
    folds' `test_returns.npz`, joined in fold order."""
    from rl_trader.baselines.suite import BASELINES
    from rl_trader.evaluation.headline import superior_ability

    _, run_dir, _ = smoke_run
    summary = json.loads((run_dir / "summary.json").read_text())
    files = [np.load(run_dir / f["returns_file"]) for f in summary["folds"]]
    stitched = {name: np.concatenate([z[name] for z in files]) for name in ("agent", *BASELINES)}
    spa = summary["headline"]["spa"]
    assert list(spa["agent_beats"]) == list(BASELINES)
    assert spa == superior_ability(stitched.pop("agent"), stitched, summary["config"]["seed"])


def test_existing_run_dir_is_not_overwritten(smoke_run, capsys):
    _, run_dir, _ = smoke_run
    before = (run_dir / "summary.json").read_bytes()
    code = main(["--preset", "smoke", "--run-dir", str(run_dir)])
    assert code == 2
    assert "already exists" in capsys.readouterr().err
    assert (run_dir / "summary.json").read_bytes() == before


@pytest.mark.parametrize("argv, needle", [
    (["--folds", "0"], "--folds"),
    (["--epochs", "0"], "--epochs"),
    (["--lr", "-1"], "--lr"),
    (["--tau", "2"], "--tau"),
    (["--gamma", "1.5"], "--gamma"),
    (["--n-step", "0"], "--n-step"),
    (["--batch", "0"], "--batch"),
    (["--commission-bps", "-3"], "--commission-bps"),
    (["--data", "/nonexistent/file.csv"], "no such file"),
    (["--data", "synthetic:nope"], "unknown"),
    (["--data", "synthetic:ar1:400", "--folds", "3"], "--folds"),
])
def test_bad_options_exit_2_with_one_line(argv, needle, tmp_path, capsys):
    code = main(argv + ["--preset", "smoke", "--run-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert needle in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("argv", [["--folds", "x"], ["--preset", "huge"], ["--bogus"]])
def test_argparse_refusals_exit_2(argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2


def test_help_documents_the_options(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for opt in ("--data", "--folds", "--epochs", "--seed", "--preset", "--run-dir", "--lr",
                "--tau", "--gamma", "--n-step", "--batch", "--commission-bps",
                "--slippage-bps"):
        assert opt in out


def test_summary_json_is_the_typed_record_written_back(smoke_run):
    """summary.json is `RunSummary.to_json()` written as before the record existed: its keys in
    the order the dict-built file had (`RUN_KEYS`, `FOLD_KEYS` of tests/evaluation/
    test_record.py, matched against a file of the earlier code when the record came in), and
    read back and written again, the same bytes."""
    from rl_trader.evaluation.record import RunSummary
    from tests.evaluation.test_record import FOLD_KEYS as ORDER
    from tests.evaluation.test_record import RUN_KEYS

    _, run_dir, _ = smoke_run
    text = (run_dir / "summary.json").read_text()
    obj = json.loads(text)
    assert list(obj) == RUN_KEYS and all(list(f) == ORDER for f in obj["folds"])
    assert json.dumps(RunSummary.from_json(obj).to_json(), indent=2) + "\n" == text
