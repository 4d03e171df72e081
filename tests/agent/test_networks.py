"""rl_trader.agent.networks: shapes, VSN weights, dueling identity, GLU/GRN hand checks."""

from __future__ import annotations

import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl_trader.agent.generic_head import QNetwork
from rl_trader.agent.heads import make_head
from rl_trader.agent.model_head import ModelQNetwork
from rl_trader.agent.networks import GLU, GRN, KNOTS, VSN, Obs, hat_basis
from rl_trader.config import NetConfig, RunConfig
from tests.helpers import init_params, make_obs

SMALL = NetConfig(hidden=4, trunk=8, context=4)
F, L, P, M = 3, 5, 5, 4  # market vars, look-back, portfolio vars, magnitudes


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))


def np_layer_norm(y, scale, bias, eps=1e-6):
    mean = y.mean(-1, keepdims=True)
    var = ((y - mean) ** 2).mean(-1, keepdims=True)
    return (y - mean) / np.sqrt(var + eps) * scale + bias


@pytest.fixture(scope="module")
def qnet():
    """(jitted apply, params) of a small network; jit keeps the tests fast on a CPU."""
    net = QNetwork(SMALL, M)
    params = init_params(net, make_obs(1))
    return jax.jit(net.apply), params


# --- QNetwork -------------------------------------------------------------------------------


@pytest.mark.parametrize("lead", [(), (6,), (2, 3)])
def test_output_shapes(qnet, lead):
    apply, params = qnet
    out = apply(params, make_obs(2, lead))
    chex.assert_shape(out.q_direction, lead + (3,))
    chex.assert_shape(out.q_magnitude, lead + (M,))
    chex.assert_shape(out.aux, lead)
    chex.assert_shape(out.market_weights, lead + (F,))
    chex.assert_shape(out.portfolio_weights, lead + (P,))
    chex.assert_tree_all_finite(out)


def test_batch_rows_are_independent(qnet):
    """Row i of a batched call equals the unbatched call on observation i (no batch mixing)."""
    apply, params = qnet
    obs = make_obs(3, (6,))
    batched = apply(params, obs)
    for i in range(6):
        single = apply(params, jax.tree.map(lambda x, i=i: x[i], obs))
        # equal up to the matmuls' blocking, which differs with the batch's shape on a CPU
        chex.assert_trees_all_close(jax.tree.map(lambda x, i=i: x[i], batched), single,
                                    rtol=1e-4, atol=2e-5)


def test_vsn_weights_are_a_distribution(qnet):
    apply, params = qnet
    out = apply(params, make_obs(4, (6,)))
    for w in (out.market_weights, out.portfolio_weights):
        assert bool(jnp.all(w >= 0))
        np.testing.assert_allclose(np.asarray(w.sum(-1)), 1.0, rtol=1e-5)


def test_dueling_advantages_have_zero_mean(qnet):
    """Q_b = V + A_b − mean A_b: both branches average to the same V, the value head's output."""
    apply, params = qnet
    obs = make_obs(5, (6,))
    apply = jax.jit(functools.partial(QNetwork(SMALL, M).apply, capture_intermediates=True))
    out, state = apply(params, obs)
    value = state["intermediates"]["value"]["__call__"][0][..., 0]
    chex.assert_shape(value, (6,))
    np.testing.assert_allclose(out.q_direction.mean(-1), out.q_magnitude.mean(-1), atol=1e-5)
    np.testing.assert_allclose(out.q_direction.mean(-1), value, atol=1e-5)
    # The branches are not degenerate: actions differ within a branch.
    assert float(jnp.std(out.q_direction, -1).min()) > 0
    assert float(jnp.std(out.q_magnitude, -1).min()) > 0


