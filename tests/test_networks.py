"""Tests for rl_trader.networks: shapes, VSN weights, dueling identity, GLU/GRN hand checks."""

from __future__ import annotations

import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl_trader.config import NetConfig
from rl_trader.networks import GLU, GRN, VSN, Obs, QNetwork, VariableGRNs

SMALL = NetConfig(hidden=4, trunk=8, context=4)
F, L, P, M = 3, 5, 5, 4  # market vars, look-back, portfolio vars, magnitudes


def make_obs(key, lead=()):
    k1, k2, k3 = jax.random.split(key, 3)
    return Obs(market=jax.random.normal(k1, lead + (F,)),
               window=jax.random.normal(k2, lead + (L, F)),
               portfolio=jax.random.normal(k3, lead + (P,)))


def randomise(params, seed):
    """Replace every leaf by N(0, 1) draws, so zero-initialised biases matter in hand checks."""
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda x: jnp.asarray(rng.normal(size=x.shape), x.dtype), params)


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
    """(jitted apply, params) of a small network; jit keeps the suite fast on CPU."""
    net = QNetwork(SMALL, M)
    params = jax.jit(net.init)(jax.random.key(0), make_obs(jax.random.key(1)))
    return jax.jit(net.apply), params


# --- QNetwork -------------------------------------------------------------------------------


@pytest.mark.parametrize("lead", [(), (6,), (2, 3)])
def test_output_shapes(qnet, lead):
    apply, params = qnet
    out = apply(params, make_obs(jax.random.key(2), lead))
    chex.assert_shape(out.q_direction, lead + (3,))
    chex.assert_shape(out.q_magnitude, lead + (M,))
    chex.assert_shape(out.aux, lead)
    chex.assert_shape(out.market_weights, lead + (F,))
    chex.assert_shape(out.portfolio_weights, lead + (P,))
    chex.assert_tree_all_finite(out)


def test_batch_rows_are_independent(qnet):
    """Row i of a batched call equals the unbatched call on observation i (no batch mixing)."""
    apply, params = qnet
    obs = make_obs(jax.random.key(3), (4,))
    batched = apply(params, obs)
    for i in range(4):
        single = apply(params, jax.tree.map(lambda x, i=i: x[i], obs))
        chex.assert_trees_all_close(jax.tree.map(lambda x, i=i: x[i], batched), single,
                                    rtol=1e-5, atol=1e-6)


def test_vsn_weights_are_a_distribution(qnet):
    apply, params = qnet
    out = apply(params, make_obs(jax.random.key(4), (16,)))
    for w in (out.market_weights, out.portfolio_weights):
        assert bool(jnp.all(w >= 0))
        np.testing.assert_allclose(np.asarray(w.sum(-1)), 1.0, rtol=1e-5)


def test_dueling_advantages_have_zero_mean(qnet):
    """Q_b = V + A_b − mean A_b: both branches average to the same V, the value head's output."""
    apply, params = qnet
    obs = make_obs(jax.random.key(5), (8,))
    apply = jax.jit(functools.partial(QNetwork(SMALL, M).apply, capture_intermediates=True))
    out, state = apply(params, obs)
    value = state["intermediates"]["value"]["__call__"][0][..., 0]
    chex.assert_shape(value, (8,))
    np.testing.assert_allclose(out.q_direction.mean(-1), out.q_magnitude.mean(-1), atol=1e-5)
    np.testing.assert_allclose(out.q_direction.mean(-1), value, atol=1e-5)
    # The branches are not degenerate: actions differ within a branch.
    assert float(jnp.std(out.q_direction, -1).min()) > 0
    assert float(jnp.std(out.q_magnitude, -1).min()) > 0


def test_default_parameter_count():
    """Default NetConfig, F=21, L=32, P=5, M=4 (174,827 parameters when written)."""
    net = QNetwork(NetConfig(), 4)
    obs = Obs(market=jax.ShapeDtypeStruct((21,), jnp.float32),
              window=jax.ShapeDtypeStruct((32, 21), jnp.float32),
              portfolio=jax.ShapeDtypeStruct((5,), jnp.float32))
    shapes = jax.eval_shape(net.init, jax.random.key(0), obs)
    n = sum(math.prod(x.shape) for x in jax.tree.leaves(shapes))
    assert 100_000 <= n <= 400_000, n


# --- building blocks ------------------------------------------------------------------------


