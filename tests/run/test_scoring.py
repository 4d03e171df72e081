"""Scoring the best checkpoints on test: the validation program, reused."""

import dataclasses
import logging

import jax
import numpy as np

from rl_trader.baselines.gbm import GBM_LEAVES, GbmFits, candidate_iterations
from rl_trader.baselines.ridge import RIDGE_ALPHAS
from rl_trader.evaluation.metrics import sharpe_of
from rl_trader.run import experiment, scoring
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
        summary = experiment.run_experiment(prep, tmp_path / "run", log=lambda _: None).to_json()
    assert summary["scored_folds"] == [0, 1]
    compiled = [r.getMessage() for r in caplog.records
                if r.getMessage().startswith("Compiling jit(evaluate_ensemble)")]
    assert len(compiled) == 1, compiled
    # every choice made on validation is a trial: each epoch's ensemble and the candidates
    # of the tree-forecast column's choice (the gbm grid, ridge's penalties)
    trials, n_folds = summary["trials"], len(prep.folds)
    n_forecast = len(GBM_LEAVES) * len(candidate_iterations(prep.cfg)) + len(RIDGE_ALPHAS)
    assert n_forecast == 3 * 3 + 7  # the smoke preset's 25, 50 and 100 trees
    assert sum("forecast" in t for t in trials) == n_folds * n_forecast
    assert sum("epoch" in t for t in trials) == n_folds * prep.cfg.train.epochs
    assert len(trials) == n_folds * (prep.cfg.train.epochs + n_forecast)
    assert summary["headline"]["n_trials"] == len(trials) + 4321
    for k in range(n_folds):
        rows = scoring.with_forecast_rows(prep, [[np.zeros((1, prep.val_len))]] * n_folds)[k]
        assert [r.shape for r in rows] == [(1, prep.val_len), (n_forecast, prep.val_len)]
        cands = prep.tree_forecast_trials[k]
        assert [t["val_sharpe"] for t in trials if t.get("forecast") and t["fold"] == k] == [
            sharpe_of(r, prep.periods_per_year) for r in cands.values()]


def test_fewer_scored_folds_take_the_first_test_keys_or_a_split_of_their_own():
    """The test rollouts' keys of n scored folds are split(PRNGKey(seed + 1), n): the first n
    of the run's under jax's partitionable threefry (the default), split again without it."""
    from rl_trader.training.population import make_run_keys, members_of

    keys = make_run_keys(5, members_of(3, 1, [0]), 3, 3, 2)
    want = jax.random.split(jax.random.PRNGKey(6), 2)
    cfg = dataclasses.replace(tiny_config(), seed=5)
    np.testing.assert_array_equal(scoring.test_keys(keys, 2, cfg), want)
    np.testing.assert_array_equal(scoring.test_keys(keys, 3, cfg), keys.test)
    with jax.threefry_partitionable(False):
        np.testing.assert_array_equal(scoring.test_keys(keys, 2, cfg),
                                      jax.random.split(jax.random.PRNGKey(6), 2))


def test_baselines_made_while_training_equal_those_made_at_scoring():
    """`BaselinesOnTest` made on a host thread (an accelerator run, while it trains) give the
    rollouts and gbm fits that scoring would make itself, bit for bit, over the test block's
    shape bucket."""
    prep = prepare(tiny_config())
    data = [prep.fold_data(k) for k in range(len(prep.folds))]
    fits = GbmFits(data, prep.val_steps, prep.cfg, False, prep.gbm_fits)
    keys = scoring.random_keys(prep.cfg)
    ahead = scoring.BaselinesOnTest(prep, data, fits, keys, background=True)
    later = scoring.BaselinesOnTest(prep, data, fits, keys, background=False)
    for k in range(len(prep.folds)):
        (made, fit_made), (asked, fit_asked) = ahead.result(k), later.result(k)
        assert fit_made is fit_asked
        assert made.keys() == asked.keys() and "gbm" in made
        jax.tree.map(np.testing.assert_array_equal, made, asked)
        assert made["buy_and_hold"].returns.shape == (prep.test_steps,)
