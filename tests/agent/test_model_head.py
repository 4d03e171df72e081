"""The model head's Q: its assembly from the known reward (by hand, every (p, a)), the reward
it assumes against the env's own step on a three-bar market, and the targets of its heads."""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl_trader import env
from rl_trader.agent import learner
from rl_trader.agent.learner import Backups, position_actions
from rl_trader.agent.model_head import (
    ModelOut,
    ModelQNetwork,
    assemble,
    continuation,
    epsilon_greedy_positions,
    greedy_actions,
    model_loss,
    model_td,
    model_update,
    next_state_outputs,
    position_fractions,
)
from rl_trader.config import AgentConfig, EnvConfig, NetConfig, RunConfig
from rl_trader.data.fold_data import BarContext
from rl_trader.errors import InputError
from tests.helpers import P, init_params, make_obs

# K = 5: 0, −0.5, −1, +0.5, +1
ENV = EnvConfig(prior="flat", view="excess", magnitudes=(0.5, 1.0), reward="log")
POSITIONS = (0.0, -0.5, -1.0, 0.5, 1.0)


def flat_ctx(n: int, scale: float = 0.01) -> BarContext:
    """The `BarContext` of `n` bars at return scale `scale` with no prior (--prior flat)."""
    zero = jnp.zeros(n)
    return BarContext(scale=jnp.full(n, scale), drift=zero, trust=zero, prior=zero,
                      prior_tm1=zero)


def out_of(aux, second, w_dir, w_mag) -> ModelOut:
    aux = jnp.asarray(aux, jnp.float32)
    return ModelOut(aux=aux, second_moment=jnp.asarray(second, jnp.float32),
                    w_direction=jnp.asarray(w_dir, jnp.float32),
                    w_magnitude=jnp.asarray(w_mag, jnp.float32),
                    market_weights=jnp.zeros(aux.shape + (2,)),
                    portfolio_weights=jnp.zeros(aux.shape + (5,)))


def test_positions_and_continuation_follow_the_action_order():
    np.testing.assert_allclose(position_fractions(ENV), POSITIONS)
    w = continuation(out_of(0.0, 0.0, [1.0, 2.0, 3.0], [-0.25, 0.25]))
    # W(flat) = w_dir[flat]; W(d, m) = w_dir[d] + w_mag[m]
    np.testing.assert_allclose(w, [2.0, 0.75, 1.25, 2.75, 3.25])


def test_assembly_by_hand_for_every_held_and_target_position():
    """μ̂ = 0.5, m̂₂ = 2 in units of s = 1 %: μ = 0.005, m₂ = 2e-4; log reward (κ = 1), costs
    1 + 1 bp, ×100. Q(p, a) = 100·[a·(0.005 + 1e-4) − ½a²·2e-4 − 2e-4·|a − p|] + W(a)
    = 0.51a − 0.01a² − 0.02|a − p| + W(a), W from the branches above."""
    hand = [[2.0, 0.4825, 0.71, 2.9925, 3.73],  # held p = 0
            [1.99, 0.4925, 0.72, 2.9825, 3.72],  # p = −0.5
            [1.98, 0.4825, 0.73, 2.9725, 3.71],  # p = −1
            [1.99, 0.4725, 0.70, 3.0025, 3.74],  # p = +0.5
            [1.98, 0.4625, 0.69, 2.9925, 3.75]]  # p = +1
    n = len(POSITIONS)
    out = out_of(np.full(n, 0.5), np.full(n, 2.0), np.tile([1.0, 2.0, 3.0], (n, 1)),
                 np.tile([-0.25, 0.25], (n, 1)))
    q = assemble(out, jnp.asarray(POSITIONS), flat_ctx(n), ENV, 100.0)
    chex.assert_shape(q, (n, n))
    np.testing.assert_allclose(q, hand, rtol=1e-5, atol=1e-6)
    # the mean-variance reward curves by κ = 100·λ: at λ = 0.1 the a² term is ten times larger
    mv = EnvConfig(prior="flat", view="excess", magnitudes=(0.5, 1.0),
                   reward="mean_variance", risk_aversion=0.1)
    q_mv = assemble(out, jnp.asarray(POSITIONS), flat_ctx(n), mv, 100.0)
    a = np.asarray(POSITIONS)
    np.testing.assert_allclose(np.asarray(q_mv) - np.asarray(q), -0.09 * a**2 * np.ones((n, 1)),
                               atol=1e-5)


