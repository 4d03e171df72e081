"""Every baseline of a run over one segment, in one program (`baseline_rollouts`)."""

from __future__ import annotations

import jax

from rl_trader.baselines.ridge import Forecast, fit_ridge, forecast_decide, ridge_decide
from rl_trader.baselines.rules import (
    constant_decide,
    momentum_decide,
    random_decide,
    vol_target_decide,
)
from rl_trader.config import RunConfig
from rl_trader.data.fold_data import FoldData
from rl_trader.evaluation.rollout import Rollout, jit_per_program, rollout

# fit on a fold's train (and validation) bars
FITTED_BASELINES = ("ridge", "gbm", "vol_target")
BASELINES = ("buy_and_hold", "flat", "momentum_20", "ridge", "gbm", "vol_target", "random")
SUPERVISED_BASELINES = ("ridge", "gbm")  # forecasters of the next bar on the same features
N_RANDOM_SEEDS = 16  # the random policy: its mean and spread over this many seeds


@jit_per_program(2, 3, 5)
def baseline_rollouts(data: FoldData, start: jax.Array, length: int, cfg: RunConfig,
                      random_keys: jax.Array, val_steps: int | None,
                      gbm: Forecast | None = None) -> dict[str, Rollout]:
    """Buy-and-hold, flat, 20-bar momentum, ridge (fit on train, α on validation, see
    `fit_ridge` for `val_steps`), the gbm baseline's forecast `gbm` (`gbm.fit_gbm`), vol
    target, and the random policy once per key (leaves of `random` get a leading [R] axis),
    over the same segment with the same costs. With `val_steps` None (no train or validation
    block: a backtest on new bars) the baselines fit to the training data,
    `FITTED_BASELINES`, are left out; gbm also when `gbm` is None."""
    fixed = {"buy_and_hold": constant_decide(1.0, data, cfg),
             "flat": constant_decide(0.0, data, cfg),
             "momentum_20": momentum_decide(20, data, cfg)}
    if val_steps is not None:
        fixed["ridge"] = ridge_decide(fit_ridge(data, val_steps, cfg), data, cfg)
        if gbm is not None:
            fixed["gbm"] = forecast_decide(gbm, data, cfg)
        fixed["vol_target"] = vol_target_decide(data, cfg)
    out = {name: rollout(d, data, start, length, cfg, random_keys[0]) for name, d in fixed.items()}
    out["random"] = jax.vmap(lambda k: rollout(random_decide(data, cfg), data, start, length,
                                               cfg, k))(random_keys)
    return out

