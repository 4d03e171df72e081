"""Scoring the best checkpoints on test: the validation program, reused."""

import dataclasses
import logging

import jax

from rl_trader.run import experiment
from rl_trader.run.prepare import prepare
from tests.helpers import tiny_config


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
        summary = experiment.run_experiment(prep, tmp_path / "run", log=lambda _: None)
    assert summary["scored_folds"] == [0, 1]
    compiled = [r.getMessage() for r in caplog.records
                if r.getMessage().startswith("Compiling jit(evaluate_ensemble)")]
    assert len(compiled) == 1, compiled


def test_folds_whose_rival_wins_on_validation_act_as_it_everywhere(tmp_path, monkeypatch,
                                                                   capsys):
    """`--rival vol_target` with the rival winning every fold's validation (its Sharpe made
    huge): each fold's test figures, the stitched record, `predict` and `backtest` are
    `vol_target`'s at the fold's σ*, and the DSR counts one more trial a fold."""
    import json

    import jax.numpy as jnp
    import numpy as np
    import pytest

    from rl_trader.cli import backtest as backtest_cli
    from rl_trader.cli import predict as predict_cli
    from rl_trader.evaluation.vol_target import (
        trailing_vol,
        vol_target_fraction,
        vol_target_scale,
    )
    from rl_trader.run import scoring
    from tests.run.test_inference import write_csv

    cfg = tiny_config()
    prep = prepare(dataclasses.replace(cfg, train=dataclasses.replace(cfg.train,
                                                                      rival="vol_target")))
    monkeypatch.setattr(scoring, "vol_target_val_sharpe",
                        lambda data, val_steps, cfg: jnp.float32(1e3))
    run_dir = tmp_path / "run"
    summary = experiment.run_experiment(prep, run_dir, log=lambda _: None)
    folds = summary["folds"]
    assert [f["acts_as"] for f in folds] == ["vol_target"] * len(prep.folds)
    for k, f in enumerate(folds):
        assert f["test_sharpe"] == f["baseline_test_sharpes"]["vol_target"]
        rival = json.loads((run_dir / f"fold_{f['fold']}" / scoring.RIVAL_FILE).read_text())
        data = prep.fold_data(k)
        assert rival["sigma_star"] == pytest.approx(
            float(vol_target_scale(data.prices.close, data.train)))
        assert rival["agent_val_sharpe"] == f["val_sharpe"]
        with np.load(run_dir / f["returns_file"]) as z:
            np.testing.assert_array_equal(z["agent"], z["vol_target"])
    assert summary["stitched"]["agent"] == summary["stitched"]["vol_target"]
    assert sum("rival" in t for t in summary["trials"]) == len(folds)
    assert summary["headline"]["n_trials"] == len(summary["trials"]) + cfg.train.prior_trials
    sigma = rival["sigma_star"]  # the last fold's, which predict and backtest use
    csv = write_csv(prep.bars, tmp_path / "bars.csv")
    assert predict_cli.main([str(run_dir), csv, "--json"]) == 0
    pred = json.loads(capsys.readouterr().out)
    vol = np.asarray(trailing_vol(jnp.asarray(prep.bars.close, jnp.float32)))
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