@pytest.mark.parametrize("reward", ["log", "mean_variance"])
def test_the_assumed_reward_is_the_envs_on_a_three_bar_market(reward):
    """On a three-bar market with no gaps (open = previous close), from every held p to every
    target a at bars 0 and 1, `env.expected_reward` with the bar's known log return (μ = ℓ,
    m₂ = ℓ²) equals the reward `env.step` pays, up to the third-order terms (ℓ³ and the
    cost times ℓ)."""
    cfg = EnvConfig(prior="flat", view="excess", magnitudes=(0.5, 1.0), reward=reward,
                    risk_aversion=0.1)
    close = np.asarray([100.0, 101.0, 99.5], np.float32)
    prices = env.Prices(open=jnp.asarray([100.0, 100.0, 101.0]), close=jnp.asarray(close))
    for t in (0, 1):
        ell = float(np.log(close[t + 1] / close[t]))
        for p in POSITIONS:
            state = env.reset(jnp.int32(t), jnp.int32(3))
            state = state.replace(units=jnp.float32(p / close[t]),
                                  entry_price=jnp.float32(close[t] if p else 0.0))
            for a in POSITIONS:
                _, out = env.step(state, jnp.float32(a), prices, cfg)
                want = env.expected_reward(jnp.float32(p), jnp.float32(a), ell, ell**2, cfg)
                # (1 + κ)·(|ℓ|³ + 2c·|ℓ|), c = 2 bp: the terms the expansion leaves out
                third = (1 + env.risk_curvature(cfg)) * (abs(ell) ** 3 + 4e-4 * abs(ell))
                np.testing.assert_allclose(float(out.reward), float(want), atol=third,
                                           err_msg=f"t={t} p={p} a={a}")


def test_td_target_is_the_target_value_of_the_online_choice():
    """y_a = discount_a · Q̄(next_a, argmax_a' Q(next_a, a')); δ = y − C (no gradient to y)."""
    c_tm1 = jnp.asarray([1.0, 2.0])
    q_value = jnp.asarray([[10.0, 20.0], [30.0, 40.0]])  # target net at each next state
    q_select = jnp.asarray([[0.0, 1.0], [1.0, 0.0]])  # online picks a'=1, then a'=0
    discount = jnp.asarray([0.9, 0.0])  # the second next state is ruin
    np.testing.assert_allclose(model_td(c_tm1, q_value, q_select, discount),
                               [0.9 * 20.0 - 1.0, 0.0 - 2.0])
    g = jax.grad(lambda v: model_td(c_tm1, v, q_select, discount).sum())(q_value)
    np.testing.assert_array_equal(g, 0.0)


def test_the_heads_targets():
    """The loss: Huber of the TD errors over every position and sample, plus λ·[(μ̂ − y)² +
    (m̂₂ − y²)²]; the forecasts' gradients are exactly those of the two regressions."""
    b, k = 2, len(POSITIONS)
    cfg = AgentConfig(huber_delta=1.0, reward_scale=100.0)
    y = jnp.asarray([0.5, -1.5])
    out_tm1 = out_of([0.2, -1.0], [1.0, 3.0], [[0.0, 0.1, 0.0], [0.0, 0.0, 0.2]],
                     [[0.0, 0.0], [0.1, -0.1]])
    nxt = out_of(np.zeros((b, k)), np.ones((b, k)), np.zeros((b, k, 3)), np.zeros((b, k, 2)))
    pos_t = jnp.tile(jnp.asarray(POSITIONS), (b, 1))
    disc = jnp.full((b, k), 0.9)
    backups = Backups(obs_t=None, position_tm1=jnp.zeros(b), position_t=pos_t,
                      ctx_tm1=flat_ctx(b), ctx_t=flat_ctx(b), r_t=None,
                      discount_t=disc)
    loss, info = model_loss(out_tm1, nxt, nxt, backups, y, cfg, ENV, aux_weight=0.5)
    np.testing.assert_allclose(info.aux_loss, np.mean((np.asarray([0.2, -1.0]) - y) ** 2))
    second = np.mean((np.asarray([1.0, 3.0]) - np.asarray(y) ** 2) ** 2)
    # next states: μ̂ = 0, m̂₂ = 1, W = 0, so Q̄(p', a') = 100·[a'·½·1e-4 − ½a'²·1e-4 − cost]
    a = np.asarray(POSITIONS)
    q_next = (100 * (a[None] * 0.5e-4 - 0.5 * a[None] ** 2 * 1e-4
                     - 2e-4 * np.abs(a[None] - a[:, None])))
    y_td = 0.9 * q_next.max(1)  # the same net selects and evaluates here
    c = np.asarray(continuation(out_tm1))
    td = y_td[None] - c
    huber = np.where(np.abs(td) <= 1, 0.5 * td**2, np.abs(td) - 0.5)
    np.testing.assert_allclose(loss, huber.mean() + 0.5 * (float(info.aux_loss) + second),
                               rtol=1e-5)
    np.testing.assert_allclose(info.td_abs, np.abs(td).mean(), rtol=1e-5)


