"""The model head's forecast alone: can the network predict the next return as the trees do?

    python -m experiments.forecast_probe --data synthetic:cubic:5000:1 [--noise 0,0.5,1.5]
        [--updates 5000] [--out forecast_probe.json] [main-job options]

No RL: per fold, the model network's forecasts μ̂ and m̂₂ (`model_head.ModelQNetwork`) are fit
by the model head's regression losses alone (`model_head.forecast_losses`, summed; Adam with the
run's learning rate, weight decay and gradient clip, batches of the run's size drawn
uniformly from the training rows `fold_data.training_bars`, Gaussian noise of each --noise
level on the inputs), and the validation IC of μ̂ (its correlation with the next-bar target
y over the validation block's decision bars) is recorded five times along the way; ridge's
and gbm's (`ridge.fit_ridge`, `gbm.fit_gbm`: their own fits and choices) beside it. So is
m̂₂'s (its correlation with y², the "second IC"), beside that of the squared trailing
volatility σ̂²_t (`rules.trailing_vol`, what `vol_target` sizes by). The network sees the
run's market variables: under the default `--tree-forecast validation` the trees' column
too, where a fold uses it (pass `--tree-forecast off` for the network's own forecast). A
probe of the forecaster lever (input noise) at a fraction of a run's cost;
it scores no policy, and ridge's and gbm's settings are chosen on that same validation block
(their IC there is an upper estimate). Tuning draws only (data seeds < 1000). Writes --out
(JSON).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys

from rl_trader.cli.train import build_parser, config_from_args
from rl_trader.errors import InputError

PROG = "python -m experiments.forecast_probe"
CHECKPOINTS = 5  # validation ICs recorded per fit


def probe_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = build_parser(prog)
    p.description = "The model head's forecast fit alone, against ridge and gbm (no RL)."
    p.add_argument("--noise", default="0,0.5,1.5", metavar="X,X",
                   help="input-noise levels to fit at (std of the normalised features)")
    p.add_argument("--updates", type=int, default=5000, metavar="N",
                   help="gradient updates per fit (default 5000, a default run's count)")
    p.add_argument("--out", default="forecast_probe.json", metavar="FILE")
    return p


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    args = probe_parser(prog).parse_args(argv)
    try:
        noises = [float(x) for x in args.noise.split(",")]
        if not noises or any(not 0 <= x <= 10 for x in noises):
            raise ValueError
    except ValueError:
        print(f"error: option --noise={args.noise!r}: expected levels in [0, 10]",
              file=sys.stderr)
        return 2
    if not CHECKPOINTS <= args.updates <= 10**7:
        print(f"error: option --updates={args.updates}: must be in [{CHECKPOINTS}, 1e7]",
              file=sys.stderr)
        return 2
    try:
        cfg = config_from_args(args, platform="")  # trains no population: seeds do not apply
        from rl_trader.data.synthetic import parse_spec

        if (cfg.data.path or "").startswith("synthetic:") and parse_spec(cfg.data.path)[2] >= 1000:
            raise InputError(f"option --data={cfg.data.path!r}: data seeds >= 1000 belong to "
                             "the release gate; probe on tuning draws")
        cfg = dataclasses.replace(cfg, net=dataclasses.replace(cfg.net, q_head="model"))
        result = run(cfg, noises, args.updates)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    for fold in result["folds"]:
        fits = "  ".join(f"noise {n}: " + " ".join(f"{v:+.3f}" for v in ics)
                         for n, ics in fold["network_ic"].items())
        second = "  ".join(f"noise {n}: " + " ".join(f"{v:+.3f}" for v in ics)
                           for n, ics in fold["network_second_ic"].items())
        print(f"fold {fold['fold']}: ridge {fold['ridge_ic']:+.3f} gbm {fold['gbm_ic']:+.3f} | "
              f"{fits}\n        second moment: trailing vol² {fold['vol_second_ic']:+.3f} | "
              f"{second}")
    return 0


def network_ics(net, data, cfg, noises: list[float], updates: int,
                val_bars) -> dict[str, tuple[list[float], list[float]]]:
    """Fit the forecasts alone on `data`'s training rows at each input noise level in `noises`
    (each fit from the same start); μ̂'s and m̂₂'s validation ICs (against y and y²) after each
    fifth of `updates` (module docstring), by level (`str(noise)`). One program serves every
    level: the noise is its argument."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from rl_trader.agent.learner import HParams, make_optimizer
    from rl_trader.agent.model_head import forecast_losses
    from rl_trader.data.fold_data import observe, training_bars
    from rl_trader.env import PORTFOLIO_NAMES
    from rl_trader.run.run_state import forecast_ic

    port = jnp.zeros(len(PORTFOLIO_NAMES))  # a flat, fresh portfolio
    obs_of = jax.vmap(lambda t: observe(data, t, port, cfg.features))
    rows = jnp.asarray(np.flatnonzero(np.asarray(training_bars(data))))
    val_obs, y_val = obs_of(val_bars), np.asarray(data.aux_target)[np.asarray(val_bars)]
    tx = make_optimizer(cfg.agent, HParams.from_config(cfg.agent))
    params = net.init(jax.random.PRNGKey(cfg.seed), jax.tree.map(lambda x: x[0], val_obs))

    def loss(p, obs, y_b):
        return sum(forecast_losses(net.apply(p, obs), y_b))

    def one(noise, carry, key):
        params, opt = carry
        k_row, k_m, k_w = jax.random.split(key, 3)
        t = rows[jax.random.randint(k_row, (cfg.agent.batch_size,), 0, rows.shape[0])]
        obs = obs_of(t)
        obs = obs.replace(market=obs.market + noise * jax.random.normal(k_m, obs.market.shape),
                          window=obs.window + noise * jax.random.normal(k_w, obs.window.shape))
        upd, opt = tx.update(jax.grad(loss)(params, obs, data.aux_target[t]), opt, params)
        return (jax.tree.map(jnp.add, params, upd), opt), None

    fit = jax.jit(lambda c, key, noise: jax.lax.scan(
        functools.partial(one, noise), c, jax.random.split(key, updates // CHECKPOINTS))[0])
    out = {}
    for noise in noises:
        carry, key = (params, tx.init(params)), jax.random.PRNGKey(cfg.seed + 1)
        ics, second = [], []
        for _ in range(CHECKPOINTS):
            key, sub = jax.random.split(key)
            carry = fit(carry, sub, jnp.float32(noise))
            pred = net.apply(carry[0], val_obs)
            ics.append(forecast_ic(np.asarray(pred.aux), y_val))
            second.append(forecast_ic(np.asarray(pred.second_moment), y_val**2))
        out[str(noise)] = ics, second
    return out


def run(cfg, noises: list[float], updates: int) -> dict:
    """The probe's figures (module docstring)."""
    import jax.numpy as jnp
    import numpy as np

    from rl_trader.agent.heads import make_head
    from rl_trader.baselines.gbm import fit_gbm
    from rl_trader.baselines.ridge import fit_ridge
    from rl_trader.baselines.rules import trailing_vol
    from rl_trader.run.prepare import prepare
    from rl_trader.run.run_state import forecast_ic

    prep = prepare(cfg)
    net = make_head(cfg).network
    folds = []
    for k in range(len(prep.folds)):
        data = prep.fold_data(k)
        bars = jnp.arange(int(data.val[0]) - 1, int(data.val[0]) - 1 + prep.val_len)
        at = np.asarray(bars)
        y_val = np.asarray(data.aux_target)[at]
        ridge = fit_ridge(data, prep.val_steps, cfg)
        ridge_hat = np.asarray(data.features)[at] @ np.asarray(ridge.beta)
        gbm_hat = np.asarray(fit_gbm(data, prep.val_steps, cfg).forecast.y_hat)[at]
        vol = np.asarray(trailing_vol(data.prices.close))[at]
        fits = network_ics(net, data, cfg, noises, updates, bars)
        folds.append({"fold": k, "ridge_ic": forecast_ic(ridge_hat, y_val),
                      "gbm_ic": forecast_ic(gbm_hat, y_val),
                      "vol_second_ic": forecast_ic(vol**2, y_val**2),
                      "network_ic": {n: f[0] for n, f in fits.items()},
                      "network_second_ic": {n: f[1] for n, f in fits.items()}})
    return {"data": cfg.data.path, "lookback": cfg.features.lookback, "updates": updates,
            "noise": noises, "folds": folds}


if __name__ == "__main__":
    sys.exit(main())
