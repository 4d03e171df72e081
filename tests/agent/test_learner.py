"""Tests for rl_trader.agent.learner: target EMA coverage (through the generic head's update),
the optimiser, ε, the full-action positions."""

from __future__ import annotations

import dataclasses

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rl_trader import env
from rl_trader.agent import generic_head, learner
from rl_trader.agent.generic_head import QNetwork, QOut
from rl_trader.agent.learner import Backups
from rl_trader.agent.networks import Obs
from rl_trader.agent.replay import NStep
from rl_trader.config import AgentConfig, EnvConfig, NetConfig
from tests.helpers import init_params, make_obs

SMALL = NetConfig(hidden=4, trunk=8, context=4)
F, L, P, M, B = 3, 5, 5, 4, 8  # market vars, look-back, portfolio vars, magnitudes, batch
TAU = 0.3  # large enough that one EMA step is far from both ends
CFG = AgentConfig(learning_rate=1e-2, tau=TAU, aux_weight=0.5, huber_delta=1.0)


def make_batch(seed):
    """A random batch of (obs_tm1, obs_t, a_dir, a_mag, r, discount, aux_target)."""
    rng = np.random.default_rng(seed)
    return (make_obs(rng.integers(1 << 30), (B,)), make_obs(rng.integers(1 << 30), (B,)),
            jnp.asarray(rng.integers(0, 3, B), jnp.int32),
            jnp.asarray(rng.integers(0, M, B), jnp.int32),
            jnp.asarray(rng.normal(size=B), jnp.float32),
            jnp.asarray(rng.uniform(0.0, 0.99, B), jnp.float32),
            jnp.asarray(rng.normal(size=B), jnp.float32))


def taken(a_dir, a_mag, r, discount) -> NStep:
    """A batch of taken transitions: what `generic_head.q_loss` reads of a replay sample."""
    return NStep(state_tm1=None, direction_tm1=a_dir, magnitude_tm1=a_mag, return_t=r,
                 discount_t=discount, bar_t=None, portfolio_t=None)


def q_loss_of(out_tm1, online_t, target_t, a_dir, a_mag, r, discount, y, cfg, aux_weight):
    """`generic_head.q_loss` of the taken transitions given as arrays."""
    return generic_head.q_loss(out_tm1, online_t, target_t, taken(a_dir, a_mag, r, discount), y,
                               cfg, aux_weight)


def backups_of(obs_t, r_t, discount_t) -> Backups:
    """Full-action backups with what the generic head reads of them."""
    return Backups(obs_t=obs_t, position_tm1=None, position_t=None, ctx_tm1=None,
                   ctx_t=None, r_t=r_t, discount_t=discount_t)


def leaves_with_paths(tree):
    return [(jax.tree_util.keystr(path), leaf)
            for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]]


def ema(new, old, tau):
    """The EMA written out leaf by leaf in float64: τ·new + (1 − τ)·old."""
    return jax.tree.map(lambda n, o: tau * np.asarray(n, np.float64)
                        + (1.0 - tau) * np.asarray(o, np.float64), new, old)


class WithExtraHead(nn.Module):
    """A network 'added later': the Q-network plus a new sub-module feeding the aux output."""

    cfg: NetConfig
    n_magnitudes: int

    @nn.compact
    def __call__(self, obs: Obs) -> QOut:
        out = QNetwork(self.cfg, self.n_magnitudes, name="q")(obs)
        extra = nn.Dense(1, name="extra_head")(obs.portfolio)[..., 0]
        return out.replace(aux=out.aux + extra)


def make_update(apply_fn, cfg=CFG):
    hp = learner.HParams.from_config(cfg)
    def update(state, batch):
        obs_tm1, obs_t, a_dir, a_mag, r, discount, y = batch
        return generic_head.update(state, apply_fn, obs_tm1, obs_t,
                                   taken(a_dir, a_mag, r, discount), y, cfg, hp)

    return jax.jit(update)


def small_qnet():
    """The small generic network, its params and its jitted update."""
    net = QNetwork(SMALL, M)
    params = init_params(net, make_obs(1))
    return net, params, make_update(net.apply)


