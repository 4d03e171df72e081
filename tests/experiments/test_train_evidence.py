"""Study 37's train evidence from a finished run: the gbm forecast, cross-fitted on each fold's
train segment, traded there as the gbm baseline trades, against `vol_target` on the same bars."""

import json
import shutil

import jax
import numpy as np
import pytest

from experiments.train_evidence import EVIDENCE_FILE, main
from rl_trader.baselines.gbm import cross_fitted_forecast
from rl_trader.baselines.ridge import Forecast
from rl_trader.baselines.suite import baseline_rollouts
from rl_trader.config import config_from_dict
from rl_trader.evaluation.metrics import sharpe_of
from rl_trader.run.prepare import gbm_fit, prepare


def test_each_fold_gets_the_edge_t_of_the_baselines_own_trading_on_its_train_bars(
        gate_run, tmp_path, capsys):
    """The figures are those of the run's own baselines (`baseline_rollouts`: the gbm rule
    on the cross-fitted forecast, `vol_target`) over each fold's train segment."""
    run = tmp_path / gate_run.name
    shutil.copytree(gate_run, run)
    assert main([str(run)]) == 0
    assert "fold 1" in capsys.readouterr().out
    folds = json.loads((run / EVIDENCE_FILE).read_text())["folds"]
    summary = json.loads((run / "summary.json").read_text())
    prep = prepare(config_from_dict(summary["config"]))
    assert [f["fold"] for f in folds] == [0, 1]
    for f in folds:
        k = f["fold"]
        data = prep.fold_data(k)
        fit = gbm_fit(prep, k)
        n = prep.folds[k].train[1] - prep.folds[k].train[0]
        assert f["train_bars"] == n and isinstance(f["gbm_train_edge_t"], float)
        y_hat = cross_fitted_forecast(data, fit, prep.folds[k].gap)
        gbm = Forecast(y_hat=jax.numpy.asarray(y_hat, jax.numpy.float32),
                       scale=fit.forecast.scale)
        ref = baseline_rollouts(data, data.train[0], n, prep.cfg,
                                jax.random.split(jax.random.PRNGKey(0), 1), prep.val_steps,
                                gbm)
        ppy = prep.periods_per_year
        assert f["gbm_train_sharpe"] == pytest.approx(sharpe_of(ref["gbm"].returns, ppy))
        # two programs of the same float32 rollout: XLA may fuse the step differently
        assert f["vol_target_train_sharpe"] == pytest.approx(
            sharpe_of(ref["vol_target"].returns, ppy), rel=1e-5)
    assert np.isfinite([f["gbm_train_edge_t"] for f in folds]).all()


def test_a_run_whose_data_is_not_the_saved_one_is_refused(gate_run, tmp_path, capsys):
    run = tmp_path / "other"
    shutil.copytree(gate_run, run)
    summary = json.loads((run / "summary.json").read_text())
    summary["data_sha256"] = "0" * 64
    (run / "summary.json").write_text(json.dumps(summary))
    assert main([str(run)]) == 2
    assert "SHA-256 differs" in capsys.readouterr().err
    assert not (run / EVIDENCE_FILE).exists()
