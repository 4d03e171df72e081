"""An epoch's members rolled out on validation: the one path a run (`experiment.train_epoch`)
and the programs compiled ahead of it (`run.ahead`) both take, so that both compile the same
programs."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from rl_trader.data.buckets import trim
from rl_trader.evaluation.rollout import Rollout
from rl_trader.run.prepare import Prepared
from rl_trader.runtime.devices import replicated, to_host
from rl_trader.training.population import Cohort, ensembles
from rl_trader.training.train import EpochMetrics, Runner


@partial(jax.jit, static_argnums=(2, 3))
def after_epoch(runners: Runner, metrics: EpochMetrics, n_groups: int,
                size: int) -> tuple[object, jax.Array]:
    """What the host needs of an epoch's members, in one program: their params as ensembles
    [G, S, ...] (`population.ensembles`) and [P, 3] flags: loss, gradient norm and every
    parameter finite, per member (the validation returns are checked on the host as a fourth
    flag)."""
    params_ok = jax.vmap(lambda p: jnp.all(jnp.stack(
        [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(p)])))(runners.learner.params)
    finite = jnp.stack([jnp.isfinite(metrics.loss), jnp.isfinite(metrics.grad_norm),
                        params_ok], 1)
    return ensembles(runners.learner.params, n_groups, size), finite


def validate(prep: Prepared, c: Cohort, runners: Runner,
             metrics: EpochMetrics) -> tuple[object, Rollout, np.ndarray]:
    """The ensembles' params on every device (`acting`, leaves [G, S, ...]), their greedy
    validation rollouts on the host trimmed to the validation length (leaves [G, val_len,
    ...]) and the members' finite flags [P, 3] (`after_epoch`)."""
    grouped, finite = after_epoch(runners, metrics, len(c.groups), c.n_seeds)
    acting = jax.device_put(grouped, replicated(c.mesh))
    val = trim(jax.tree.map(to_host, c.pop.evaluate(acting, c.val_data, c.val_data.val[:, 0],
                                                    prep.val_steps, c.eval_keys)),
               prep.val_len, axis=1)
    return acting, val, to_host(finite)
