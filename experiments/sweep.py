"""Hyper-parameter sweep on VALIDATION only: folds × settings × seeds in one vmapped program.

    python -m experiments.sweep --data synthetic:ar1 --grid gamma=0.99,0.9 \
        --grid obs_noise=0,0.5 --seeds 2 [--preset default] [--epochs E] [--out sweep.json]

Prints, per setting, the validation Sharpe of every fold at the main job's selection (best over
epochs and seeds) and their mean, and writes them as JSON (with every member's validation Sharpe
per epoch; its per-bar validation returns [member, epoch, bar] go to the `.npz` beside it, for
split-half checks of the selection). Test blocks are never evaluated here:
choose on validation, then run the main job once with the chosen values.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jax
import numpy as np

from experiments.multi_fold import build_parser, config_from_args, enable_compilation_cache
from rl_trader.errors import InputError


def parse_grid(items: list[str]) -> dict[str, list[float]]:
    axes = {}
    for item in items:
        name, _, values = item.partition("=")
        try:
            axes[name.strip()] = [float(v) for v in values.split(",") if v.strip()]
        except ValueError:
            raise InputError(f"option --grid {item!r}: expected NAME=V1,V2,...") from None
        if not axes[name.strip()]:
            raise InputError(f"option --grid {item!r}: no values")
    return axes


def oracle_val_returns(cfg, prep, folds, val_len: int) -> list[np.ndarray] | None:
    """The planted-signal oracle's per-bar validation returns per fold (synthetic data only)."""
    from rl_trader.data import SYNTHETIC_PREFIX
    from rl_trader.data.synthetic import from_spec
    from rl_trader.evaluate import oracle_rollout

    if not (cfg.data.path or "").startswith(SYNTHETIC_PREFIX):
        return None
    signal = jax.numpy.asarray(from_spec(cfg.data.path).signal, jax.numpy.float32)
    return [np.asarray(oracle_rollout(signal, d, d.val[0], val_len, cfg).returns, np.float64)
            for d in folds]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.prog = "python -m experiments.sweep"
    parser.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2",
                        help="hyper-parameter values to sweep (repeatable)")
    parser.add_argument("--out", default=None, help="JSON output path")
    args = parser.parse_args(argv)
    try:
        enable_compilation_cache()
        cfg = config_from_args(args)
        axes = parse_grid(args.grid)
        from rl_trader.devices import describe_device
        from rl_trader.experiment import prepare
        from rl_trader.market import make_fold_data
        from rl_trader.population import grid, members_of, population_inputs
        from rl_trader.train import make_train

        prep = prepare(cfg)
        settings = grid(cfg, axes)
        seeds = list(range(cfg.train.seeds))
        members = members_of(len(prep.folds), len(settings), seeds)
        folds = [make_fold_data(prep.bars.open, prep.bars.close, prep.features, f,
                                cfg.features.clip) for f in prep.folds]
        val_len = prep.folds[0].val[1] - prep.folds[0].val[0]
        trainer = make_train(cfg, prep.periods_per_year, val_len)
        keys, data, hps = population_inputs(members, folds, settings, cfg.seed)
        print(f"sweep: {len(members)} members ({len(prep.folds)} folds × {len(settings)} "
              f"settings × {len(seeds)} seeds) on {describe_device()}", flush=True)
        t0 = time.time()
        result = jax.jit(jax.vmap(trainer.train))(keys, data, hps)
        val = np.asarray(result.val_sharpe)  # [P, E]
        val_returns = np.asarray(result.val_returns)  # [P, E, V]
        seconds = time.time() - t0
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    best = val.max(axis=1)  # best epoch of each member
    table = np.full((len(settings), len(prep.folds)), -np.inf)
    for m, b in zip(members, best, strict=True):  # best over (epoch, seed): the job's selection
        table[m.setting, m.fold] = max(table[m.setting, m.fold], b)
    rows = [{"setting": s, "val_sharpe_by_fold": [float(x) for x in table[i]],
             "mean_val_sharpe": float(table[i].mean())} for i, s in enumerate(settings)]
    for row in sorted(rows, key=lambda r: -r["mean_val_sharpe"]):
        swept = {k: row["setting"][k] for k in axes}
        folds_txt = " ".join(f"{x:+.2f}" for x in row["val_sharpe_by_fold"])
        print(f"{row['mean_val_sharpe']:+.3f}  [{folds_txt}]  {swept}")
    print(f"{len(members)} members × {cfg.train.epochs} epochs in {seconds:.1f}s "
          "(compile included)")
    from rl_trader.metrics import sharpe

    oracle_returns = oracle_val_returns(cfg, prep, folds, val_len)
    oracle = (None if oracle_returns is None else
              [float(sharpe(r, prep.periods_per_year)) for r in oracle_returns])
    if oracle is not None:
        print("oracle val Sharpe by fold: " + " ".join(f"{x:+.2f}" for x in oracle))
    if args.out:
        per_member = [{"fold": m.fold, "setting": m.setting, "seed": m.seed,
                       "val_sharpe_by_epoch": [float(x) for x in v]}
                      for m, v in zip(members, val, strict=True)]
        with open(args.out, "w") as fh:
            json.dump({"axes": axes, "rows": rows, "seconds": seconds, "oracle": oracle,
                       "members": per_member, "config": cfg.to_dict()}, fh, indent=2)
        np.savez_compressed(Path(args.out).with_suffix(".npz"), val_returns=val_returns,
                            fold=[m.fold for m in members], setting=[m.setting for m in members],
                            seed=[m.seed for m in members],
                            **({} if oracle_returns is None else
                               {"oracle_val_returns": np.stack(oracle_returns)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