@pytest.fixture(scope="module")
def qnet():
    return small_qnet()


@pytest.fixture(scope="module")
def one_update(qnet):
    _, params, update = qnet
    state0 = learner.init_train_state(params, CFG)
    state1, info = update(state0, make_batch(2))
    return state0, state1, info


# --- target EMA -----------------------------------------------------------------------------


def test_target_starts_equal_to_online(qnet):
    _, params, _ = qnet
    state = learner.init_train_state(params, CFG)
    chex.assert_trees_all_equal(state.target_params, state.params)
    chex.assert_trees_all_equal_structs(state.target_params, state.params)
    assert int(state.step) == 0


def test_update_moves_every_target_leaf_by_the_ema(one_update):
    state0, state1, _ = one_update
    expected = ema(state1.params, state0.target_params, TAU)
    chex.assert_trees_all_close(state1.target_params, expected, rtol=1e-6, atol=1e-7)
    # Leaf by leaf, and count them: a partial update (a sub-tree left out) must fail here.
    got, want = leaves_with_paths(state1.target_params), leaves_with_paths(expected)
    old = dict(leaves_with_paths(state0.target_params))
    n_compared = 0
    for (path, g), (path_w, w) in zip(got, want, strict=True):
        assert path == path_w
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6, atol=1e-7, err_msg=path)
        assert float(np.abs(np.asarray(g) - old[path]).max()) > 0, f"target leaf {path} unmoved"
        n_compared += 1
    assert n_compared == len(jax.tree.leaves(state1.params))
    paths = [p for p, _ in got]
    for group in ("market_vsn", "portfolio_vsn", "trunk", "lookback", "aux", "value"):
        assert any(f"'{group}'" in p for p in paths), group
    assert int(state1.step) == 1


def test_optimizer_updates_every_param_leaf(one_update):
    state0, state1, info = one_update
    chex.assert_tree_all_finite((state1.params, info))
    unchanged = [path for (path, a), (_, b) in zip(leaves_with_paths(state0.params),
                                                    leaves_with_paths(state1.params), strict=True)
                 if not np.any(np.asarray(a) != np.asarray(b))]
    assert unchanged == []


def test_target_update_closed_form_from_zeros(qnet):
    """With online fixed and θ̄₀ = 0, k EMA steps give θ̄_k = (1 − (1 − τ)^k)·θ."""
    _, params, _ = qnet
    rng = np.random.default_rng(0)
    online = jax.tree.map(lambda x: jnp.asarray(rng.normal(size=x.shape), x.dtype), params)
    target = jax.tree.map(jnp.zeros_like, params)
    step = jax.jit(lambda o, t: learner.target_update(o, t, TAU))
    def dist(o, t):
        return float(np.abs(np.asarray(o) - np.asarray(t)).sum())

    dist0 = jax.tree.map(dist, online, target)
    for k in range(1, 5):
        target = step(online, target)
        frac = 1.0 - (1.0 - TAU) ** k
        chex.assert_trees_all_close(target, jax.tree.map(lambda o, f=frac: f * o, online),
                                    rtol=1e-6, atol=1e-7)
    dist_k = jax.tree.map(dist, online, target)
    assert all(d < d0 for d, d0 in zip(jax.tree.leaves(dist_k), jax.tree.leaves(dist0),
                                         strict=True))


def test_updates_from_zero_target_follow_the_ema_recursion(qnet):
    """Target started at zeros; after each of k updates θ̄_k = τ·θ_k + (1 − τ)·θ̄_{k−1}."""
    _, params, update = qnet
    state = learner.init_train_state(params, CFG)
    state = state.replace(target_params=jax.tree.map(jnp.zeros_like, params))
    expected = state.target_params
    for k in range(3):
        state, _ = update(state, make_batch(10 + k))
        expected = ema(state.params, expected, TAU)
        chex.assert_trees_all_close(state.target_params, expected, rtol=1e-5, atol=1e-6)
    # Every leaf has moved off zero towards online.
    for path, leaf in leaves_with_paths(state.target_params):
        assert float(np.abs(np.asarray(leaf)).max()) > 0, path
    assert int(state.step) == 3


