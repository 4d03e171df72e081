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
