"""Hand-computed cases for the trading environment's fills, costs and rewards."""

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl_trader import env
from rl_trader.config import EnvConfig
from rl_trader.errors import InputError

CFG = EnvConfig(commission_bps=1.0, slippage_bps=1.0, episode_bars=100, reward="log")
COST = 2e-4  # commission + slippage per unit of traded notional

# bar:           0      1      2      3      4
OPEN = np.array([100.0, 102.0, 104.0, 110.0, 108.0])
CLOSE = np.array([100.0, 105.0, 106.0, 107.0, 109.0])
PRICES = env.Prices(open=jnp.asarray(OPEN, jnp.float32), close=jnp.asarray(CLOSE, jnp.float32))


def run(targets, cfg=CFG, t0=0, stop=4):
    state = env.reset(jnp.int32(t0), jnp.int32(stop))
    outs = []
    for tgt in targets:
        state, out = env.step(state, jnp.float32(tgt), PRICES, cfg)
        outs.append(out)
    return state, outs


def test_long_round_trip():
    state, (o1, o2) = run([1.0, 0.0])
    # t=0 → 1: buy 1.0 of equity at open 102.
    u = 1.0 / 102.0
    e1 = 1.0 - COST * 1.0 + u * (105.0 - 102.0)
    # t=1 → 2: sell everything at open 104.
    e_open = e1 + u * (104.0 - 105.0)
    e2 = e_open - COST * u * 104.0
    np.testing.assert_allclose(float(o1.reward), math.log(e1), rtol=1e-5)
    np.testing.assert_allclose(float(o2.reward), math.log(e2 / e1), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(float(state.equity), e2, rtol=1e-6)
    assert float(state.units) == 0.0 and float(state.entry_price) == 0.0


def test_short_round_trip():
    state, (o1, o2) = run([-0.5, 0.0])
    e_open = 1.0
    u = -0.5 * e_open / 102.0
    e1 = 1.0 - COST * 0.5 + u * (105.0 - 102.0)  # short loses when price rises
    e2 = e1 + u * (104.0 - 105.0) - COST * abs(u) * 104.0
    np.testing.assert_allclose(float(o1.reward), math.log(e1), rtol=1e-5)
    np.testing.assert_allclose(float(state.equity), e2, rtol=1e-6)
    assert e1 < 1.0 and e2 < e1 + abs(u) * 1.0 + 1e-12


def test_flip_long_to_short_pays_cost_on_full_notional():
    state, (o1, o2) = run([1.0, -1.0])
    u1 = 1.0 / 102.0
    e1 = 1.0 - COST + u1 * 3.0
    e_open = e1 + u1 * (104.0 - 105.0)
    u2 = -1.0 * e_open / 104.0
    traded = abs(u2 - u1) * 104.0  # close the long and open the short: about 2× equity
    assert traded == pytest.approx(u1 * 104.0 + e_open)
    e2 = e_open - COST * traded + u2 * (106.0 - 104.0)
    np.testing.assert_allclose(float(state.equity), e2, rtol=1e-6)
    np.testing.assert_allclose(float(o2.cost), COST * traded / e1, rtol=1e-4)
    np.testing.assert_allclose(float(o2.turnover), traded / e_open, rtol=1e-5)
    assert float(state.entry_price) == 104.0 and float(state.bars_in_position) == 1.0


def test_flat_earns_zero():
    state, outs = run([0.0, 0.0, 0.0])
    for o in outs:
        assert float(o.reward) == 0.0 and float(o.cost) == 0.0
    assert float(state.equity) == 1.0


def test_costs_reduce_equity_exactly():
    free = EnvConfig(commission_bps=0.0, slippage_bps=0.0)
    s_free, _ = run([1.0, -1.0, 0.5], cfg=free)
    s_cost, outs = run([1.0, -1.0, 0.5])
    assert float(s_cost.equity) < float(s_free.equity)
    # with costs switched off, a round trip at unchanged prices leaves equity unchanged
    flat_prices = env.Prices(open=jnp.full(5, 100.0), close=jnp.full(5, 100.0))
    st = env.reset(jnp.int32(0), jnp.int32(4))
    for tgt in (1.0, 0.0):
        st, _ = env.step(st, jnp.float32(tgt), flat_prices, free)
    assert float(st.equity) == 1.0
    st = env.reset(jnp.int32(0), jnp.int32(4))
    for tgt in (1.0, 0.0):
        st, _ = env.step(st, jnp.float32(tgt), flat_prices, CFG)
    np.testing.assert_allclose(float(st.equity), (1 - COST) - COST * (1 - COST), rtol=1e-6)


def test_magnitude_ignored_when_flat_and_sign_of_direction():
    mags = CFG.magnitudes
    for m in range(len(mags)):
        assert float(env.target_fraction(jnp.int32(env.FLAT), jnp.int32(m), CFG)) == 0.0
        assert float(env.target_fraction(jnp.int32(0), jnp.int32(m), CFG)) == -mags[m]
        assert float(env.target_fraction(jnp.int32(2), jnp.int32(m), CFG)) == mags[m]


def test_segment_end_is_truncation_not_termination():
    state = env.reset(jnp.int32(1), jnp.int32(3))
    state, o1 = env.step(state, jnp.float32(1.0), PRICES, CFG)
    assert not bool(o1.truncated) and not bool(o1.terminated)
    state, o2 = env.step(state, jnp.float32(1.0), PRICES, CFG)
    assert bool(o2.truncated) and not bool(o2.terminated)
    assert int(env.episode_stop(jnp.int32(1), jnp.int32(5), CFG)) == 4  # needs bar t+1 < end
    assert int(env.episode_stop(jnp.int32(1), jnp.int32(500), CFG)) == 101


def test_ruin_terminates():
    crash = env.Prices(open=jnp.asarray([100.0, 100.0]), close=jnp.asarray([100.0, 300.0]))
    state = env.reset(jnp.int32(0), jnp.int32(1))
    _, out = env.step(state, jnp.float32(-1.0), crash, CFG)  # short, then the price triples
    assert bool(out.terminated) and np.isfinite(float(out.reward))


def test_portfolio_features_and_shapes():
    state, _ = run([1.0, 1.0])
    feats = env.portfolio_features(state, PRICES)
    chex.assert_shape(feats, (len(env.PORTFOLIO_NAMES),))
    chex.assert_type(feats, jnp.float32)
    pos, unreal, held, dd, cost = np.asarray(feats)
    np.testing.assert_allclose(pos, float(state.units) * 106.0 / float(state.equity), rtol=1e-6)
    np.testing.assert_allclose(unreal, 10 * (106.0 / 102.0 - 1), rtol=1e-5)
    np.testing.assert_allclose(held, math.log(3.0) / math.log(252.0), rtol=1e-6)
    assert dd <= 0.0 and cost >= 0.0


def test_portfolio_mask_hides_only_the_return_features():
    np.testing.assert_array_equal(env.portfolio_mask("all"), [1, 1, 1, 1, 1])
    # position, unrealised_return, time_in_position, drawdown, last_cost
    np.testing.assert_array_equal(env.portfolio_mask("no_returns"), [1, 0, 1, 0, 1])
    assert set(env.RETURN_FEATURES) <= set(env.PORTFOLIO_NAMES)


def test_vmaps_over_many_envs_at_random_offsets():
    n = 4096
    t0 = jax.random.randint(jax.random.PRNGKey(0), (n,), 0, 3)
    states = jax.vmap(env.reset)(t0, env.episode_stop(t0, jnp.int32(5), CFG))
    targets = jax.random.uniform(jax.random.PRNGKey(1), (n,), minval=-1, maxval=1)
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, None, None)), static_argnums=3)
    new, out = step(states, targets, PRICES, CFG)
    chex.assert_shape([new.equity, out.reward, out.cost], (n,))
    chex.assert_tree_all_finite((new, out))
    np.testing.assert_array_equal(np.asarray(new.t), np.asarray(t0) + 1)