def expected_parameter_count(f: int, lb: int, p: int, m: int, d: int, trunk: int,
                             c: int) -> int:
    """The architecture's parameter count written out (networks.py's docstring): F market
    and P portfolio variables, look-back L, M magnitudes, widths d (hidden), trunk, c (context).
    """
    dense = lambda n_in, n_out, bias=True: n_in * n_out + (n_out if bias else 0)  # noqa: E731
    k = len(KNOTS)  # each variable's curve: K knot values in R^d

    def grn(n_in: int, out: int, hidden: int, context: int | None) -> int:
        return (dense(n_in, hidden) + (dense(context, hidden, False) if context else 0)
                + dense(hidden, hidden) + (dense(n_in, out) if n_in != out else 0)
                + 2 * dense(hidden, out) + 2 * out)

    return (dense(lb * f, c)  # look-back context
            + f * k * d + grn(f * k, f, d, c)  # market VSN: curves + selector
            + p * k * d + grn(p * k, p, d, None)  # portfolio VSN
            + grn(2 * d, trunk, trunk, c)  # trunk
            + dense(trunk, 1) + dense(trunk, 3) + dense(trunk, m)  # value, advantages
            + dense(d + c, 1))  # aux head


@pytest.mark.parametrize("cfg, m, expected", [(NetConfig(), 4, 65_101),
                                              (NetConfig(hidden=8, trunk=16, context=8), 3,
                                               None)])
def test_parameter_count_is_exactly_the_documented_architecture(cfg, m, expected):
    """The generic network at the default NetConfig, F=21, L=32, P=5, M=4: 65,101 parameters
    (docs/benchmarks.md)."""
    net = QNetwork(cfg, m)
    obs = Obs(market=jax.ShapeDtypeStruct((21,), jnp.float32),
              window=jax.ShapeDtypeStruct((32, 21), jnp.float32),
              portfolio=jax.ShapeDtypeStruct((5,), jnp.float32))
    shapes = jax.eval_shape(net.init, jax.random.key(0), obs)
    n = sum(math.prod(x.shape) for x in jax.tree.leaves(shapes))
    assert n == expected_parameter_count(21, 32, 5, m, cfg.hidden, cfg.trunk, cfg.context)
    assert expected is None or n == expected


def test_bar_level_inputs_have_no_window_context():
    """--lookback 1: the window is the market row itself; no `lookback` layer, and the
    count is the documented architecture with c = 0 (no context anywhere)."""
    net = QNetwork(NetConfig(), 4)
    obs = Obs(market=jax.ShapeDtypeStruct((21,), jnp.float32),
              window=jax.ShapeDtypeStruct((1, 21), jnp.float32),
              portfolio=jax.ShapeDtypeStruct((5,), jnp.float32))
    shapes = jax.eval_shape(net.init, jax.random.key(0), obs)
    assert "lookback" not in shapes["params"]
    n = sum(math.prod(x.shape) for x in jax.tree.leaves(shapes))
    assert n == expected_parameter_count(21, 1, 5, 4, 32, 64, 0)


def test_model_network_outputs_and_the_stop_gradient():
    """The model head's outputs: μ̂, m̂₂ ≥ 0, the continuation's branches (magnitude advantages
    centred). The continuation's gradient reaches neither the market VSN nor the look-back
    context (the forecast's gradient does)."""
    obs = make_obs(8, (6,))
    cfg = NetConfig(hidden=4, trunk=8, context=4, q_head="model")
    net = make_head(RunConfig(net=cfg)).network  # M magnitudes by default
    assert isinstance(net, ModelQNetwork) and net.n_magnitudes == M
    params = init_params(net, obs, seed=2)
    out = jax.jit(net.apply)(params, obs)
    chex.assert_shape([out.aux, out.second_moment], (6,))
    chex.assert_shape(out.w_direction, (6, 3))
    chex.assert_shape(out.w_magnitude, (6, M))
    assert bool(jnp.all(out.second_moment >= 0))
    np.testing.assert_allclose(out.w_magnitude.mean(-1), 0.0, atol=1e-6)

    def grads(params):  # the continuation's and the forecasts' gradients
        def part(head):
            return jax.grad(lambda p: head(net.apply(p, obs)).sum())(params)["params"]

        return (part(lambda o: o.w_direction[:, 0] + o.w_magnitude[:, 1]),
                part(lambda o: o.aux + o.second_moment))

    td, fc = jax.jit(grads)(params)
    for name in ("market_vsn", "lookback"):
        assert all(float(jnp.abs(g).sum()) == 0 for g in jax.tree.leaves(td[name])), name
        assert all(float(jnp.abs(g).sum()) > 0 for g in jax.tree.leaves(fc[name])), name
    assert any(float(jnp.abs(g).sum()) > 0 for g in jax.tree.leaves(td["trunk"]))
    assert all(float(jnp.abs(g).sum()) == 0 for g in jax.tree.leaves(fc["trunk"]))


