"""The report's figures: what the learning curves read from a run's epoch records."""

import base64
import math

import numpy as np

from rl_trader.report.plots import CURVES, curve_points, learning_curves


def _png(b64: str) -> bytes:
    raw = base64.b64decode(b64)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    return raw


def test_curve_points_skip_missing_none_and_nan():
    rows = [{"epoch": 0, "churn": None, "val_sharpe": 1.0},
            {"epoch": 1, "churn": 0.5, "val_sharpe": math.nan},
            {"epoch": 2, "churn": 0.25},
            {"churn": 0.1}]  # no epoch: not a point
    assert curve_points(rows, "churn") == [(1, 0.5), (2, 0.25)]
    assert curve_points(rows, "val_sharpe") == [(0, 1.0)]
    assert curve_points(rows, "forecast_ic") == []


def test_learning_curves_draw_every_diagnostic_and_an_older_run():
    rng = np.random.default_rng(0)
    keys = {k for _, a, b in CURVES for k in (a, b) if k}
    assert keys >= {"val_sharpe", "train_sharpe", "q_greedy", "realised_return", "churn",
                    "forecast_ic", "loss"}
    full = {fold: [{"epoch": e, **{k: float(rng.normal()) for k in keys},
                    "churn": None if e == 0 else 0.5,
                    "magnitude_fractions": [0.1, 0.2, 0.3, 0.2, 0.2]} for e in range(4)]
            for fold in (0, 1)}
    older = {0: [{"epoch": e, "loss": 1.0 / (e + 1), "val_sharpe": 0.1 * e} for e in range(3)]}
    a = _png(learning_curves(full, {0: 2, 1: 1}))
    b = _png(learning_curves(older, {0: 2}))
    assert len(a) > len(b)  # more drawn, more bytes
