"""Learning happens: on a strong planted signal the agent beats zero and the random policy.

A small CPU budget (one epoch of 400 steps of 16 envs on synthetic:ar1_strong, φ = 0.5) is
enough for a working learner to reach a large fraction of the oracle's test Sharpe; a broken
one (wrong target, no gradient, a sign error) stays near zero.
"""

import json

import numpy as np
import pytest

from rl_trader.cli.train import main
from rl_trader.evaluation.metrics import sharpe

ARGS = ["--preset", "smoke", "--data", "synthetic:ar1_strong:3000:1", "--folds", "2",
        "--epochs", "1", "--envs", "16", "--steps-per-epoch", "400", "--batch", "64",
        "--lr", "3e-3", "--obs-noise", "1.0", "--gamma", "0.5", "--no-report"]


def test_agent_learns_a_planted_signal(tmp_path):
    assert main(ARGS + ["--run-dir", str(tmp_path / "run")]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    for fold in summary["folds"]:
        random_mean = fold["random_test_sharpe_mean"]
        random_std = fold["random_test_sharpe_std"]
        assert fold["test_sharpe"] > 2.0, fold
        assert fold["test_sharpe"] > random_mean + 3 * random_std, fold
        assert fold["test_sharpe"] > 0.4 * fold["oracle_test_sharpe"], fold
        with np.load(tmp_path / "run" / fold["returns_file"]) as z:  # the oracle's returns
            assert sharpe(z["oracle"], summary["periods_per_year"]) == pytest.approx(
                fold["oracle_test_sharpe"])
    assert "stitched_oracle_test_sharpe" in summary