# --- building blocks ------------------------------------------------------------------------


def test_glu_matches_explicit_formula():
    x = np.random.default_rng(6).normal(size=(2, 4))
    glu = GLU(3)
    params = init_params(glu, jnp.zeros((4,)), seed=8)
    p = jax.tree.map(np.asarray, params["params"])
    expected = (np_sigmoid(x @ p["gate"]["kernel"] + p["gate"]["bias"])
                * (x @ p["value"]["kernel"] + p["value"]["bias"]))
    got = jax.jit(glu.apply)(params, jnp.asarray(x, jnp.float32))
    chex.assert_shape(got, (2, 3))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-6)


def test_grn_with_context_and_projection_matches_explicit_formula():
    """GRN(a, c) = LayerNorm(W_s a + b_s + GLU(W₁·ELU(W₂a + b₂ + W₃c) + b₁)), widths 4 → 3."""
    rng = np.random.default_rng(9)
    a, c = rng.normal(size=(2, 4)), rng.normal(size=(2, 2))
    grn = GRN(3, hidden=5)
    params = init_params(grn, jnp.zeros((4,)), jnp.zeros((2,)), seed=11)
    p = jax.tree.map(np.asarray, params["params"])
    assert set(p) == {"w1", "w2", "w3", "skip", "glu", "norm"}
    assert "bias" not in p["w3"]
    h = np_elu(a @ p["w2"]["kernel"] + p["w2"]["bias"] + c @ p["w3"]["kernel"])
    h = h @ p["w1"]["kernel"] + p["w1"]["bias"]
    g = (np_sigmoid(h @ p["glu"]["gate"]["kernel"] + p["glu"]["gate"]["bias"])
         * (h @ p["glu"]["value"]["kernel"] + p["glu"]["value"]["bias"]))
    y = a @ p["skip"]["kernel"] + p["skip"]["bias"] + g
    expected = np_layer_norm(y, p["norm"]["scale"], p["norm"]["bias"])
    got = jax.jit(grn.apply)(params, jnp.asarray(a, jnp.float32), jnp.asarray(c, jnp.float32))
    chex.assert_shape(got, (2, 3))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-4, atol=1e-5)


def test_grn_same_width_uses_identity_skip():
    a = np.random.default_rng(12).normal(size=(3, 4))
    grn = GRN(4)
    params = init_params(grn, jnp.zeros((4,)), seed=14)
    p = jax.tree.map(np.asarray, params["params"])
    assert "skip" not in p and "w3" not in p
    h = np_elu(a @ p["w2"]["kernel"] + p["w2"]["bias"]) @ p["w1"]["kernel"] + p["w1"]["bias"]
    g = (np_sigmoid(h @ p["glu"]["gate"]["kernel"] + p["glu"]["gate"]["bias"])
         * (h @ p["glu"]["value"]["kernel"] + p["glu"]["value"]["bias"]))
    expected = np_layer_norm(a + g, p["norm"]["scale"], p["norm"]["bias"])
    got = jax.jit(grn.apply)(params, jnp.asarray(a, jnp.float32))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-4, atol=1e-5)


def test_grn_output_is_layer_normalised_at_init():
    grn = GRN(6, hidden=5)
    a = jnp.asarray(3.0 + 5.0 * np.random.default_rng(15).normal(size=(32, 4)), jnp.float32)
    params = jax.jit(grn.init)(jax.random.key(16), a)
    y = jax.jit(grn.apply)(params, a)
    np.testing.assert_allclose(np.asarray(y.mean(-1)), 0.0, atol=1e-5)
    np.testing.assert_allclose(np.asarray(y.var(-1)), 1.0, atol=1e-3)