def test_glu_matches_explicit_formula():
    x = np.asarray(jax.random.normal(jax.random.key(6), (2, 4)), np.float64)
    glu = GLU(3)
    params = randomise(jax.jit(glu.init)(jax.random.key(7), jnp.zeros((4,))), 8)
    p = jax.tree.map(np.asarray, params["params"])
    expected = (np_sigmoid(x @ p["gate"]["kernel"] + p["gate"]["bias"])
                * (x @ p["value"]["kernel"] + p["value"]["bias"]))
    got = jax.jit(glu.apply)(params, jnp.asarray(x, jnp.float32))
    chex.assert_shape(got, (2, 3))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-6)


def test_grn_with_context_and_projection_matches_explicit_formula():
    """GRN(a, c) = LayerNorm(W_s a + b_s + GLU(W₁·ELU(W₂a + b₂ + W₃c) + b₁)), widths 4 → 3."""
    ka, kc = jax.random.split(jax.random.key(9))
    a = np.asarray(jax.random.normal(ka, (2, 4)), np.float64)
    c = np.asarray(jax.random.normal(kc, (2, 2)), np.float64)
    grn = GRN(3, hidden=5)
    params = randomise(jax.jit(grn.init)(jax.random.key(10), jnp.zeros((4,)), jnp.zeros((2,))),
                       11)
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
    a = np.asarray(jax.random.normal(jax.random.key(12), (3, 4)), np.float64)
    grn = GRN(4)
    params = randomise(jax.jit(grn.init)(jax.random.key(13), jnp.zeros((4,))), 14)
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
    a = 3.0 + 5.0 * jax.random.normal(jax.random.key(15), (32, 4))
    params = jax.jit(grn.init)(jax.random.key(16), a)
    y = jax.jit(grn.apply)(params, a)
    np.testing.assert_allclose(np.asarray(y.mean(-1)), 0.0, atol=1e-5)
    np.testing.assert_allclose(np.asarray(y.var(-1)), 1.0, atol=1e-3)


def test_variable_grns_equal_separate_width_one_grns():
    """VariableGRNs' variable v is exactly a GRN(d) on the scalar x_v with v's slice of params."""
    d, n_vars = 4, 3
    x = jax.random.normal(jax.random.key(17), (5, n_vars))
    vg = VariableGRNs(d)
    params = randomise(jax.jit(vg.init)(jax.random.key(18), x), 19)
    emb = jax.jit(vg.apply)(params, x)
    chex.assert_shape(emb, (5, n_vars, d))
    p = params["params"]
    grn_apply = jax.jit(GRN(d).apply)
    for v in range(n_vars):
        gp = {"params": {
            "w2": {"kernel": p["w2_kernel"][v], "bias": p["w2_bias"][v]},
            "w1": {"kernel": p["w1_kernel"][v], "bias": p["w1_bias"][v]},
            "glu": {"gate": {"kernel": p["gate_kernel"][v], "bias": p["gate_bias"][v]},
                    "value": {"kernel": p["value_kernel"][v], "bias": p["value_bias"][v]}},
            "skip": {"kernel": p["skip_kernel"][v], "bias": p["skip_bias"][v]},
            "norm": {"scale": p["norm_scale"][v], "bias": p["norm_bias"][v]},
        }}
        np.testing.assert_allclose(np.asarray(grn_apply(gp, x[:, v:v + 1])),
                                   np.asarray(emb[:, v]), rtol=1e-4, atol=1e-5)


def test_variable_grns_embedding_depends_only_on_its_variable():
    n_vars = 4
    x = jax.random.normal(jax.random.key(20), (n_vars,))
    vg = VariableGRNs(5)
    params = jax.jit(vg.init)(jax.random.key(21), x)
    apply = jax.jit(vg.apply)
    base = apply(params, x)
    for j in range(n_vars):
        moved = apply(params, x.at[j].add(1.5))
        changed = np.abs(np.asarray(moved - base)).max(-1) > 1e-6
        np.testing.assert_array_equal(changed, np.arange(n_vars) == j)


def test_vsn_output_is_weighted_sum_of_embeddings():
    n_vars, d = 3, 4
    kx, kc = jax.random.split(jax.random.key(22))
    x, c = jax.random.normal(kx, (6, n_vars)), jax.random.normal(kc, (6, 2))
    vsn = VSN(d)
    params = jax.jit(vsn.init)(jax.random.key(23), x, c)
    apply = jax.jit(vsn.apply)
    out, w = apply(params, x, c)
    chex.assert_shape([out, w], [(6, d), (6, n_vars)])
    emb = jax.jit(VariableGRNs(d).apply)({"params": params["params"]["variables"]}, x)
    expected = (np.asarray(w)[..., None] * np.asarray(emb)).sum(-2)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-6)
    # The context conditions the selection weights.
    _, w2 = apply(params, x, c + 1.0)
    assert float(jnp.abs(w2 - w).max()) > 1e-6
