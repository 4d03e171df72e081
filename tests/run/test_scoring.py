"""Scoring the best checkpoints on test: the validation program, reused."""

import dataclasses
import json
import logging

import jax
import numpy as np
import pytest

from rl_trader.baselines.gbm import GBM_LEAVES, candidate_iterations
from rl_trader.baselines.ridge import RIDGE_ALPHAS
from rl_trader.cli import backtest as backtest_cli
from rl_trader.cli import predict as predict_cli
from rl_trader.data.prior import trailing_vol, vol_target_fraction, vol_target_scale
from rl_trader.evaluation.metrics import sharpe_of
from rl_trader.run import experiment, scoring
from rl_trader.run.prepare import prepare
from tests.helpers import tiny_config
from tests.run.test_inference import write_csv


def test_test_blocks_are_scored_by_the_validation_program(tmp_path, caplog):
    """The params are placed as in validation and rolled out by the same jitted function, so a
    test block as long as a validation block compiles no second rollout program: the
    population's `evaluate` (`train.evaluate_ensemble`) is compiled once in the whole run
    (validation, the train-segment probe and scoring). The run has a configuration of its own
    (a `--prior-trials` no other test uses: in `config.program_config`, read by no program),
    so no earlier run of this process has compiled its programs (`population.programs`)."""
    cfg = tiny_config()
    prep = prepare(dataclasses.replace(cfg, train=dataclasses.replace(cfg.train,
                                                                      prior_trials=4321)))
    assert prep.test_steps == prep.val_steps
    with caplog.at_level(logging.WARNING), jax.log_compiles(True):
        summary = experiment.run_experiment(prep, tmp_path / "run", log=lambda _: None).to_json()
    assert summary["scored_folds"] == [0, 1]
    compiled = [r.getMessage() for r in caplog.records
                if r.getMessage().startswith("Compiling jit(evaluate_ensemble)")]
    assert len(compiled) == 1, compiled
    # every choice made on validation is a trial: each epoch's ensemble, the rival, and the
    # candidates of the tree-forecast column's choice (the gbm grid, ridge's penalties)
    trials, n_folds = summary["trials"], len(prep.folds)
    n_forecast = len(GBM_LEAVES) * len(candidate_iterations(prep.cfg)) + len(RIDGE_ALPHAS)
    assert n_forecast == 3 * 3 + 7  # the smoke preset's 25, 50 and 100 trees
    assert sum("forecast" in t for t in trials) == n_folds * n_forecast
    assert sum("epoch" in t for t in trials) == n_folds * prep.cfg.train.epochs
    assert sum("rival" in t for t in trials) == n_folds
    assert len(trials) == n_folds * (prep.cfg.train.epochs + 1 + n_forecast)
    assert summary["headline"]["n_trials"] == len(trials) + 4321
    for k in range(n_folds):
        rows = scoring.with_forecast_rows(prep, [[np.zeros((1, prep.val_len))]] * n_folds)[k]
        assert [r.shape for r in rows] == [(1, prep.val_len), (n_forecast, prep.val_len)]
        cands = prep.tree_forecast_trials[k]
        assert [t["val_sharpe"] for t in trials if t.get("forecast") and t["fold"] == k] == [
            sharpe_of(r, prep.periods_per_year) for r in cands.values()]



