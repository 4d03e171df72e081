"""Tests for rl_trader.agent.replay: n-step returns with truncation/termination, the ring, sampling
range.

Every stored row gets a unique bar (per row and env), so the sampled window's start is read back
from `state_tm1.t` and checked against returns worked out by hand.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl_trader import env
from rl_trader.agent import replay

GAMMA = 0.5
sample = jax.jit(replay.sample, static_argnums=(2, 3, 4))
add = jax.jit(replay.add)


def example():
    return replay.Step(state_tm1=env.reset(jnp.int32(0), jnp.int32(0)), direction=jnp.int32(0),
                       magnitude=jnp.int32(0), reward=jnp.float32(0.0),
                       portfolio_t=jnp.zeros(2), terminated=jnp.bool_(False),
                       last=jnp.bool_(False))


def tagged_state(bars):
    """Env states [n] at `bars` whose every field is a distinct function of the bar."""
    bars = np.asarray(bars, np.int32)
    tag = bars.astype(np.float32)
    return env.EnvState(t=jnp.asarray(bars), stop=jnp.asarray(bars + 7),
                        equity=jnp.asarray(1.0 + tag), units=jnp.asarray(-tag),
                        peak=jnp.asarray(2.0 + tag), entry_price=jnp.asarray(3.0 + tag),
                        bars_in_position=jnp.asarray(4.0 + tag), last_cost=jnp.asarray(tag / 8))


def row(bars, rewards, last=None, terminated=None):
    """One replay row for len(bars) envs; states and portfolio features are tagged with the bar."""
    bars = np.asarray(bars, np.int32)
    n = len(bars)
    last = np.zeros(n, bool) if last is None else np.asarray(last, bool)
    terminated = np.zeros(n, bool) if terminated is None else np.asarray(terminated, bool)
    tag = bars.astype(np.float32)
    return replay.Step(state_tm1=tagged_state(bars),
                       direction=jnp.asarray(bars % 3), magnitude=jnp.asarray(bars % 4),
                       reward=jnp.asarray(rewards, jnp.float32),
                       portfolio_t=jnp.asarray(np.stack([tag + 0.5, -tag - 0.5], 1)),
                       terminated=jnp.asarray(terminated), last=jnp.asarray(last | terminated))


def build(rows, capacity):
    buf = replay.init(example(), capacity, len(rows[0].direction))
    for r in rows:
        buf = add(buf, r)
    return buf


# One env, n = 3, γ = 0.5, rewards (1, 2, 4) at bars (10, 11, 12); exactly n rows written, so the
# only window starts at bar 10.  Columns: flags (last at, terminated at), G, discount, bar_t.
SINGLE_CASES = {
    "no boundary": ((), (), 1 + 0.5 * 2 + 0.25 * 4, 0.5**3, 13),
    "truncated at step 1": ((1,), (), 1 + 0.5 * 2, 0.5**2, 12),
    "terminated at step 1": ((1,), (1,), 1 + 0.5 * 2, 0.0, 12),
    "truncated at step 0": ((0,), (), 1.0, 0.5, 11),
    "terminated at step 0": ((0,), (0,), 1.0, 0.0, 11),
    "truncated at the last step": ((2,), (), 3.0, 0.5**3, 13),
    "terminated at the last step": ((2,), (2,), 3.0, 0.0, 13),
    "two episode ends": ((0, 1), (), 1.0, 0.5, 11),
}


def check_sample(b, expected: dict) -> np.ndarray:
    """Every sampled window starts at an expected bar and has its (return, discount, bootstrap
    bar); returns the expected rows in sample order."""
    assert set(np.asarray(b.state_tm1.t).tolist()) == set(expected)
    want = np.asarray([expected[int(x)] for x in b.state_tm1.t])
    np.testing.assert_allclose(b.return_t, want[:, 0], rtol=1e-6)
    np.testing.assert_allclose(b.discount_t, want[:, 1], rtol=1e-6)
    np.testing.assert_array_equal(b.bar_t, want[:, 2].astype(int))
    return want


@pytest.mark.parametrize("case", list(SINGLE_CASES))
def test_n_step_window_by_hand(case):
    last_at, term_at, ret, discount, bar_t = SINGLE_CASES[case]
    bars = [10, 11, 12]
    if last_at:  # a reset after an episode end jumps to an unrelated bar
        bars = [b if i <= min(last_at) else 50 + i for i, b in enumerate(bars)]
    rows = [row([bars[i]], [2.0**i], last=[i in last_at], terminated=[i in term_at])
            for i in range(3)]
    buf = build(rows, capacity=5)
    b = sample(buf, jax.random.key(0), 4, 3, GAMMA)
    chex.assert_shape([b.state_tm1.t, b.return_t, b.discount_t, b.bar_t], (4,))
    chex.assert_shape(b.portfolio_t, (4, 2))
    chex.assert_trees_all_equal(b.state_tm1, tagged_state([10] * 4))
    np.testing.assert_array_equal(b.direction_tm1, 10 % 3)
    np.testing.assert_array_equal(b.magnitude_tm1, 10 % 4)
    np.testing.assert_allclose(b.return_t, ret, rtol=1e-6)
    np.testing.assert_allclose(b.discount_t, discount, rtol=1e-6)
    np.testing.assert_array_equal(b.bar_t, bar_t)
    # The bootstrap portfolio is the one stored with the window's last live step (bar_t − 1).
    np.testing.assert_array_equal(b.portfolio_t, [[bar_t - 0.5, -(bar_t - 0.5)]] * 4)


@pytest.mark.parametrize("truncate_row4", [False, True])
def test_ring_wraps_around(truncate_row4):
    """Capacity 4, six rows written (bars 100 … 105, rewards 1 … 6), n = 3.

    The ring holds rows 2 … 5; windows may start at rows 2 and 3 only, and the window from row 3
    reads ring slots 3, 0, 1 (rows 3, 4, 5).
    """
    rows = [row([100 + i], [i + 1.0], last=[truncate_row4 and i == 4]) for i in range(6)]
    buf = build(rows, capacity=4)
    assert int(buf.pos) == 2 and int(buf.size) == 4
    if truncate_row4:
        expected = {102: (3 + 0.5 * 4 + 0.25 * 5, 0.125, 105),  # ends at row 4 (m = 2)
                    103: (4 + 0.5 * 5, 0.25, 105)}  # m = 1
    else:
        expected = {102: (3 + 0.5 * 4 + 0.25 * 5, 0.125, 105),
                    103: (4 + 0.5 * 5 + 0.25 * 6, 0.125, 106)}
    check_sample(sample(buf, jax.random.key(1), 256, 3, GAMMA), expected)


def two_env_rows(n_rows):
    """Env 0: rewards 1, 2, 3, …, no episode end. Env 1: rewards 10, 20, …, truncated after row
    1 and terminated after row 3. Bars: 1000·env + 10·row + 1."""
    rows = []
    for i in range(n_rows):
        rows.append(row([10 * i + 1, 1000 + 10 * i + 1], [i + 1.0, 10.0 * (i + 1)],
                        last=[False, i == 1], terminated=[False, i == 3]))
    return rows


def test_many_samples_two_envs_by_hand():
    """5 rows in a ring of 8, n = 2: windows start at rows 0 … 3 of either env, never row 4."""
    buf = build(two_env_rows(5), capacity=8)
    # start bar: (G, discount, bar_t), worked out by hand with γ = 0.5.
    expected = {
        1: (1 + 0.5 * 2, 0.25, 12), 11: (2 + 0.5 * 3, 0.25, 22),
        21: (3 + 0.5 * 4, 0.25, 32), 31: (4 + 0.5 * 5, 0.25, 42),
        1001: (10 + 0.5 * 20, 0.25, 1012),  # truncation at row 1 ends the window at m = 1
        1011: (20.0, 0.5, 1012),  # the window's first step ends the episode: m = 0
        1021: (30 + 0.5 * 40, 0.0, 1032),  # termination at row 3
        1031: (40.0, 0.0, 1032),
    }
    b = sample(buf, jax.random.key(2), 1024, 2, GAMMA)
    want = check_sample(b, expected)
    np.testing.assert_array_equal(b.portfolio_t[:, 0], want[:, 2] - 0.5)
    chex.assert_trees_all_equal(b.state_tm1, tagged_state(b.state_tm1.t))


@pytest.mark.parametrize("n_rows, allowed_rows", [(2, [0]), (5, range(0, 4)), (8, range(0, 7)),
                                                  (11, range(3, 10))])
def test_windows_start_only_in_fully_followed_rows(n_rows, allowed_rows):
    """Capacity 8, n = 2: a window starts at a live row that has n − 1 written rows after it."""
    buf = build(two_env_rows(n_rows), capacity=8)
    assert int(buf.size) == min(n_rows, 8) and int(buf.pos) == n_rows % 8
    b = sample(buf, jax.random.key(3), 1024, 2, GAMMA)
    allowed = {10 * i + 1 + 1000 * e for i in allowed_rows for e in (0, 1)}
    assert set(np.asarray(b.state_tm1.t).tolist()) == allowed


def test_add_writes_one_row_at_pos():
    buf = replay.init(example(), 3, 2)
    chex.assert_shape([buf.data.state_tm1.t, buf.data.state_tm1.equity, buf.data.reward], (3, 2))
    chex.assert_shape(buf.data.portfolio_t, (3, 2, 2))
    assert buf.data.last.dtype == jnp.bool_ and buf.data.state_tm1.t.dtype == jnp.int32
    for i in range(4):
        buf = add(buf, row([i, 100 + i], [1.0, 2.0]))
    assert int(buf.pos) == 1 and int(buf.size) == 3
    np.testing.assert_array_equal(buf.data.state_tm1.t, [[3, 103], [1, 101], [2, 102]])
    # Every field of the stored env state is the one written.
    for i, bars in enumerate([[3, 103], [1, 101], [2, 102]]):
        chex.assert_trees_all_equal(jax.tree.map(lambda x, i=i: x[i], buf.data.state_tm1),
                                    tagged_state(bars))


def test_footprint_per_stored_step():
    """The train layout (the whole env state, P = 5 post-step features) stays tens of bytes."""
    step = example().replace(portfolio_t=jnp.zeros(len(env.PORTFOLIO_NAMES)))
    buf = replay.init(step, 16, 4)
    per_step = sum(x.nbytes for x in jax.tree.leaves(buf.data)) / (16 * 4)
    assert per_step == sum(jnp.asarray(x).nbytes for x in jax.tree.leaves(step))
    assert per_step <= 96


class SampleVariantsTest(chex.TestCase):
    """Sampling is a pure function: the same batch, shapes and dtypes with and without jit."""

    @chex.variants(with_jit=True, without_jit=True)
    def test_sample_with_and_without_jit(self):
        buf = build(two_env_rows(5), capacity=8)
        fn = self.variant(lambda b, k: replay.sample(b, k, 16, 3, jnp.float32(GAMMA)))
        got = fn(buf, jax.random.PRNGKey(4))
        want = sample(buf, jax.random.PRNGKey(4), 16, 3, GAMMA)
        chex.assert_trees_all_close(got, want, rtol=1e-6)
        chex.assert_shape([got.return_t, got.discount_t, got.bar_t], (16,))
        chex.assert_type([got.return_t, got.discount_t, got.state_tm1.equity], jnp.float32)
        chex.assert_type([got.bar_t, got.state_tm1.t, got.direction_tm1], jnp.int32)