def test_greedy_and_epsilon_greedy_positions():
    direction, magnitude = position_actions(2)
    q = jnp.asarray([[0.0, 1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 5.0]])
    d, m = greedy_actions(q, 2)
    np.testing.assert_array_equal(d, [direction[1], direction[4]])
    np.testing.assert_array_equal(m, [magnitude[1], magnitude[4]])
    key = jax.random.key(0)
    d0, m0 = epsilon_greedy_positions(key, q, jnp.float32(0.0))
    np.testing.assert_array_equal((d0, m0), (d, m))
    big = jnp.tile(q[:1], (2000, 1))
    d1, _ = epsilon_greedy_positions(key, big, jnp.float32(1.0))
    assert set(np.unique(np.asarray(d1))) == {0, 1, 2}  # uniform over the directions


# --- the afterstate continuation C(x, a) ------------------------------------------------------

SMALL = NetConfig(hidden=4, trunk=8, context=4)


@pytest.fixture(scope="module")
def model_net():
    net = ModelQNetwork(SMALL, len(ENV.magnitudes))
    return net, init_params(net, make_obs(0))


def test_the_network_reads_no_portfolio_variable(model_net):
    """Its outputs are the same whatever the portfolio (the continuation reads the afterstate);
    it has no portfolio VSN to train or to follow by the EMA, and reports the portfolio
    variables' weights as 0."""
    net, params = model_net
    assert not any("portfolio_vsn" in jax.tree_util.keystr(path)
                   for path, _ in jax.tree_util.tree_flatten_with_path(params)[0])
    obs = make_obs(1, (6,))
    apply = jax.jit(net.apply)
    a = apply(params, obs)
    b = apply(params, obs.replace(portfolio=obs.portfolio[::-1] * 3.0 + 1.0))
    chex.assert_trees_all_equal(a, b)
    np.testing.assert_array_equal(a.portfolio_weights, np.zeros((6, P)))


def test_next_state_outputs_are_the_network_at_each_next_state(model_net):
    """One pass a sample, broadcast over the K next positions, equals the network evaluated at
    each next state (`learner.apply_positions`)."""
    net, params = model_net
    b, k = 3, len(POSITIONS)
    obs = make_obs(2, (b,))
    port = jnp.asarray(np.random.default_rng(3).normal(size=(b, k, P)), jnp.float32)
    obs_t = obs.replace(portfolio=port)
    once = jax.jit(lambda o: next_state_outputs(net.apply, params, o))(obs_t)
    each = jax.jit(lambda o: learner.apply_positions(net.apply, params, o))(obs_t)
    chex.assert_trees_all_equal_shapes(once, each)
    chex.assert_trees_all_close(once, each, rtol=1e-5, atol=1e-6)


