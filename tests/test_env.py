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

CFG = EnvConfig(prior="flat", view="excess", commission_bps=1.0,
                slippage_bps=1.0, episode_bars=100, reward="log")
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
    free = EnvConfig(prior="flat", view="excess", commission_bps=0.0, slippage_bps=0.0)
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
    return EnvConfig(prior="flat", view="excess", commission_bps=1.0, slippage_bps=1.0,
                     episode_bars=100, reward=reward, **kw)


def test_reward_log_and_mean_variance_by_hand():
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
    # the growth that evaluation reads is the same whatever the reward
    for o_log, o_other in ((lg1, mv1), (lg2, mv2)):
        assert float(o_other.log_growth) == float(o_log.log_growth) == float(o_log.reward)


def test_reward_is_a_pure_function_of_the_pre_state():
    """Any stored state, stepped with every action, gives the reward it gave along the path
    (up to float32 rounding: the vmapped step computes apart from the eager one)."""
    cfg = _cfg("mean_variance")
    state = env.reset(jnp.int32(0), jnp.int32(4))
    state, _ = env.step(state, jnp.float32(0.5), PRICES, cfg)
    stored = jax.tree.map(lambda x: x.copy(), state)
    _, out = env.step(state, jnp.float32(-1.0), PRICES, cfg)
    targets = jnp.asarray([-1.0, 0.0, 0.25, 1.0])
    _, outs = jax.vmap(env.step, in_axes=(None, 0, None, None))(stored, targets, PRICES, cfg)
    np.testing.assert_allclose(float(outs.reward[0]), float(out.reward), rtol=1e-6)
    assert len(set(np.asarray(outs.reward).tolist())) == 4


@pytest.mark.parametrize("kw", [{"reward": "sharpe"}, {"reward": "dsr"},
                                {"risk_aversion": -1.0}])
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
            chex.assert_type([new.equity, new.units, out.reward,
                              out.log_growth, out.cost, out.turnover], jnp.float32)
            chex.assert_type([out.terminated, out.truncated], jnp.bool_)
            state = new
        np.testing.assert_allclose(float(state.equity), float(run([1.0, -0.5, 0.0])[0].equity),
                                   rtol=1e-6)


def test_residual_view_is_the_excess_or_the_trusted_absolute_view():
    """`env.residual_view`: excess, μ − ȳ; trusted, w·(μ − μ_eq) with the prior's equilibrium
    μ_eq = κπm₂ − ½m₂ (0 at w = 0, whatever the forecast)."""
    mu, ybar, m2, pi = np.array([0.002, -0.001]), 0.0005, np.array([1e-4, 4e-4]), 0.7
    excess = EnvConfig(prior="vol_target", view="excess")
    np.testing.assert_allclose(env.residual_view(mu, ybar, m2, pi, 0.5, excess), mu - ybar)
    trusted = EnvConfig(prior="vol_target", view="trusted")
    kappa = env.risk_curvature(trusted)
    for w in (0.0, 0.4, 1.0):
        np.testing.assert_allclose(env.residual_view(mu, ybar, m2, pi, w, trusted),
                                   w * (mu - (kappa * pi * m2 - 0.5 * m2)), rtol=1e-6,
                                   atol=1e-12)
