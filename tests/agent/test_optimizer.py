"""The flat optimiser is optax's clip → AdamW chain on one raveled vector.

The two are different XLA programs of the same arithmetic, and XLA need not round them
alike (on the CPU they part by up to ~1e-5 relative in Adam's moments without the suite's
compile flags; a default CPU run's Sharpes, positions and losses came out the same); so they
are compared to 1e-5 of each array's scale, not bit for bit. A wrong mask, a missing or
reversed clip or a swapped step moves the params by 1e-4 to 1e-3, orders of magnitude more."""

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rl_trader.agent.generic_head import QNetwork
from rl_trader.agent.learner import HParams
from rl_trader.agent.optimizer import clipped_adamw, flat_mask, kernel_mask
from rl_trader.config import AgentConfig, NetConfig
from tests.helpers import init_params, make_obs

SMALL = NetConfig(hidden=4, trunk=8, context=4)


@pytest.fixture(scope="module")
def params():
    return init_params(QNetwork(SMALL, 2), make_obs(1))


def optax_chain(cfg: AgentConfig, hp: HParams) -> optax.GradientTransformation:
    """The optimiser as optax writes it, leaf by leaf."""
    return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm),
                       optax.adamw(hp.learning_rate, weight_decay=hp.weight_decay,
                                   mask=kernel_mask))


@pytest.mark.parametrize("scale", [1e-2, 1e2])  # the gradient's norm below and above the clip
def test_three_steps_equal_optax_chain(params, scale):
    """The same params after three steps of either (to 1e-5: see the module's docstring), on
    gradients under the clip norm and over it (clipped), with weight decay on
    the kernels and none on the rest; Adam's moments are the chain's raveled."""
    cfg = AgentConfig()
    hp = HParams.from_config(cfg).replace(weight_decay=np.float32(0.3),
                                          learning_rate=np.float32(0.01))

    @jax.jit
    def steps(params):
        out = []
        for tx in (clipped_adamw(cfg.max_grad_norm, hp.learning_rate, hp.weight_decay),
                   optax_chain(cfg, hp)):
            p, state, norms = params, tx.init(params), []
            for i in range(3):
                g = jax.tree.map(lambda x, i=i: scale * jnp.sin(3.0 * x + i), params)
                norms.append(optax.tree.norm(g))
                u, state = tx.update(g, state, p)
                p = optax.apply_updates(p, u)
            out.append((p, state, jnp.stack(norms)))
        return out

    (flat, flat_state, norms), (chain, chain_state, _) = steps(params)
    assert (np.asarray(norms) > cfg.max_grad_norm).all() == (scale > 1)
    assert (np.asarray(norms) < cfg.max_grad_norm).all() == (scale < 1)
    for a, b in zip(jax.tree.leaves(flat), jax.tree.leaves(chain), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)  # steps of ~1e-2
    adam = chain_state[1][0]
    ravel = jax.flatten_util.ravel_pytree
    for got, want in ((flat_state.mu, ravel(adam.mu)[0]), (flat_state.nu, ravel(adam.nu)[0])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))
    assert int(flat_state.count) == int(adam.count) == 3


def test_flat_mask_is_kernel_mask_raveled(params):
    """Element i of the flat mask is the mask of the leaf that element i of the raveled
    params came from; both kinds of leaf exist."""
    expected = jax.flatten_util.ravel_pytree(jax.tree.map(
        lambda x, m: jnp.full(x.shape, float(m)), params, kernel_mask(params)))[0]
    mask = flat_mask(params)
    assert mask.dtype == bool and mask.shape == expected.shape
    np.testing.assert_array_equal(mask, np.asarray(expected) == 1.0)
    assert mask.any() and not mask.all()


def test_the_update_grows_by_a_few_instructions_a_leaf():
    """The optimiser's lowered update for 10 and for 40 leaves: each leaf more adds its
    ravel, unravel and norm terms (~10 instructions), not a leaf-by-leaf Adam (optax's chain:
    ~30 a leaf here, ~50 under the population's vmap, where the default network's 45 leaves
    made 2,355 of the update's instructions)."""
    cfg = AgentConfig()
    hp = HParams.from_config(cfg)

    def flat_tx(c: AgentConfig, h: HParams) -> optax.GradientTransformation:
        return clipped_adamw(c.max_grad_norm, h.learning_rate, h.weight_decay)

    def per_leaf(tx_of) -> float:
        counts = []
        for n_leaves in (10, 40):
            params = {f"l{i}": {"kernel": jnp.ones((3, 2)), "bias": jnp.ones(2)}
                      for i in range(n_leaves // 2)}
            tx = tx_of(cfg, hp)
            lowered = jax.jit(lambda p, s, tx=tx: tx.update(p, s, p)).lower(params,
                                                                         tx.init(params))
            counts.append(lowered.as_text(dialect="hlo").count(" = "))
        return (counts[1] - counts[0]) / 30

    flat, chain = per_leaf(flat_tx), per_leaf(optax_chain)
    assert flat < 20 < chain, (flat, chain)


def test_params_of_two_dtypes_are_refused():
    """Raveled, params of two dtypes would be promoted to one (Adam's moments too), which
    optax's chain does not do: refused, not silently promoted."""
    tx = clipped_adamw(1.0, np.float32(1e-3), np.float32(0.0))
    with pytest.raises(ValueError, match="must share one dtype"):
        tx.init({"kernel": jnp.ones(2, jnp.float32), "bias": jnp.ones(2, jnp.bfloat16)})


def test_leaf_by_leaf_layout_is_optax_chain(params):
    """Not raveled, the optimiser is optax's chain itself: the same state tree and, step for
    step, the same bits."""
    cfg = AgentConfig()
    hp = HParams.from_config(cfg).replace(weight_decay=np.float32(0.3))
    mine = clipped_adamw(cfg.max_grad_norm, hp.learning_rate, hp.weight_decay, raveled=False)
    ref = optax_chain(cfg, hp)
    g = jax.tree.map(lambda x: 1e2 * jnp.sin(3.0 * x), params)
    got, want = (jax.jit(tx.update)(g, tx.init(params), params) for tx in (mine, ref))
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_learner_ravels_on_the_cpu_alone(params, monkeypatch):
    """`learner.make_optimizer` ravels on a CPU (one moment vector [N]) and keeps optax's
    chain elsewhere (a moment tree shaped like the params)."""
    from rl_trader.agent import learner

    cfg = AgentConfig()
    hp = HParams.from_config(cfg)
    n = jax.flatten_util.ravel_pytree(params)[0].size
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    state = learner.make_optimizer(cfg, hp).init(params)
    assert state.mu.shape == (n,)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    adam = learner.make_optimizer(cfg, hp).init(params)[1][0]
    assert jax.tree.structure(adam.mu) == jax.tree.structure(params)
