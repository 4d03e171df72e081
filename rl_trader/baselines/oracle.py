"""The planted-signal oracle of a synthetic market, through the same env and costs."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rl_trader.config import RunConfig
from rl_trader.data.fold_data import FoldData
from rl_trader.evaluation.rollout import Decide, Rollout, jit_per_program, no_aux, rollout


def oracle_decide(position: jax.Array, data: FoldData, cfg: RunConfig) -> Decide:
    """Planted-signal oracle: the known target position[t] [T] (signed fraction of equity,
    `SyntheticMarket.oracle_position`) at the close of bar t."""
    aux = no_aux(data, cfg)
    return lambda key, state, port: (position[state.t].astype(jnp.float32), aux)


@jit_per_program(3, 4)
def oracle_rollout(position: jax.Array, data: FoldData, start: jax.Array, length: int,
                   cfg: RunConfig) -> Rollout:
    """The oracle's rollout over [start, start + length), same fills and costs as the agent."""
    return rollout(oracle_decide(position, data, cfg), data, start, length, cfg,
                   jax.random.PRNGKey(0))
