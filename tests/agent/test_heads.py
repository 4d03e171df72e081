"""The Q-heads behind one protocol (`learner.Head`): every configured head is built, and each
one's exploration, greedy choice and description agree with one another."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl_trader import env
from rl_trader.agent.heads import HEADS, make_head
from rl_trader.config import PRIORS, Q_HEADS, EnvConfig, NetConfig, RunConfig
from rl_trader.data.fold_data import BarContext
from tests.helpers import init_params, make_obs

S, N = 3, 16  # members of an ensemble, samples of an exploring batch
POSITION, SCALE, PRIOR = 0.5, 0.01, 0.7
HEADS_AND_PRIORS = [(h, p) for h in Q_HEADS for p in PRIORS]


def ctx_of(cfg: RunConfig, shape: tuple[int, ...] = ()) -> BarContext:
    """A bar's context of `shape`: the prior PRIOR under --prior vol_target, else 0."""
    prior = PRIOR if cfg.env.prior == "vol_target" else 0.0
    return BarContext(scale=jnp.full(shape, SCALE), drift=jnp.full(shape, 0.01),
                      trust=jnp.zeros(shape), prior=jnp.full(shape, prior),
                      prior_tm1=jnp.full(shape, prior))


def test_every_configured_head_has_a_builder():
    assert set(HEADS) == set(Q_HEADS)


def head_and_outputs(name: str, lead: tuple[int, ...], prior: str = "flat"):
    """The head `name` of a small config (with `prior`) and its network's outputs on random
    observations with leading axes `lead`, from S members' params."""
    cfg = RunConfig(net=NetConfig(hidden=4, trunk=8, context=4, q_head=name),
                    env=EnvConfig(prior=prior, view="excess"))
    head = make_head(cfg)
    members = [init_params(head.network, make_obs(0), seed=s) for s in range(S)]
    params = jax.tree.map(lambda *x: jnp.stack(x), *members)
    out = jax.jit(jax.vmap(head.network.apply, in_axes=(0, None)))(params, make_obs(3, lead))
    return cfg, head, out


@pytest.mark.parametrize(("name", "prior"), HEADS_AND_PRIORS)
def test_a_heads_greedy_choice_and_description_agree(name, prior):
    """One member's greedy target is the fraction `describe` says it chooses; an ensemble's
    target is a position the env can hold; every described vector has one value per label."""
    cfg, head, out = head_and_outputs(name, (), prior)
    ctx = ctx_of(cfg)
    described = jax.jit(head.describe)(out, jnp.float32(POSITION), ctx)
    assert described["fraction"].shape == (S,)
    for key, labels in head.labels.items():
        assert described[key].shape == (S, len(labels)), key
    greedy = jax.jit(head.greedy)
    for s in range(S):
        one = jax.tree.map(lambda x, s=s: x[s:s + 1], out)
        target, q = greedy(one, jnp.float32(POSITION), ctx)
        assert float(target) == float(described["fraction"][s])
        assert np.isfinite(float(q))
    target, _ = jax.jit(head.greedy)(out, jnp.float32(POSITION), ctx)
    assert -1.0 <= float(target) <= 1.0


@pytest.mark.parametrize(("name", "prior"), HEADS_AND_PRIORS)
def test_exploring_at_zero_epsilon_takes_the_described_choice(name, prior):
    """ε = 0: each env's action is what the head describes as its choice for that sample;
    ε = 1: the uniform random actions of the prefill, from the same key."""
    cfg, head, out = head_and_outputs(name, (N,), prior)
    member = jax.tree.map(lambda x: x[0], out)  # one member's outputs on N samples
    position, ctx = jnp.full((N,), POSITION), ctx_of(cfg, (N,))
    explore = jax.jit(head.explore)
    d, m = explore(jax.random.key(2), member, position, ctx, jnp.float32(0.0))
    taken = np.asarray(env.target_fraction(d, m, cfg.env, ctx.prior))
    describe = jax.jit(head.describe)
    for n in range(N):
        one = jax.tree.map(lambda x, n=n: x[n:n + 1], member)
        chosen = describe(one, jnp.float32(POSITION), ctx_of(cfg))["fraction"][0]
        assert taken[n] == float(chosen), n
    d, m = explore(jax.random.key(4), member, position, ctx, jnp.float32(1.0))
    assert set(np.unique(d)) <= {0, 1, 2} and len(np.unique(d)) > 1