def test_hat_basis_interpolates_between_the_knots():
    """h(x) sums to 1, has at most two non-zero weights, reproduces x (Σ_k h_k k_k = clip(x)),
    and Σ_k h_k(x) A_k interpolates A linearly between adjacent knots."""
    x = jnp.asarray([[-9.0, -4.0, -2.5, -0.25, 0.0, 0.6, 3.999, 4.0, 7.0]], jnp.float32)
    h = np.asarray(hat_basis(x))
    chex.assert_shape(h, (1, 9, len(KNOTS)))
    np.testing.assert_allclose(h.sum(-1), 1.0, atol=1e-6)
    assert ((h > 0).sum(-1) <= 2).all() and (h >= 0).all()
    np.testing.assert_allclose(h @ np.asarray(KNOTS), np.clip(np.asarray(x), -4, 4), atol=1e-5)
    values = np.random.default_rng(3).normal(size=len(KNOTS))
    lo = KNOTS.index(0.0)
    np.testing.assert_allclose(h[0, 5] @ values, 0.4 * values[lo] + 0.6 * values[lo + 1],
                               atol=1e-6)


def test_vsn_is_the_weighted_sum_of_piecewise_linear_embeddings():
    """out = Σ_v w_v ξ_v with ξ_v = Σ_k h_k(x_v) A_vk written out, w the
    softmax of the selector GRN on the flattened basis (a projected skip), conditioned by the
    context; each variable's curve starts straight, ξ_v = x_v·u_v."""
    n_vars, d, k = 3, 4, len(KNOTS)
    rng = np.random.default_rng(24)
    x = jnp.asarray(rng.normal(size=(6, n_vars)) * 2, jnp.float32)
    c = jnp.asarray(rng.normal(size=(6, 2)), jnp.float32)
    vsn = VSN(d)
    start = vsn.init(jax.random.key(0), x, c)["params"]["knots"].reshape(n_vars, k, d)
    np.testing.assert_allclose(start, start[:, -1:] * np.asarray(KNOTS)[:, None] / KNOTS[-1],
                               atol=1e-5)
    params = init_params(vsn, x, c, seed=25)
    p = params["params"]
    assert set(p) == {"selector", "knots"} and "skip" in p["selector"]
    apply = jax.jit(vsn.apply)
    out, w = apply(params, x, c)
    chex.assert_shape([out, w], [(6, d), (6, n_vars)])
    h = np.asarray(hat_basis(x))  # [6, V, K]
    logits = GRN(n_vars, hidden=d).apply({"params": p["selector"]}, h.reshape(6, -1), c)
    np.testing.assert_allclose(np.asarray(w), np.asarray(jax.nn.softmax(logits)), rtol=1e-5,
                               atol=1e-6)
    xi = np.einsum("nvk,vkd->nvd", h, np.asarray(p["knots"]).reshape(n_vars, k, d))
    expected = (np.asarray(w)[..., None] * xi).sum(-2)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)
    _, w2 = apply(params, x, c + 1.0)
    assert float(jnp.abs(w2 - w).max()) > 1e-6


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_precision_keeps_float32_params_and_outputs(precision):
    """Lower matmul precision changes the products only: the same float32 params serve every
    precision and the outputs stay float32 and close (bf16 keeps ~3 significant digits)."""
    ref_net = QNetwork(NetConfig(hidden=8, trunk=16, context=8), 3)
    net = QNetwork(NetConfig(hidden=8, trunk=16, context=8, precision=precision), 3)
    obs = make_obs(3, (4,))
    params = init_params(ref_net, obs)
    chex.assert_trees_all_equal_shapes_and_dtypes(params, jax.eval_shape(net.init,
                                                                         jax.random.key(0), obs))
    ref, out = jax.jit(ref_net.apply)(params, obs), jax.jit(net.apply)(params, obs)
    chex.assert_trees_all_equal_dtypes(ref, out)
    tol = 0.1 if precision == "bf16" else 1e-5
    chex.assert_trees_all_close(ref, out, atol=tol, rtol=tol)
