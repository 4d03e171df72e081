"""Tests for rl_trader.agent.generic_head: BDQ double-DQN targets and losses, taken and
full-action backups, per-branch exploration."""

from __future__ import annotations

from functools import partial

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl_trader import env
from rl_trader.agent import generic_head, learner
from rl_trader.agent.generic_head import QOut
from rl_trader.agent.networks import Obs
from rl_trader.config import AgentConfig, EnvConfig
from rl_trader.env import FLAT
from tests.agent.test_learner import (
    CFG,
    TAU,
    B,
    F,
    L,
    M,
    P,
    backups_of,
    ema,
    leaves_with_paths,
    make_batch,
    q_loss_of,
    small_qnet,
)
from tests.helpers import make_obs


@pytest.fixture(scope="module")
def qnet():
    return small_qnet()


def test_update_wires_online_selector_and_target_value(qnet):
    """update's loss is q_loss with Q(θ) at t−1, Q(θ) selecting at t and Q(θ̄) valuing at t."""
    net, params, update = qnet
    rng = np.random.default_rng(1)
    target = jax.tree.map(lambda x: x + 0.3 * jnp.asarray(rng.normal(size=x.shape), x.dtype),
                          params)
    state = learner.init_train_state(params, CFG).replace(target_params=target)
    batch = make_batch(6)
    obs_tm1, obs_t, *rest = batch

    @jax.jit
    def loss(p_tm1, p_sel, p_val):
        return q_loss_of(net.apply(p_tm1, obs_tm1), net.apply(p_sel, obs_t),
                         net.apply(p_val, obs_t), *rest, CFG, CFG.aux_weight)[0]

    _, info = update(state, batch)
    np.testing.assert_allclose(info.loss, loss(params, params, target), rtol=1e-5)
    assert abs(float(loss(params, target, params)) - float(info.loss)) > 1e-4


# --- per-transition math --------------------------------------------------------------------


def td(q_dir_tm1, q_mag_tm1, a_dir, a_mag, r, discount, val_dir, val_mag, sel_dir, sel_mag):
    f = jnp.asarray
    return generic_head.branching_double_q_td(
        (f(q_dir_tm1, jnp.float32), f(q_mag_tm1, jnp.float32)),
        (jnp.int32(a_dir), jnp.int32(a_mag)), jnp.float32(r), jnp.float32(discount),
        (f(val_dir, jnp.float32), f(val_mag, jnp.float32)),
        (f(sel_dir, jnp.float32), f(sel_mag, jnp.float32)))