# ---------------------------------------------------------------- learning rewards

def _cfg(reward, **kw):
    return EnvConfig(commission_bps=1.0, slippage_bps=1.0, episode_bars=100, reward=reward, **kw)


def test_reward_log_mean_variance_and_dsr_by_hand():
    u = 1.0 / 102.0
    e1 = 1.0 - COST + u * (105.0 - 102.0)  # long 1.0 over bar 0 → 1 (see test_long_round_trip)
    e2 = e1 + u * (104.0 - 105.0) - COST * u * 104.0  # then flat at bar 2's open
    r1, r2 = 100 * (e1 - 1.0), 100 * (e2 / e1 - 1.0)  # percent
    _, (lg1, lg2) = run([1.0, 0.0], cfg=_cfg("log"))
    np.testing.assert_allclose([float(lg1.reward), float(lg2.reward)],
                               [math.log(e1), math.log(e2 / e1)], rtol=1e-5, atol=1e-7)
    _, (mv1, mv2) = run([1.0, 0.0], cfg=_cfg("mean_variance", risk_aversion=0.1))
    np.testing.assert_allclose(float(mv1.reward), (r1 - 0.05 * r1**2) / 100, rtol=1e-4)
    np.testing.assert_allclose(float(mv2.reward), (r2 - 0.05 * r2**2) / 100, rtol=1e-4)
    # DSR from A₀ = 0.2, B₀ = 2.0 with η = 0.1
    cfg = _cfg("dsr", dsr_eta=0.1)
    state = env.reset(jnp.int32(0), jnp.int32(4), 2.0).replace(dsr_a=jnp.float32(0.2))
    s1, d1 = env.step(state, jnp.float32(1.0), PRICES, cfg)
    _, d2 = env.step(s1, jnp.float32(0.0), PRICES, cfg)
    a0, b0 = 0.2, 2.0
    dsr1 = (b0 * (r1 - a0) - 0.5 * a0 * (r1**2 - b0)) / (b0 - a0**2) ** 1.5
    a1, b1 = a0 + 0.1 * (r1 - a0), b0 + 0.1 * (r1**2 - b0)
    dsr2 = (b1 * (r2 - a1) - 0.5 * a1 * (r2**2 - b1)) / (b1 - a1**2) ** 1.5
    np.testing.assert_allclose([float(s1.dsr_a), float(s1.dsr_b)], [a1, b1], rtol=1e-5)
    np.testing.assert_allclose([float(d1.reward), float(d2.reward)],
                               [dsr1 / 100, dsr2 / 100], rtol=1e-4)
    # the growth that evaluation reads is the same whatever the reward
    for o_log, o_other in ((lg1, mv1), (lg2, mv2), (lg1, d1), (lg2, d2)):
        assert float(o_other.log_growth) == float(o_log.log_growth) == float(o_log.reward)


