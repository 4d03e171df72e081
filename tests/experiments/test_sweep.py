"""The validation-only sweep: the main job's population and selection, no test block touched."""

import json

import numpy as np

from experiments.sweep import main, split_half_ratio

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
    assert all(len(r["split_half_by_fold"]) == 2 for r in rows)
    hold = np.load(run / "buy_hold_val_returns.npy")  # [fold, bar], for experiments.study
    assert hold.shape == np.load(run / "oracle_val_returns.npy").shape == (
        2, val["val_returns"].shape[-1])
    assert np.isfinite(hold).all() and np.abs(hold).sum() > 0
    ridge, ridge_ic = np.load(run / "ridge_val_returns.npy"), np.load(run / "ridge_val_ic.npy")
    assert ridge.shape == hold.shape and np.isfinite(ridge).all()
    assert ridge_ic.shape == (2,) and np.all(np.abs(ridge_ic) <= 1)
    assert "ridge val Sharpe by fold" in out
    for fold in summary["folds"]:  # the agent's forecast IC, every epoch
        assert all(-1 <= e["forecast_ic"] <= 1 for e in fold["epochs"])


def test_split_half_ratio_chooses_on_one_half_and_scores_on_the_other():
    rng = np.random.default_rng(0)
    oracle = rng.normal(0.003, 0.01, 400)
    # epoch 0 is a noisy oracle on the first half only, epoch 1 on the second half only
    noisy = oracle + rng.normal(0, 0.002, 400)
    e0 = np.concatenate([noisy[:200], -oracle[200:]])
    e1 = np.concatenate([-oracle[:200], noisy[200:]])
    # chosen on A: e0, scored on B: −1; chosen on B: e1, scored on A: −1
    assert split_half_ratio(np.stack([e0, e1]), oracle, 252) == -1.0
    # an epoch equal to the oracle everywhere is chosen both ways and scores 1
    assert split_half_ratio(np.stack([e0, oracle, e1]), oracle, 252) == 1.0


def test_sweep_refuses_the_gates_fresh_data_seeds(tmp_path, capsys):
    argv = ARGS[:2] + ["--data", "synthetic:ar1:1200:1000", "--run-dir", str(tmp_path / "r")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "--data" in err and "seeds < 1000" in err and "\n" not in err
    assert not (tmp_path / "r").exists()