def test_an_update_moves_every_param_and_target_leaf(model_net):
    """One gradient step: every parameter moves and the target follows the EMA on every leaf
    (the tree the update sees is the network's whole tree)."""
    net, params = model_net
    b, k = 4, len(POSITIONS)
    cfg = RunConfig(env=ENV, net=SMALL)
    obs_tm1 = make_obs(4, (b,))
    port = jnp.asarray(np.random.default_rng(5).normal(size=(b, k, P)), jnp.float32)
    backups = Backups(obs_t=make_obs(6, (b,)).replace(portfolio=port),
                      position_tm1=jnp.zeros(b), position_t=jnp.tile(jnp.asarray(POSITIONS),
                                                                     (b, 1)),
                      ctx_tm1=flat_ctx(b), ctx_t=flat_ctx(b),
                      r_t=jnp.zeros((b, k)), discount_t=jnp.full((b, k), 0.9))
    state0 = learner.init_train_state(params, cfg.agent)
    state0 = state0.replace(target_params=jax.tree.map(jnp.zeros_like, params))
    hp = learner.HParams.from_config(cfg.agent)
    state1, info = jax.jit(lambda s: model_update(s, net.apply, obs_tm1, backups,
                                                  jnp.linspace(-1.0, 1.0, b), cfg, hp))(state0)
    chex.assert_tree_all_finite((state1, info))
    moved = jax.tree.map(lambda x, y: bool(np.any(np.asarray(x) != np.asarray(y))),
                         state0.params, state1.params)
    assert all(jax.tree.leaves(moved)), moved
    want = jax.tree.map(lambda x: cfg.agent.tau * np.asarray(x), state1.params)
    chex.assert_trees_all_close(state1.target_params, want, rtol=1e-6, atol=1e-9)


# --- the prior (--prior vol_target) -------------------------------------------------------

# residuals 0.25, 0.5, 1, 2; mean-variance, κ = 10
PRIOR_ENV = EnvConfig(prior="vol_target", view="excess")


def test_residual_positions_reach_both_ends_and_the_zero_action_holds_the_prior():
    for prior in (0.0, 0.3, 0.8, 1.0):
        a = np.asarray(position_fractions(PRIOR_ENV, jnp.float32(prior)))
        assert a[0] == pytest.approx(prior)  # index 0: the flat direction, the zero residual
        assert a.min() == -1.0 and a.max() == 1.0  # full short and full long reachable
        assert np.all(np.abs(a) <= 1.0)


