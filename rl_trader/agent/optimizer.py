"""The learner's optimiser: global-norm clip → Adam with decoupled weight decay.

    g ← g · min(1, c/‖g‖)          (‖g‖ the global norm of the gradient tree, c = max_grad_norm)
    u ← adam(g) + λ·m⊙θ            (m = 1 on the kernels only, `kernel_mask`)
    θ ← θ − η·u

On a CPU (`raveled_by_default`) it runs the same arithmetic, element for element, as
`optax.chain(optax.clip_by_global_norm(c), optax.adamw(η, weight_decay=λ, mask=kernel_mask))`
(optax's own clip rule and its own `scale_by_adam` and `scale_by_learning_rate`), but on the
params and gradients raveled into one vector: a few array operations for the whole tree
instead of ~50 for each of its leaves, which XLA would otherwise fuse leaf by leaf. The
default run's 45 leaves made the optimiser 2,355 of the update's HLO instructions and 2.3 s of
its compile on the CPU (docs/benchmarks.md). The global norm is still summed leaf by leaf, as
optax sums it, so clipping scales by the same number. (Being another XLA program, it may still
round a few elements otherwise: the test compares the two to 1e-5.) On an accelerator it is
that optax chain itself. η and λ are traced (`HParams`), so a population shares one optimiser
structure."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree


def kernel_mask(params: chex.ArrayTree) -> chex.ArrayTree:
    """True at the weight matrices (leaves named `kernel` or `*_kernel`), False at biases,
    LayerNorm scales and offsets and the VSNs' `knots` (each variable's curve: values at
    points, a table like an embedding's, not a matrix on activations): the leaves the weight
    decay shrinks."""
    return jax.tree_util.tree_map_with_path(
        lambda path, _: str(getattr(path[-1], "key", path[-1])).endswith("kernel"), params)


def flat_mask(params: chex.ArrayTree) -> np.ndarray:
    """`kernel_mask` raveled as `ravel_pytree(params)` ravels the params: bool [N] (a host
    constant: it depends on the tree's structure and shapes only)."""
    return np.concatenate([np.full(np.size(x), m, bool) for x, m in zip(
        jax.tree.leaves(params), jax.tree.leaves(kernel_mask(params)), strict=True)])


def raveled_by_default() -> bool:
    """Whether `clipped_adamw` ravels on this process's backend: on a CPU, not on an
    accelerator. On one H100 the raveled optimiser compiled the default epoch no faster
    (16.7 s against 16.8 s) and made the population slower: TF32 at P 1024 79.5k against
    81.7k agent-updates/s, XLA's count of bytes an update moves 51.9 against 40.7 MB
    (ravelling the gradients and params and slicing the update back are passes of their
    own there; 2026-12-07, docs/benchmarks.md)."""
    return jax.default_backend() == "cpu"


def clipped_adamw(max_grad_norm: float, learning_rate: jax.Array, weight_decay: jax.Array,
                  raveled: bool = True) -> optax.GradientTransformation:
    """The module's optimiser. Raveled, its state is Adam's (`optax.ScaleByAdamState`) over the
    raveled params [N] and updates come back as a tree shaped like the params; otherwise it is
    optax's own chain, leaf by leaf (state: the chain's, a tree per moment). The two states
    differ, so a run's resume state is for the layout it was saved with
    (`run_state.check_resumable` refuses the other)."""
    if not raveled:
        return optax.chain(optax.clip_by_global_norm(max_grad_norm),
                           optax.adamw(learning_rate, weight_decay=weight_decay,
                                       mask=kernel_mask))
    adam = optax.scale_by_adam()
    step = optax.scale_by_learning_rate(learning_rate)

    def init(params: chex.ArrayTree) -> optax.ScaleByAdamState:
        dtypes = sorted({str(jnp.result_type(x)) for x in jax.tree.leaves(params)})
        if len(dtypes) > 1:  # raveled, they would share one promoted dtype, unlike optax's
            raise ValueError(f"clipped_adamw: the params must share one dtype, got {dtypes}")
        return adam.init(ravel_pytree(params)[0])

    def update(grads: chex.ArrayTree, state: optax.ScaleByAdamState,
               params: chex.ArrayTree) -> tuple[chex.ArrayTree, optax.ScaleByAdamState]:
        g_norm = optax.tree.norm(grads)
        g, unravel = ravel_pytree(grads)
        g = jax.lax.select(g_norm < max_grad_norm, g, (g / g_norm.astype(g.dtype))
                           * max_grad_norm)
        u, state = adam.update(g, state)
        theta = ravel_pytree(params)[0]
        u = jnp.where(flat_mask(params), u + weight_decay * theta, u)
        u, _ = step.update(u, step.init(u))
        return unravel(u), state

    return optax.GradientTransformation(init, update)