def test_ema_covers_a_module_added_later():
    """A wrapper network with a new sub-module: the same update code moves all its leaves."""
    net = WithExtraHead(SMALL, M)
    params = init_params(net, make_obs(4), seed=3)
    assert "extra_head" in params["params"] and "q" in params["params"]
    state0 = learner.init_train_state(params, CFG)
    state0 = state0.replace(target_params=jax.tree.map(jnp.zeros_like, params))
    state1, _ = make_update(net.apply)(state0, make_batch(5))
    chex.assert_trees_all_close(state1.target_params,
                                ema(state1.params, state0.target_params, TAU),
                                rtol=1e-6, atol=1e-7)
    leaves = leaves_with_paths(state1.target_params)
    assert len(leaves) == len(jax.tree.leaves(params))
    for path, leaf in leaves:
        assert float(np.abs(np.asarray(leaf)).max()) > 0, f"target leaf {path} unmoved"
    extra = [p for p, _ in leaves if "extra_head" in p]
    assert len(extra) == 2  # kernel and bias
    # The new head is trained too (its gradient flows through the aux loss).
    chex.assert_trees_all_equal_shapes(state1.params["params"]["extra_head"],
                                       params["params"]["extra_head"])
    assert not np.allclose(state1.params["params"]["extra_head"]["kernel"],
                           params["params"]["extra_head"]["kernel"])


def test_huber():
    x = jnp.asarray([0.0, 0.5, -0.5, 1.0, -3.0, 3.0])
    np.testing.assert_allclose(learner.huber(x, 1.0), [0.0, 0.125, 0.125, 0.5, 2.5, 2.5],
                               rtol=1e-6)
    # δ = 2: quadratic ½x² inside, δ(|x| − δ/2) outside.
    np.testing.assert_allclose(learner.huber(jnp.asarray([1.5, 2.0, 5.0, -4.0]), 2.0),
                               [1.125, 2.0, 8.0, 6.0], rtol=1e-6)
    # Continuous at ±δ, slope ±δ beyond it.
    eps = 1e-3
    for delta in (0.5, 2.0):
        lo, hi = learner.huber(jnp.asarray([delta - eps, delta + eps]), delta)
        assert abs(float(hi - lo)) < 2.1 * delta * eps
        np.testing.assert_allclose(jax.grad(learner.huber)(jnp.float32(3 * delta), delta), delta)
        np.testing.assert_allclose(jax.grad(learner.huber)(jnp.float32(-3 * delta), delta), -delta)


def test_epsilon_schedule():
    cfg = AgentConfig(eps_start=1.0, eps_end=0.05, eps_decay_fraction=0.5)
    hp = learner.HParams.from_config(cfg)
    eps = jax.jit(lambda t: learner.epsilon(t, 1000, cfg, hp))  # decays over 500 env steps
    np.testing.assert_allclose(eps(0), 1.0)
    np.testing.assert_allclose(eps(250), 0.525, rtol=1e-6)
    np.testing.assert_allclose(eps(500), 0.05, rtol=1e-6)
    np.testing.assert_allclose(eps(10_000), 0.05, rtol=1e-6)


def test_epsilon_traced_hparams_override_the_config():
    """One compiled schedule serves members with different eps_end / decay fractions."""
    cfg = AgentConfig()
    hps = jax.tree.map(lambda *x: jnp.stack(x), *[
        learner.HParams.from_config(dataclasses.replace(cfg, eps_end=e, eps_decay_fraction=f))
        for e, f in ((0.05, 0.5), (0.2, 1.0))])
    eps = jax.jit(jax.vmap(lambda t, hp: learner.epsilon(t, 1000, cfg, hp), in_axes=(None, 0)))
    np.testing.assert_allclose(eps(500, hps), [0.05, 0.6], rtol=1e-6)
    np.testing.assert_allclose(eps(1000, hps), [0.05, 0.2], rtol=1e-6)