def test_a_fold_whose_rival_wins_on_validation_acts_as_it_everywhere(tmp_path, monkeypatch,
                                                                    capsys):
    """`--rival vol_target`, the rival's validation Sharpe made to lose in fold 0 and win in
    fold 1: fold 0 acts as the agent (no rival file), fold 1's test figures, `predict` and
    `backtest` (which use the last fold) are `vol_target`'s at the fold's σ*, and the DSR
    counts one more trial a fold. The edge's t is taken against the chosen ensemble's
    validation returns and recorded, deciding nothing. A rival file that is not the
    checkpoint's is refused."""
    cfg = tiny_config()
    prep = prepare(dataclasses.replace(cfg, train=dataclasses.replace(cfg.train,
                                                                      rival="vol_target")))
    figures, seen = iter([(-1e3, 1.5), (1e3, 3.0)]), []  # scoring takes the folds in order

    def rival(prep, data, agent_val):  # (its Sharpe, the edge t, its returns)
        seen.append(agent_val)
        return (*next(figures), agent_val)

    monkeypatch.setattr(scoring, "vol_target_validation", rival)
    run_dir = tmp_path / "run"
    summary = experiment.run_experiment(prep, run_dir, log=lambda _: None).to_json()
    folds = summary["folds"]
    assert [f["acts_as"] for f in folds] == ["agent", "vol_target"]
    assert [f["vol_target_val_edge_t"] for f in folds] == [1.5, 3.0]
    ppy = summary["periods_per_year"]
    assert [sharpe_of(a, ppy) for a in seen] == [f["val_sharpe"] for f in folds]
    assert all(a.shape == (prep.val_len,) for a in seen)
    assert not (run_dir / "fold_0" / scoring.RIVAL_FILE).exists()
    assert folds[0]["test_sharpe"] != folds[0]["baseline_test_sharpes"]["vol_target"]
    assert folds[1]["test_sharpe"] == folds[1]["baseline_test_sharpes"]["vol_target"]
    rival = json.loads((run_dir / "fold_1" / scoring.RIVAL_FILE).read_text())
    sigma = rival["sigma_star"]
    assert sigma == pytest.approx(vol_target_scale(trailing_vol(prep.bars.close),
                                                  *prep.folds[1].train))
    assert (rival["agent_val_sharpe"], rival["epoch"]) == (folds[1]["val_sharpe"],
                                                           folds[1]["best_epoch"])
    assert rival["agent_edge_t"] == 3.0
    with np.load(run_dir / folds[0]["returns_file"]) as z0, \
            np.load(run_dir / folds[1]["returns_file"]) as z1:
        assert not np.array_equal(z0["agent"], z0["vol_target"])
        np.testing.assert_array_equal(z1["agent"], z1["vol_target"])
        stitched = np.concatenate([z0["agent"], z1["agent"]])
    assert summary["stitched_test_sharpe"] == pytest.approx(
        sharpe_of(stitched, summary["periods_per_year"]))
    assert sum("rival" in t for t in summary["trials"]) == len(folds)
    assert summary["headline"]["n_trials"] == len(summary["trials"]) + cfg.train.prior_trials
    csv = write_csv(prep.bars, tmp_path / "bars.csv")
    assert predict_cli.main([str(run_dir), csv, "--json"]) == 0
    pred = json.loads(capsys.readouterr().out)
    vol = trailing_vol(prep.bars.close)
    assert pred["acts_as"] == "vol_target"
    assert pred["target"]["fraction"] == pytest.approx(
        float(vol_target_fraction(vol[-1], sigma)), rel=1e-5)
    assert backtest_cli.main([str(run_dir), csv, "--out", str(tmp_path / "bt")]) == 0
    capsys.readouterr()
    bt = json.loads((tmp_path / "bt" / "summary.json").read_text())
    assert bt["folds"][0]["acts_as"] == "vol_target"
    with np.load(tmp_path / "bt" / bt["folds"][0]["returns_file"]) as z:
        decided = z["bars"] - 1  # each bar's position is decided at the previous close
        np.testing.assert_allclose(z["agent_position"],
                                   np.asarray(vol_target_fraction(vol[decided], sigma)),
                                   rtol=1e-5)
    # fold 0 acts as the agent; fold 1's rival file copied into it, or one of another epoch
    # in fold 1, is not the checkpoint's
    assert predict_cli.main([str(run_dir), csv, "--fold", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["acts_as"] == "agent"
    (run_dir / "fold_0" / scoring.RIVAL_FILE).write_text(json.dumps(rival))
    (run_dir / "fold_1" / scoring.RIVAL_FILE).write_text(
        json.dumps({**rival, "epoch": rival["epoch"] + 1}))
    for fold in (0, 1):
        assert predict_cli.main([str(run_dir), csv, "--fold", str(fold)]) == 2
        err = capsys.readouterr().err.strip()
        assert f"rival.json: does not belong to fold {fold}'s checkpoint" in err
        assert "\n" not in err