def test_excess_assembly_is_the_full_reward_less_the_priors_by_hand():
    """u·v − ½κu²m₂ − cost(u − u₀) (`env.expected_excess_reward`) equals the mean-variance
    reward of a = π + u at μ = μ_eq + v, less the prior's own, with the prior's move charged
    to the prior: the Black–Litterman identity of the docstring."""
    pi, pi_tm1, p, s, ybar, mu_hat, m2_hat = 0.6, 0.55, 0.4, 0.012, 0.05, 0.3, 1.4
    kappa, c = 10.0, 2e-4
    out = out_of([mu_hat], [m2_hat], [[0.0, 0.0, 0.0]], [[0.0] * 4])
    ctx = BarContext(scale=jnp.asarray([s]), drift=jnp.asarray([ybar]), trust=jnp.zeros(1),
                     prior=jnp.asarray([pi]), prior_tm1=jnp.asarray([pi_tm1]))
    q = np.asarray(assemble(out, jnp.asarray([p]), ctx, PRIOR_ENV, 100.0))[0]
    m2, v = s**2 * m2_hat, s * (mu_hat - ybar)
    mu = kappa * pi * m2 - 0.5 * m2 + v  # the equilibrium return tilted by the view

    def mv(a):
        return a * (mu + 0.5 * m2) - 0.5 * kappa * a**2 * m2

    a = np.asarray(position_fractions(PRIOR_ENV, jnp.float32(pi)))
    u = a - pi
    want = 100 * (mv(a) - mv(pi) - c * np.abs(u - (p - pi_tm1)))
    np.testing.assert_allclose(q, want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("reward", ["mean_variance", "log"])
def test_forecasts_at_their_train_level_make_the_zero_residual_optimal_at_every_bar(reward):
    """Issue 58's check: on a market path, with the forecasts equal to their train means
    (μ̂ = ȳ, m̂₂ its train level) and no learnt continuation, the assembled Q's argmax is the
    zero residual at every bar, for a holder on the prior's path — whatever the prior's
    moves, the volatility and the drift level."""
    rng = np.random.default_rng(0)
    n = 500
    cfg = EnvConfig(prior="vol_target", view="excess", reward=reward)
    prior = np.clip(np.cumsum(rng.normal(0, 0.05, n)) % 1.3, 0.0, 1.0)  # drifting π_t
    prior_tm1 = np.concatenate([[prior[0]], prior[:-1]])
    moved = prior_tm1 * (1 + rng.normal(0, 0.01, n))  # π_{t−1} after a bar's price move
    ybar = rng.normal(0.05, 0.02, n)
    second = np.exp(rng.normal(0, 0.5, n))
    out = ModelOut(aux=jnp.asarray(ybar, jnp.float32), second_moment=jnp.asarray(second,
                                                                                 jnp.float32),
                   w_direction=jnp.zeros((n, 3)), w_magnitude=jnp.zeros((n, 4)),
                   market_weights=jnp.zeros((n, 2)), portfolio_weights=jnp.zeros((n, 5)))
    ctx = BarContext(scale=jnp.asarray(rng.uniform(0.005, 0.03, n), jnp.float32),
                     drift=jnp.asarray(ybar, jnp.float32), trust=jnp.zeros(n),
                     prior=jnp.asarray(prior, jnp.float32),
                     prior_tm1=jnp.asarray(prior_tm1, jnp.float32))
    q = np.asarray(assemble(out, ctx.prior_tm1, ctx, cfg, 100.0))  # held: the prior's path
    assert np.all(np.argmax(q, -1) == 0)
    a = np.asarray(position_fractions(cfg, ctx.prior))
    distinct = np.abs(a - prior[:, None]) > 1e-6  # grid points that move the position
    assert np.all(q[:, :1] > np.where(distinct, q, -np.inf))  # strictly: not merely a tie
    # held off the path by the bar's price move, u₀ = p − π_{t−1}: a residual near u₀ may save
    # cost (the grid's clipped points near a full prior), but c·|u − u₀| + risk < c·|u₀| needs
    # |u| < 2|u₀|
    q = np.asarray(assemble(out, jnp.asarray(moved, jnp.float32), ctx, cfg, 100.0))
    chosen = a[np.arange(n), np.argmax(q, -1)]
    assert np.all(np.abs(chosen - prior) <= 2 * np.abs(moved - prior_tm1) + 1e-6)


def test_a_view_above_the_train_level_tilts_long_and_below_it_short():
    n = 2
    out = ModelOut(aux=jnp.asarray([0.5, -0.5]), second_moment=jnp.ones(n),
                   w_direction=jnp.zeros((n, 3)), w_magnitude=jnp.zeros((n, 4)),
                   market_weights=jnp.zeros((n, 2)), portfolio_weights=jnp.zeros((n, 5)))
    ctx = BarContext(scale=jnp.full(n, 0.01), drift=jnp.zeros(n), trust=jnp.zeros(n),
                     prior=jnp.full(n, 0.5), prior_tm1=jnp.full(n, 0.5))
    q = assemble(out, jnp.full(n, 0.5), ctx, PRIOR_ENV, 100.0)
    best = np.asarray(position_fractions(PRIOR_ENV, ctx.prior))[np.arange(n),
                                                                 np.argmax(q, -1)]
    # u* = v/(κm₂) = 0.005/(10·1e-4) = 5: the grid's largest step, clipped at ±1
    np.testing.assert_allclose(best, [1.0, -1.0])


TRUSTED_ENV = EnvConfig(prior="vol_target", view="trusted")


def _random_bars(n: int, seed: int) -> tuple[ModelOut, BarContext]:
    """`n` bars of random forecasts, priors, scales and drift levels, no continuation."""
    rng = np.random.default_rng(seed)
    prior = rng.uniform(0.0, 1.0, n)
    out = ModelOut(aux=jnp.asarray(rng.normal(0, 0.5, n), jnp.float32),
                   second_moment=jnp.asarray(np.exp(rng.normal(0, 0.5, n)), jnp.float32),
                   w_direction=jnp.zeros((n, 3)), w_magnitude=jnp.zeros((n, 4)),
                   market_weights=jnp.zeros((n, 2)), portfolio_weights=jnp.zeros((n, 5)))
    ctx = BarContext(scale=jnp.asarray(rng.uniform(0.005, 0.03, n), jnp.float32),
                     drift=jnp.asarray(rng.normal(0.05, 0.02, n), jnp.float32),
                     trust=jnp.zeros(n), prior=jnp.asarray(prior, jnp.float32),
                     prior_tm1=jnp.asarray(prior, jnp.float32))
    return out, ctx


def test_an_untrusted_forecast_leaves_the_prior_optimal_whatever_it_says():
    """`--view trusted` at w = 0 (a fold whose cross-fitted trees show no predictable
    direction): the zero residual is the strict argmax at every bar, for any forecast, not
    only one at its train level, and whatever the learnt continuation C says (w·C = 0)."""
    n = 400
    out, ctx = _random_bars(n, 1)
    rng = np.random.default_rng(3)
    out = out.replace(w_direction=jnp.asarray(rng.normal(0, 5, (n, 3)), jnp.float32),
                      w_magnitude=jnp.asarray(rng.normal(0, 5, (n, 4)), jnp.float32))
    q = np.asarray(assemble(out, ctx.prior_tm1, ctx, TRUSTED_ENV, 100.0))
    assert np.all(np.argmax(q, -1) == 0)
    a = np.asarray(position_fractions(TRUSTED_ENV, ctx.prior))
    distinct = np.abs(a - np.asarray(ctx.prior)[:, None]) > 1e-6
    assert np.all(q[:, :1] > np.where(distinct, q, -np.inf))


@pytest.mark.parametrize("w", [0.3, 1.0])
def test_a_trusted_forecast_moves_the_optimum_to_the_blend_of_prior_and_sizing(w):
    """At trust w the residual's reward is maximal at u* = w·(a* − π) (`env.residual_view`),
    a* = (μ + ½m₂)/(κm₂) the flat learner's mean-variance position; without costs and
    continuation the assembled Q's best residual on the grid is the grid point nearest u*
    among the reachable ones, and its reward equals the full mean-variance reward's at μ_w
    less the prior's; a continuation enters as w·C."""
    n = 300
    cfg = dataclasses.replace(TRUSTED_ENV, commission_bps=0.0, slippage_bps=0.0)
    out, ctx = _random_bars(n, 2)
    ctx = ctx.replace(trust=jnp.full(n, w))
    q = np.asarray(assemble(out, ctx.prior_tm1, ctx, cfg, 100.0))
    with_c = out.replace(w_direction=jnp.asarray([[0.0, 1.0, 2.0]] * n),
                         w_magnitude=jnp.asarray([[0.0, 0.5, 0.0, 0.0]] * n))
    np.testing.assert_allclose(np.asarray(assemble(with_c, ctx.prior_tm1, ctx, cfg, 100.0)),
                               q + w * np.asarray(continuation(with_c)), rtol=1e-5, atol=1e-5)
    s, pi = np.asarray(ctx.scale, np.float64), np.asarray(ctx.prior, np.float64)
    mu, m2 = s * np.asarray(out.aux, np.float64), s**2 * np.asarray(out.second_moment, np.float64)
    kappa = env.risk_curvature(cfg)
    a_star = (mu + 0.5 * m2) / (kappa * m2)
    u_star = w * (a_star - pi)
    u = np.asarray(position_fractions(cfg, ctx.prior), np.float64) - pi[:, None]
    # the reward is concave in u with its peak at u*: the best reachable grid point is the one
    # nearest u* (by |u − u*|, the quadratic's symmetry)
    want = np.argmin(np.abs(u - u_star[:, None]), -1)
    got = np.argmax(q, -1)
    np.testing.assert_allclose(u[np.arange(n), got], u[np.arange(n), want], atol=1e-6)
    mu_w = (1 - w) * (kappa * pi * m2 - 0.5 * m2) + w * mu

    def mv(a):
        return a * (mu_w[:, None] + 0.5 * m2[:, None]) - 0.5 * kappa * a**2 * m2[:, None]

    a = pi[:, None] + u
    np.testing.assert_allclose(q, 100 * (mv(a) - mv(pi[:, None])), rtol=2e-4, atol=1e-6)


def test_the_trusted_view_needs_a_prior_and_the_model_head():
    with pytest.raises(InputError, match="--view.*excess with --prior flat"):
        EnvConfig(prior="flat", view="trusted").validate()
    generic = RunConfig(env=TRUSTED_ENV, net=NetConfig(q_head="generic"))
    with pytest.raises(InputError, match="--view.*excess with --q-head generic"):
        generic.validate()