def test_double_q_uses_online_argmax_and_target_value():
    # Selector (online) picks long (2) and magnitude 0; the target's own argmaxes (1 and 1) and
    # the selector's values would give different numbers.
    # y = 1 + 0.5 · mean(Q̄_dir[2] = 2, Q̄_mag[0] = 4) = 2.5
    delta, mask = td([0.1, 0.2, 0.5], [0.0, 0.3, 0.0, 0.0], 2, 1, 1.0, 0.5,
                     [5.0, 6.0, 2.0], [4.0, 10.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(delta, [2.5 - 0.5, 2.5 - 0.3], rtol=1e-6)
    np.testing.assert_array_equal(mask, [1.0, 1.0])


def test_greedy_flat_next_direction_drops_magnitude_from_bootstrap():
    assert FLAT == 1
    # Greedy next direction is flat: y = 0.2 + 0.9 · Q̄_dir[1] = 0.2 + 0.9 · 1 = 1.1
    # (with the magnitude branch it would be 0.2 + 0.9 · (1 + 100) / 2).
    delta, mask = td([0.0, 0.0, 0.4], [0.0, 0.0, 0.0, 9.0], 2, 3, 0.2, 0.9,
                     [7.0, 1.0, 3.0], [0.0, 0.0, 100.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 0.0])
    np.testing.assert_allclose(delta, [1.1 - 0.4, 1.1 - 9.0], rtol=1e-6)
    np.testing.assert_array_equal(mask, [1.0, 1.0])


def test_taken_flat_direction_masks_the_magnitude_branch():
    # Taken direction flat: the magnitude TD error is computed but masked out.
    # y = 0.5 + 0.5 · mean(Q̄_dir[0] = 2, Q̄_mag[3] = 6) = 2.5
    delta, mask = td([1.0, 0.75, 0.0], [0.0, 0.0, 0.0, 0.0], 1, 2, 0.5, 0.5,
                     [2.0, 0.0, 0.0], [0.0, 0.0, 0.0, 6.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(delta, [2.5 - 0.75, 2.5], rtol=1e-6)
    np.testing.assert_array_equal(mask, [1.0, 0.0])


def test_zero_discount_gives_target_equal_to_reward():
    delta, _ = td([0.0, 0.0, 0.25], [0.5, 0.0, 0.0, 0.0], 2, 0, -0.7, 0.0,
                  [50.0, 60.0, 70.0], [80.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(delta, [-0.7 - 0.25, -0.7 - 0.5], rtol=1e-6)


def test_td_target_carries_no_gradient():
    g = jax.grad(lambda v: td([0.0, 0.0, 0.0], [0.0] * 4, 0, 0, 1.0, 0.9, v, [1.0] * 4,
                              [1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0])[0].sum())(
        jnp.asarray([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(g, 0.0)



# --- batch loss -----------------------------------------------------------------------------


def hand_batch():
    """Two transitions whose TD errors are worked out above (δ = [2.0, 2.2] and [0.7, masked])."""
    out_tm1 = QOut(q_direction=jnp.asarray([[0.1, 0.2, 0.5], [0.0, 0.4, 0.0]]),
                   q_magnitude=jnp.asarray([[0.0, 0.3, 0.0, 0.0], [0.0, 0.0, 0.0, 9.0]]),
                   aux=jnp.asarray([0.5, -1.0]), market_weights=jnp.zeros((2, F)),
                   portfolio_weights=jnp.zeros((2, P)))
    online_t = QOut(q_direction=jnp.asarray([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]),
                    q_magnitude=jnp.asarray([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]),
                    aux=jnp.zeros(2), market_weights=jnp.zeros((2, F)),
                    portfolio_weights=jnp.zeros((2, P)))
    target_t = QOut(q_direction=jnp.asarray([[5.0, 6.0, 2.0], [7.0, 1.0, 3.0]]),
                    q_magnitude=jnp.asarray([[4.0, 10.0, 0.0, 0.0], [0.0, 0.0, 100.0, 0.0]]),
                    aux=jnp.zeros(2), market_weights=jnp.zeros((2, F)),
                    portfolio_weights=jnp.zeros((2, P)))
    a_dir, a_mag = jnp.asarray([2, FLAT]), jnp.asarray([1, 3])
    r, discount, aux_target = jnp.asarray([1.0, 0.2]), jnp.asarray([0.5, 0.9]), jnp.asarray(
        [0.0, 1.0])
    return out_tm1, online_t, target_t, a_dir, a_mag, r, discount, aux_target


class BranchingTDVariantsTest(chex.TestCase):
    """The per-transition branching double-Q TD, by hand, with and without jit."""

    @chex.variants(with_jit=True, without_jit=True)
    def test_branching_td_by_hand(self):
        td_fn = self.variant(lambda qd, qm, ad, am, r, d, vd, vm, sd, sm:
                             generic_head.branching_double_q_td((qd, qm), (ad, am), r, d,
                                                                (vd, vm), (sd, sm)))
        f = partial(jnp.asarray, dtype=jnp.float32)
        q_dir_tm1, q_mag_tm1 = f([0.1, 0.2, 0.5]), f([1.0, 2.0])
        a_dir, a_mag, r, discount = jnp.int32(2), jnp.int32(1), f(1.0), f(0.5)
        value_dir, value_mag = f([1.0, 2.0, 3.0]), f([4.0, 5.0])
        # Greedy next direction flat (online selector): y = 1 + 0.5·Q̄_dir(flat) = 2.
        td, mask = td_fn(q_dir_tm1, q_mag_tm1, a_dir, a_mag, r, discount, value_dir,
                         value_mag, f([0.0, 5.0, 1.0]), f([1.0, 0.0]))
        np.testing.assert_allclose(td, [2.0 - 0.5, 2.0 - 2.0], rtol=1e-6)
        np.testing.assert_array_equal(mask, [1.0, 1.0])
        # Greedy next long with magnitude 1: y = 1 + 0.5·mean(3, 5) = 3.
        td, mask = td_fn(q_dir_tm1, q_mag_tm1, a_dir, a_mag, r, discount, value_dir,
                         value_mag, f([0.0, 1.0, 5.0]), f([0.0, 1.0]))
        np.testing.assert_allclose(td, [3.0 - 0.5, 3.0 - 2.0], rtol=1e-6)
        chex.assert_type([td, mask], jnp.float32)
        # A flat action taken masks the magnitude branch.
        _, mask = td_fn(q_dir_tm1, q_mag_tm1, jnp.int32(FLAT), a_mag, r, discount, value_dir,
                        value_mag, f([0.0, 1.0, 5.0]), f([0.0, 1.0]))
        np.testing.assert_array_equal(mask, [1.0, 0.0])


class QLossTest(chex.TestCase):

    @chex.variants(with_jit=True, without_jit=True)
    def test_q_loss_hand_computed(self):
        cfg = AgentConfig(huber_delta=1.0, aux_weight=0.1)
        loss_fn = self.variant(lambda *args: q_loss_of(*args, cfg=cfg, aux_weight=0.1))
        batch = hand_batch()
        loss, info = loss_fn(*batch)
        chex.assert_shape([loss, info.loss, info.td_abs, info.aux_loss, info.q_mean], ())
        # Transition 0 (long): δ = [2.0, 2.2] → huber [1.5, 1.7] → mean 1.6.
        # Transition 1 (flat taken, flat greedy): y = 1.1, δ_dir = 0.7 → 0.245; magnitude masked.
        # aux: mean((0.5 − 0)², (−1 − 1)²) = 2.125.
        td_part = (1.6 + 0.245) / 2
        np.testing.assert_allclose(info.aux_loss, 2.125, rtol=1e-6)
        np.testing.assert_allclose(loss, td_part + 0.1 * 2.125, rtol=1e-6)
        np.testing.assert_allclose(info.loss, loss, rtol=1e-6)
        np.testing.assert_allclose(info.td_abs, (2.0 + 2.2 + 0.7) / 3, rtol=1e-6)
        np.testing.assert_allclose(info.q_mean, np.mean([[0.1, 0.2, 0.5], [0.0, 0.4, 0.0]]),
                                   rtol=1e-6)

        # Masked branch: the flat transition's taken magnitude Q does not matter.
        out_tm1, *rest = batch
        moved = out_tm1.replace(q_magnitude=out_tm1.q_magnitude.at[1, 3].set(-50.0))
        np.testing.assert_allclose(loss_fn(moved, *rest)[0], loss, rtol=1e-6)
        # ... but it does for the long transition.
        moved = out_tm1.replace(q_magnitude=out_tm1.q_magnitude.at[0, 1].set(-50.0))
        assert abs(float(loss_fn(moved, *rest)[0] - loss)) > 1.0

        # The aux weight scales the aux term linearly.
        loss_w = self.variant(lambda *args: q_loss_of(*args, cfg=cfg, aux_weight=2.0))
        np.testing.assert_allclose(loss_w(*batch)[0], td_part + 2.0 * 2.125, rtol=1e-6)
        loss_0 = self.variant(lambda *args: q_loss_of(*args, cfg=cfg, aux_weight=0.0))
        np.testing.assert_allclose(loss_0(*batch)[0], td_part, rtol=1e-6)


def test_aux_loss_gradient_reaches_market_vsn(qnet):
    net, params, _ = qnet
    obs_tm1, obs_t, a_dir, a_mag, r, discount, aux_target = make_batch(7)

    @jax.jit
    def grads(p):
        def parts(p, cfg):
            out_t = net.apply(params, obs_t)
            return q_loss_of(net.apply(p, obs_tm1), out_t, out_t, a_dir, a_mag, r, discount,
                                aux_target, cfg, cfg.aux_weight)
        return jax.grad(lambda p: parts(p, CFG)[1].aux_loss)(p)

    g_aux = grads(params)
    market = leaves_with_paths(g_aux["params"]["market_vsn"])
    assert len(market) > 10
    for path, g in market:
        assert float(np.linalg.norm(np.asarray(g))) > 0, f"no aux gradient on market_vsn{path}"
    # The aux head does not see the portfolio group.
    for _, g in leaves_with_paths(g_aux["params"]["portfolio_vsn"]):
        np.testing.assert_array_equal(g, 0.0)



# --- exploration ----------------------------------------------------------------------------


def q_out(q_dir, q_mag):
    n = q_dir.shape[0]
    return QOut(q_direction=q_dir, q_magnitude=q_mag, aux=jnp.zeros(n),
                market_weights=jnp.zeros((n, F)), portfolio_weights=jnp.zeros((n, P)))


def test_epsilon_greedy():
    n = 512
    rng = np.random.default_rng(8)
    q = q_out(jnp.asarray(rng.normal(size=(n, 3)), jnp.float32),
              jnp.asarray(rng.normal(size=(n, M)), jnp.float32))
    act = jax.jit(generic_head.epsilon_greedy)
    d, m = act(jax.random.key(9), q, jnp.float32(0.0))
    chex.assert_shape([d, m], [(n,), (n,)])
    assert d.dtype == jnp.int32 and m.dtype == jnp.int32
    np.testing.assert_array_equal(d, np.argmax(q.q_direction, -1))
    np.testing.assert_array_equal(m, np.argmax(q.q_magnitude, -1))

    d, m = act(jax.random.key(10), q, jnp.float32(1.0))
    assert set(np.unique(d)) == {0, 1, 2}
    assert set(np.unique(m)) == set(range(M))
    # Random, not greedy: about 1/3 and 1/M agree with the argmax by chance.
    assert float(np.mean(d == np.argmax(q.q_direction, -1))) < 0.5
    assert float(np.mean(m == np.argmax(q.q_magnitude, -1))) < 0.5
    # The prefill's network-free random actions are these, from the same key.
    rd, rm = learner.random_actions(jax.random.key(10), n, 3, M)
    assert rd.dtype == jnp.int32 and rm.dtype == jnp.int32
    np.testing.assert_array_equal(rd, d)
    np.testing.assert_array_equal(rm, m)



# --- full-action (counterfactual) backups ---------------------------------------------------

ENV2 = EnvConfig(prior="flat", view="excess", magnitudes=(0.5, 1.0),
                 commission_bps=1.0, slippage_bps=1.0, reward="log")
COST = 2e-4  # commission + slippage per unit of traded notional
SCALE, GAMMA = 100.0, 0.8
# Positions in `position_actions` order: flat, short 0.5, short 1, long 0.5, long 1.
POSITIONS = (0.0, -0.5, -1.0, 0.5, 1.0)
# bar:              0      1      2
OPEN = np.array([100.0, 101.0, 103.0])
CLOSE = np.array([100.5, 102.0, 101.0])
CRASH = np.array([100.5, 102.0, 0.005])  # bar 2 closes near zero: long 1.0 is ruined


def prices_of(close):
    return env.Prices(open=jnp.asarray(OPEN, jnp.float32), close=jnp.asarray(close, jnp.float32))


def pre_state(position):
    """The state at the close of bar 1 after filling `position` (0 or 0.5) at bar 1's open,
    written out from the accounting; the episode truncates at bar 2 (stop = 2)."""
    u = position / OPEN[1]
    equity = 1.0 - COST * abs(u) * OPEN[1] + u * (CLOSE[1] - OPEN[1])
    f = jnp.float32
    return env.EnvState(t=jnp.int32(1), stop=jnp.int32(2), equity=f(equity), units=f(u),
                        peak=f(max(1.0, equity)), entry_price=f(OPEN[1] if u else 0.0),
                        bars_in_position=f(1.0 if u else 0.0),
                        last_cost=f(COST * abs(u) * OPEN[1]))


def by_hand(position_tm1, close):
    """Rewards (×SCALE), ruin flags and next-bar positions u*·C₂/E' of the five positions."""
    u = position_tm1 / OPEN[1]
    equity = 1.0 - COST * abs(u) * OPEN[1] + u * (CLOSE[1] - OPEN[1])
    e_open = equity + u * (OPEN[2] - CLOSE[1])
    out = []
    for p in POSITIONS:
        u_new = p * e_open / OPEN[2]
        e_new = e_open - COST * abs(u_new - u) * OPEN[2] + u_new * (close[2] - OPEN[2])
        ruined = e_new <= env.RUIN
        e_new = max(e_new, env.RUIN)
        out.append((SCALE * np.log(e_new / equity), ruined, u_new * close[2] / e_new))
    return [np.asarray(x) for x in zip(*out, strict=True)]


def stub_apply(params, obs):
    """A 'network' whose Q is linear in the position feature: Q = a + pos·b per branch."""
    pos = obs.portfolio[..., 0:1]
    return QOut(q_direction=params["dir"] + pos * params["dir_slope"],
                q_magnitude=params["mag"] + pos * params["mag_slope"],
                aux=jnp.zeros(obs.portfolio.shape[:-1]),
                market_weights=jnp.zeros(obs.market.shape),
                portfolio_weights=jnp.zeros(obs.portfolio.shape))


def stub_params(d, ds, m, ms):
    return {k: jnp.asarray(v, jnp.float32)
            for k, v in (("dir", d), ("dir_slope", ds), ("mag", m), ("mag_slope", ms))}


# Online: at position 0 → direction short, magnitude 1; at ≈ +0.5 → flat (non-flat greedy long),
# magnitude 0; at ≈ −0.5 or −1 → short, magnitude 1; at ≈ +0.5 or +1 → flat.
ONLINE = stub_params([0.3, 0.25, 0.2], [-1.0, 1.0, 1.0], [0.0, 0.4], [1.0, -1.0])
# Target: its own argmax would be long; V̄ reads it at the online argmax.
TARGET = stub_params([1.0, 2.0, 3.0], [10.0] * 3, [0.5, 1.5], [10.0] * 2)


@jax.jit
def full_action_pieces(state_tm1, prices):
    """The library path for one pre-state: (r, discount, next position, y, δ, loss)."""
    port_t, r_t, discount_t = learner.counterfactual_step(state_tm1, prices, ENV2, SCALE,
                                                        jnp.float32(GAMMA))
    obs_t = Obs(market=jnp.zeros((1, F)), window=jnp.zeros((1, L, F)), portfolio=port_t[None])
    online = learner.apply_positions(stub_apply, ONLINE, obs_t)
    target = learner.apply_positions(stub_apply, TARGET, obs_t)
    y = generic_head.full_action_targets(r_t, discount_t,
                                         (target.q_direction[0], target.q_magnitude[0]),
                                         (online.q_direction[0], online.q_magnitude[0]))
    port_tm1 = env.portfolio_features(state_tm1, prices)
    out_tm1 = stub_apply(ONLINE, Obs(market=jnp.zeros((1, F)), window=jnp.zeros((1, L, F)),
                                     portfolio=port_tm1[None]))
    td = generic_head.full_action_td(out_tm1.q_direction[0], out_tm1.q_magnitude[0], y)
    loss, info = generic_head.full_action_loss(out_tm1, online, target,
                                               backups_of(None, r_t[None], discount_t[None]),
                                               jnp.ones(1), AgentConfig(huber_delta=1.0), 0.5)
    return r_t, discount_t, port_t[:, 0], y, td, loss, info


@pytest.mark.parametrize("position_tm1", [0.0, 0.5])
@pytest.mark.parametrize("close", [CLOSE, CRASH], ids=["normal", "crash"])
def test_full_action_targets_by_hand(position_tm1, close):
    r, d, pos_t, y, td, loss, info = full_action_pieces(pre_state(position_tm1),
                                                        prices_of(close))
    r_hand, ruined, pos_hand = by_hand(position_tm1, close)
    np.testing.assert_allclose(r, r_hand, rtol=1e-5, atol=2e-4)
    np.testing.assert_allclose(pos_t, pos_hand, rtol=1e-5, atol=1e-6)
    # Bar 2 is the episode's stop (truncation): every position bootstraps unless ruined.
    np.testing.assert_allclose(d, GAMMA * (1.0 - ruined), rtol=1e-6)
    assert ruined.tolist() == ([False] * 4 + [True] if close is CRASH else [False] * 5)
    # V̄(s'): online Q_dir = [0.3 − p, 0.25 + p, 0.2 + p] picks flat when p > 0.025 (long next
    # positions, except after the crash) → Q̄_dir[1] = 2 + 10p; else short, and Q_mag =
    # [p, 0.4 − p] picks magnitude 1 → mean(Q̄_dir[0] = 1 + 10p, Q̄_mag[1] = 1.5 + 10p).
    v_hand = np.where(pos_hand > 0.025, 2.0 + 10 * pos_hand, 1.25 + 10 * pos_hand)
    assert (pos_hand > 0.025).sum() == (1 if close is CRASH else 2)
    y_hand = r_hand + GAMMA * (1.0 - ruined) * v_hand
    np.testing.assert_allclose(y, y_hand, rtol=1e-5, atol=2e-4)
    y_flat, y_short, y_long = y_hand[0], y_hand[1:3], y_hand[3:5]
    if position_tm1 == 0.0:
        # Q_dir(s) = [0.3, 0.25, 0.2] → d̃ = short; Q_mag(s) = [0, 0.4] → m̂ = 1.
        td_hand = [y_short[1] - 0.3, y_flat - 0.25, y_long[1] - 0.2,
                   y_short[0] - 0.0, y_short[1] - 0.4]
    else:
        # P ≈ 0.51: Q_dir(s) = [0.3 − P, 0.25 + P, 0.2 + P] is greedy flat, non-flat greedy
        # long (d̃); Q_mag(s) = [P, 0.4 − P] → m̂ = 0.
        p = 0.5 * (CLOSE[1] / OPEN[1]) / (1.0 - COST * 0.5 + 0.5 * (CLOSE[1] / OPEN[1] - 1.0))
        td_hand = [y_short[0] - (0.3 - p), y_flat - (0.25 + p), y_long[0] - (0.2 + p),
                   y_long[0] - p, y_long[1] - (0.4 - p)]
    np.testing.assert_allclose(td, td_hand, rtol=1e-5, atol=2e-4)
    # The batch loss: mean Huber over the 3 + M errors + λ_aux · (0 − 1)².
    td_hand = np.asarray(td_hand)
    huber = np.where(np.abs(td_hand) <= 1.0, 0.5 * td_hand**2, np.abs(td_hand) - 0.5)
    np.testing.assert_allclose(loss, huber.mean() + 0.5 * 1.0, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(info.td_abs, np.abs(td_hand).mean(), rtol=1e-5, atol=1e-5)


def test_full_action_gives_every_q_output_a_gradient_from_one_sample():
    """"all" moves all 3 + M outputs of a single sample; "taken" only the taken two."""
    r, d, _, _, _, _, _ = full_action_pieces(pre_state(0.0), prices_of(CLOSE))
    k = len(POSITIONS)
    rng = np.random.default_rng(0)
    q_next = q_out(jnp.asarray(rng.normal(size=(k, 3)), jnp.float32),
                   jnp.asarray(rng.normal(size=(k, 2)), jnp.float32))
    q_next = jax.tree.map(lambda x: x[None], q_next)  # [1, K, ...]
    cfg = AgentConfig(huber_delta=1.0)

    def grads(loss_fn):
        def f(q_dir, q_mag):
            return loss_fn(q_out(q_dir, q_mag))[0]
        return jax.jit(jax.grad(f, argnums=(0, 1)))(jnp.asarray([[0.3, 0.25, 0.2]]),
                                                    jnp.asarray([[0.0, 0.4]]))

    g_dir, g_mag = grads(lambda out: generic_head.full_action_loss(
        out, q_next, q_next, backups_of(None, r[None], d[None]), jnp.zeros(1), cfg, 0.0))
    assert np.all(np.asarray(g_dir) != 0) and np.all(np.asarray(g_mag) != 0)
    first = jax.tree.map(lambda x: x[:, 0], q_next)
    g_dir, g_mag = grads(lambda out: q_loss_of(out, first, first, jnp.asarray([2]),
                                                  jnp.asarray([1]), r[None, 4], d[None, 4],
                                                  jnp.zeros(1), cfg, 0.0))
    assert (np.asarray(g_dir) != 0).tolist() == [[False, False, True]]
    assert (np.asarray(g_mag) != 0).tolist() == [[False, True]]



def test_full_action_update_wires_online_selector_and_target_value():
    """full_action_update's loss: Q(θ) at t−1, Q(θ) selecting and Q(θ̄) valuing at the K
    next states; then the target EMA."""
    rng = np.random.default_rng(14)
    state = learner.init_train_state(ONLINE, CFG).replace(target_params=TARGET)
    k = len(POSITIONS)
    obs_tm1 = make_obs(15, (B,))
    obs_t = make_obs(16, (B,)).replace(
        portfolio=jnp.asarray(rng.normal(size=(B, k, P)), jnp.float32))
    r_t = jnp.asarray(rng.normal(size=(B, k)), jnp.float32)
    discount_t = jnp.asarray(rng.uniform(0.0, 0.9, (B, k)), jnp.float32)
    aux_target = jnp.asarray(rng.normal(size=B), jnp.float32)
    hp = learner.HParams.from_config(CFG)

    @jax.jit
    def loss(p_tm1, p_sel, p_val):
        def at(p):
            return learner.apply_positions(stub_apply, p, obs_t)
        return generic_head.full_action_loss(stub_apply(p_tm1, obs_tm1), at(p_sel), at(p_val),
                                             backups_of(obs_t, r_t, discount_t), aux_target,
                                             CFG, CFG.aux_weight)[0]

    new, info = jax.jit(lambda s: generic_head.full_action_update(
        s, stub_apply, obs_tm1, backups_of(obs_t, r_t, discount_t), aux_target, CFG, hp))(state)
    np.testing.assert_allclose(info.loss, loss(ONLINE, ONLINE, TARGET), rtol=1e-5)
    assert abs(float(loss(ONLINE, TARGET, ONLINE)) - float(info.loss)) > 1e-3
    assert int(new.step) == 1
    chex.assert_trees_all_close(new.target_params, ema(new.params, TARGET, TAU), rtol=1e-5,
                                atol=1e-6)
