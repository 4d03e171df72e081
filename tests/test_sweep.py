"""The validation-only sweep: the main job's population and selection, no test block touched."""

import json

import numpy as np

from experiments.sweep import main

ARGS = ["--preset", "smoke", "--data", "synthetic:ar1:1200:1", "--folds", "2", "--epochs", "2",
        "--envs", "4", "--steps-per-epoch", "8", "--batch", "8", "--seeds", "2",
        "--sweep", "gamma=0.9,0.5"]


def test_sweep_reports_validation_only(tmp_path, capsys):
    run = tmp_path / "sweep"
    assert main(ARGS + ["--run-dir", str(run), "--out", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert "oracle val Sharpe by fold" in out
    summary = json.loads((run / "summary.json").read_text())
    assert summary["validation_only"] is True
    assert "test_sharpe" not in json.dumps(summary)  # the test blocks were never scored
    assert not list(run.glob("fold_*/test_returns.npz"))
    # one trial per (fold, epoch, setting) ensemble of 2 seeds
    assert len(summary["trials"]) == 2 * 2 * 2
    assert {t["seeds"] for t in summary["trials"]} == {2}
    rows = json.loads((tmp_path / "s.json").read_text())["rows"]
    assert [r["setting"]["gamma"] for r in rows] == [0.9, 0.5]
    for k, fold in enumerate(summary["folds"]):  # the table is the best epoch of each setting
        for s, row in enumerate(rows):
            best = max(t["val_sharpe"] for t in summary["trials"]
                       if t["fold"] == k and t["setting"] == s)
            assert row["val_sharpe_by_fold"][k] == best == fold["best_val_sharpe_by_setting"][s]
    val = np.load(run / "validation_returns.npz")
    assert val["val_returns"].shape[:2] == (2, 4)  # [epoch, ensemble = fold × setting]