def test_weight_decay_hparam_shrinks_params_without_gradient():
    """Decoupled decay: with a zero gradient, θ ← θ − η·λ·θ (Adam's update of 0 is 0)."""
    cfg = AgentConfig(learning_rate=0.1)
    params = {"kernel": jnp.ones(3)}
    hp = learner.HParams.from_config(cfg).replace(weight_decay=jnp.float32(0.5))
    tx = learner.make_optimizer(cfg, hp)
    updates, _ = tx.update({"kernel": jnp.zeros(3)}, tx.init(params), params)
    np.testing.assert_allclose(optax.apply_updates(params, updates)["kernel"], 1 - 0.1 * 0.5,
                               rtol=1e-6)


def test_weight_decay_on_kernels_leaves_biases_and_norms(qnet):
    """With a zero gradient only the network's weight matrices
    shrink (θ ← (1 − ηλ)·θ); biases, LayerNorm scales and offsets and the VSNs' knot values
    stay. Every leaf of the real network is one or the other, and both kinds exist."""
    _, params, _ = qnet
    cfg = AgentConfig(learning_rate=0.1)
    hp = learner.HParams.from_config(cfg).replace(weight_decay=jnp.float32(0.5))
    tx = learner.make_optimizer(cfg, hp)
    @jax.jit  # one program, not an eager op for each leaf's shape
    def step(params):
        zeros = jax.tree.map(jnp.zeros_like, params)
        updates, _ = tx.update(zeros, tx.init(params), params)
        return optax.apply_updates(params, updates)

    new = step(params)
    kinds = {"kernel": 0, "kept": 0}
    for (path, before), after in zip(leaves_with_paths(params), jax.tree.leaves(new),
                                     strict=True):
        name = path.rsplit("[", 1)[-1].strip("[]'")  # the leaf's own key
        if name.endswith("kernel"):
            np.testing.assert_allclose(after, 0.95 * np.asarray(before), rtol=1e-6)
            kinds["kernel"] += 1
        else:
            assert name.endswith(("bias", "scale", "knots")), name
            np.testing.assert_array_equal(after, before)
            kinds["kept"] += 1
    assert kinds["kernel"] > 10 and kinds["kept"] > 10


def test_hparams_fields_are_the_sweepable_names():
    """`HParams` is declared field by field: its fields, in order, are `config.SWEEPABLE`
    (the fields declared with `option(sweep=True)`), each a traced array, so neither can
    drift from the other; `from_config` fills each from the config as float32."""
    from rl_trader.config import SWEEPABLE

    fields = dataclasses.fields(learner.HParams)
    assert tuple(f.name for f in fields) == SWEEPABLE
    assert all(f.type in ("jax.Array", jax.Array) for f in fields)
    cfg = AgentConfig(learning_rate=3e-4, gamma=0.5)
    hp = learner.HParams.from_config(cfg)
    for name in SWEEPABLE:
        value = getattr(hp, name)
        assert value.dtype == jnp.float32 and value == np.float32(getattr(cfg, name)), name


# Positions in `position_actions` order: flat, short 0.5, short 1, long 0.5, long 1.
ENV2 = EnvConfig(prior="flat", view="excess", magnitudes=(0.5, 1.0),
                 commission_bps=1.0, slippage_bps=1.0, reward="log")
POSITIONS = (0.0, -0.5, -1.0, 0.5, 1.0)


def test_position_actions_cover_every_distinct_position():
    direction, magnitude = learner.position_actions(2)
    np.testing.assert_allclose(env.target_fraction(direction, magnitude, ENV2), POSITIONS)


def test_apply_positions_equals_the_network_on_each_portfolio(qnet):
    """Sharing the market part across K portfolios changes nothing but the cost."""
    net, params, _ = qnet
    obs = make_obs(12, (B,))
    k = 5
    port = jnp.asarray(np.random.default_rng(13).normal(size=(B, k, P)), jnp.float32)
    shared = jax.jit(lambda p: learner.apply_positions(net.apply, params,
                                                     obs.replace(portfolio=p)))(port)
    apply = jax.jit(lambda p: net.apply(params, obs.replace(portfolio=p)))
    for j in range(k):
        one = apply(port[:, j])
        chex.assert_trees_all_close(jax.tree.map(lambda x, j=j: x[:, j], shared), one,
                                    rtol=1e-5, atol=1e-6)