def test_dsr_recursion_matches_numpy_over_many_steps():
    rng = np.random.default_rng(0)
    n, eta = 12, 0.05
    close = 100 * np.exp(np.cumsum(0.01 * rng.normal(size=n + 1)))
    opens = close * np.exp(0.002 * rng.normal(size=n + 1))
    prices = env.Prices(open=jnp.asarray(opens, jnp.float32), close=jnp.asarray(close, jnp.float32))
    cfg = _cfg("dsr", dsr_eta=eta)
    state = env.reset(jnp.int32(0), jnp.int32(n), 1.5)
    got, growth = [], []
    for tgt in rng.uniform(-1, 1, size=n):
        state, out = env.step(state, jnp.float32(tgt), prices, cfg)
        got.append(float(out.reward))
        growth.append(math.exp(float(out.log_growth)))
    a, b, want = 0.0, 1.5, []
    for g in growth:
        r = 100.0 * (g - 1.0)
        want.append((b * (r - a) - 0.5 * a * (r * r - b)) / (b - a * a) ** 1.5 / 100)
        a, b = a + eta * (r - a), b + eta * (r * r - b)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=1e-5)
    np.testing.assert_allclose([float(state.dsr_a), float(state.dsr_b)], [a, b], rtol=2e-3)
    assert np.abs(np.asarray(want) * 100).max() < 10  # O(1) after ×reward_scale


def test_reward_is_a_pure_function_of_the_pre_state():
    """Any stored state, stepped with every action, gives the reward it gave along the path."""
    cfg = _cfg("dsr")
    state = env.reset(jnp.int32(0), jnp.int32(4), 0.7)
    state, _ = env.step(state, jnp.float32(0.5), PRICES, cfg)
    stored = jax.tree.map(lambda x: x.copy(), state)
    _, out = env.step(state, jnp.float32(-1.0), PRICES, cfg)
    targets = jnp.asarray([-1.0, 0.0, 0.25, 1.0])
    _, outs = jax.vmap(env.step, in_axes=(None, 0, None, None))(stored, targets, PRICES, cfg)
    assert float(outs.reward[0]) == float(out.reward)
    assert len(set(np.asarray(outs.reward).tolist())) == 4


def test_prior_second_moment_uses_only_its_segment():
    b0 = env.prior_second_moment(PRICES, jnp.int32(1), jnp.int32(4))  # returns into bars 2, 3
    want = np.mean([(100 * (106 / 105 - 1)) ** 2, (100 * (107 / 106 - 1)) ** 2])
    np.testing.assert_allclose(float(b0), want, rtol=1e-5)
    moved = env.Prices(open=PRICES.open, close=PRICES.close.at[4].set(50.0).at[0].set(10.0))
    assert float(env.prior_second_moment(moved, jnp.int32(1), jnp.int32(4))) == float(b0)


@pytest.mark.parametrize("kw", [{"reward": "sharpe"}, {"risk_aversion": -1.0},
                                {"dsr_eta": 0.0}, {"dsr_eta": 1.0}])
def test_reward_options_are_validated(kw):
    with pytest.raises(InputError, match="option --"):
        EnvConfig(**kw).validate()


class StepVariantsTest(chex.TestCase):
    """`env.step` is a pure function: the same state and outputs, with the documented dtypes,
    with and without jit."""

    @chex.variants(with_jit=True, without_jit=True)
    def test_step_with_and_without_jit(self):
        step = self.variant(lambda s, tgt: env.step(s, tgt, PRICES, CFG))
        state = env.reset(jnp.int32(0), jnp.int32(4))
        for tgt in (1.0, -0.5, 0.0):
            new, out = step(state, jnp.float32(tgt))
            want_new, want_out = env.step(state, jnp.float32(tgt), PRICES, CFG)
            chex.assert_trees_all_close((new, out), (want_new, want_out), rtol=1e-6)
            chex.assert_type([new.t, new.stop], jnp.int32)
            chex.assert_type([new.equity, new.units, new.dsr_a, new.dsr_b, out.reward,
                              out.log_growth, out.cost, out.turnover], jnp.float32)
            chex.assert_type([out.terminated, out.truncated], jnp.bool_)
            state = new
        np.testing.assert_allclose(float(state.equity), float(run([1.0, -0.5, 0.0])[0].equity),
                                   rtol=1e-6)
