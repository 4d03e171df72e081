"""Learning diagnostics computed from the validation rollouts."""

import jax
import numpy as np
import pytest

from rl_trader.agent.learner import init_train_state
from rl_trader.config import AgentConfig
from rl_trader.errors import InputError
from rl_trader.run.run_state import (
    Diagnostics,
    check_resumable,
    diagnostics_fields,
    diagnostics_of,
    direction_fractions,
    discounted_returns,
    forecast_ic,
    horizon,
    magnitude_fractions,
    runner_layout,
)


def test_forecast_ic_is_the_pearson_correlation_and_nan_without_a_forecast():
    rng = np.random.default_rng(0)
    y = rng.normal(size=500)
    f = 0.3 * y + rng.normal(size=500)
    fc, yc = f - f.mean(), y - y.mean()
    want = (fc @ yc) / np.sqrt((fc @ fc) * (yc @ yc))
    np.testing.assert_allclose(forecast_ic(f, y), want, rtol=1e-12)
    assert forecast_ic(-f, y) == -forecast_ic(f, y)
    assert np.isnan(forecast_ic(np.zeros(500), y))  # a baseline's zero forecast


def test_an_undefined_forecast_ic_is_null_in_the_summary():
    """A constant forecast has no IC: the epoch's record says None (JSON null, never NaN)."""
    d = Diagnostics.zeros(2, 1, 4)
    d.forecast_ic[0, 0], d.forecast_ic[1, 0] = np.nan, 0.25
    assert diagnostics_of(d, 0, 0)["forecast_ic"] is None
    assert diagnostics_of(d, 1, 0)["forecast_ic"] == 0.25


def test_discounted_returns_and_horizon_by_hand():
    g = discounted_returns(np.array([[1.0, 2.0, 4.0]]), np.array([0.5]))
    np.testing.assert_allclose(g, [[1 + 0.5 * 2 + 0.25 * 4, 2 + 0.5 * 4, 4.0]])
    assert horizon(0.0) == 1 and horizon(0.5) == 7  # 0.5^7 < 0.01 ≤ 0.5^6


def test_magnitude_fractions_bin_the_absolute_positions():
    got = magnitude_fractions(np.array([0.0, -0.2, 0.25, 0.3, -0.75, 1.0, 0.9, 0.0]))
    np.testing.assert_allclose(got, [0.25, 0.25, 0.125, 0.125, 0.25])


def test_direction_fractions_count_short_flat_and_long_bars():
    got = direction_fractions(np.array([0.0, -0.2, 0.25, 0.3, -0.75, 1.0, 0.9, 1e-7]))
    np.testing.assert_allclose(got, [0.25, 0.25, 0.5])


LAYOUT = ["['learner'].params['w']", "['learner'].opt_state.mu", "['key']"]


def test_a_resume_state_with_other_diagnostics_is_refused_in_one_line():
    meta = {"epochs_done": 2, "diagnostics": diagnostics_fields(), "runner_layout": LAYOUT}
    check_resumable(meta, "runs/x", LAYOUT)
    assert meta == {"epochs_done": 2}  # the field lists are popped: Progress reads the rest
    assert "forecast_ic" in diagnostics_fields()
    for old in ({"epochs_done": 2}, {"diagnostics": ["train_sharpe", "q_greedy"]}):
        with pytest.raises(InputError, match="option --resume: the run in 'runs/x' was saved "
                                             "by a version with other learning diagnostics"):
            check_resumable(old, "runs/x", LAYOUT)


def test_a_resume_state_of_another_training_state_is_refused_in_one_line():
    """A state saved before the layout was recorded (its top-level field names only), or with
    another layout (a field more, an optimiser state of another form: the leaf-by-leaf Adam
    moments before 2026-12-07), is refused saying where the layouts part, not restored into
    the wrong leaves or read as a corrupt checkpoint."""
    leaf_by_leaf = [LAYOUT[0], "['learner'].opt_state[1][0].mu['w']", "['key']"]
    for saved, says in ((None, "saved before the layout was recorded"),
                        (leaf_by_leaf, "['learner'].opt_state[1][0].mu['w'] saved where this "
                                       "version has ['learner'].opt_state.mu"),
                        (LAYOUT[:2], "nothing saved where this version has ['key']")):
        meta = {"diagnostics": diagnostics_fields(), "runner": ["learner", "key"]}
        if saved is not None:
            meta["runner_layout"] = saved
        with pytest.raises(InputError) as e:
            check_resumable(meta, "runs/x", LAYOUT)
        assert str(e.value) == (
            f"option --resume: the run in 'runs/x' was saved with a training state of another "
            f"layout ({says}): by another version, or on another backend (the optimiser's state "
            f"is raveled on a CPU alone); start a new run, or resume it where it was saved")


def test_the_layout_names_every_leaf_of_the_training_state():
    """Every leaf of a state, nested fields included (the learner's params and its optimiser's
    state), in the order the resume state saves them."""
    params = {"dense": {"kernel": np.zeros((2, 3), np.float32), "bias": np.zeros(3, np.float32)}}
    state = init_train_state(params, AgentConfig())
    layout = runner_layout(state)
    assert layout == [jax.tree_util.keystr(p) for p, _ in
                      jax.tree_util.tree_flatten_with_path(state)[0]]
    assert len(layout) == len(jax.tree.leaves(state)) == 2 + 2 + 3 + 1  # params, target, Adam
    assert {".params['dense']['kernel']", ".opt_state.mu", ".opt_state.nu",
            ".step"} <= set(layout)
