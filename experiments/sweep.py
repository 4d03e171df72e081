"""Hyper-parameter sweep on VALIDATION only: the main job with its test blocks left untouched.

    python -m experiments.sweep --data synthetic:ar1 --sweep gamma=0.99,0.9 \
        --sweep obs_noise=0,0.5 [--seeds 4] [--epochs E] [--run-dir DIR] [--out sweep.json]

Trains folds × settings × seeds as one population exactly as `rl_trader.cli.train` does
(the seeds of a setting act as one ensemble), but scores nothing on test. Prints, per setting,
the validation Sharpe of every fold at the main job's selection (the best epoch of that
setting's ensemble) and their mean, and writes them as JSON. The run directory keeps the
validation records (`summary.json`), every ensemble's per-bar validation returns
(`validation_returns.npz`, [epoch, ensemble, bar]), buy-and-hold's per fold
(`buy_hold_val_returns.npy`, [fold, bar]), ridge's (`ridge_val_returns.npy`, and its
forecast's information coefficient per fold, `ridge_val_ic.npy`) and, on synthetic markets,
the oracle's (`oracle_val_returns.npy`); `experiments.study` reads them.

The best validation Sharpe is biased upward by the choice of epoch. On the planted-signal
market the sweep therefore also prints a split-half figure per setting that is not: the epoch
is chosen on one half of the validation bars and scored on the other half, relative to the
oracle's Sharpe on that half (both directions averaged); ~1 means oracle-like out of sample.
Settings share their seeds' PRNG keys (common random numbers), so they are compared on the
same initial weights and random draws. Choose on validation, then run the main
job once with the chosen values. Synthetic data seeds >= 1000 are refused: they are the release
gate's fresh markets (`experiments.convergence`).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jax
import numpy as np

from rl_trader.cli.train import build_parser, config_from_args
from rl_trader.errors import InputError
from rl_trader.runtime.compile_cache import enable_compilation_cache

PROG = "python -m experiments.sweep"  # in help and errors


def position_val_returns(position: np.ndarray, cfg, prep) -> list[np.ndarray]:
    """Per-bar validation returns per fold of a fixed target `position` [bars] (same fills and
    costs as the agent)."""
    from rl_trader.baselines.oracle import oracle_rollout
    from rl_trader.data.fold_data import pad_bars

    position = pad_bars(np.asarray(position, np.float32))
    folds = [prep.fold_data(k) for k in range(len(prep.folds))]
    return [np.asarray(oracle_rollout(position, d, d.val[0], prep.val_steps, cfg).returns,
                       np.float64)[:prep.val_len] for d in folds]


def ridge_val(cfg, prep) -> tuple[list[np.ndarray], list[float]]:
    """The ridge baseline on each fold's validation block (fit on train, its penalty chosen on
    the same validation block, as in every run's scoring): per-bar returns and the
    information coefficient of its forecast (`run_state.forecast_ic`), beside the agent's."""
    from rl_trader.baselines.ridge import fit_ridge, ridge_decide
    from rl_trader.evaluation.rollout import decision_targets, rollout
    from rl_trader.run.run_state import forecast_ic

    returns, ics = [], []
    for k in range(len(prep.folds)):
        d = prep.fold_data(k)
        r = rollout(ridge_decide(fit_ridge(d, prep.val_steps, cfg), d, cfg), d, d.val[0],
                    prep.val_steps, cfg, jax.random.PRNGKey(0))
        returns.append(np.asarray(r.returns, np.float64)[:prep.val_len])
        ics.append(forecast_ic(np.asarray(r.forecast)[:prep.val_len],
                               decision_targets(d.aux_target, int(d.val[0]), prep.val_len)))
    return returns, ics


def oracle_val_returns(cfg, prep) -> list[np.ndarray] | None:
    """The planted-signal oracle's per-bar validation returns per fold (synthetic data only)."""
    if prep.oracle_position is None:
        return None
    return position_val_returns(prep.oracle_position, cfg, prep)


def split_half_picks(returns: np.ndarray, ppy: float) -> list[tuple[int, slice]]:
    """For halves (A, B) and (B, A) of the bars of `returns` [epoch, bar]: the epoch with the
    best Sharpe on the first half of the pair, and the other half, where it is scored."""
    from rl_trader.evaluation.metrics import sharpe

    half = returns.shape[1] // 2
    halves = (slice(0, half), slice(half, None))
    return [(int(np.argmax([sharpe(r[pick], ppy) for r in returns])), score)
            for pick, score in (halves, halves[::-1])]


def refuse_gate_data(path: str | None) -> None:
    """The fresh-seed rule: synthetic data seeds ≥ GATE_SEED_BASE belong to the release gate
    (`experiments.convergence`) and are never tuned on."""
    from experiments.convergence import GATE_SEED_BASE
    from rl_trader.data import SYNTHETIC_PREFIX, data_specs
    from rl_trader.data.synthetic import parse_spec

    for item in data_specs(path):  # every pooled instrument too
        if (item or "").startswith(SYNTHETIC_PREFIX) and parse_spec(item)[2] >= GATE_SEED_BASE:
            raise InputError(f"option --data={path!r}: data seeds >= {GATE_SEED_BASE} are the "
                             f"convergence gate's; tune on seeds < {GATE_SEED_BASE}")


def split_half_ratio(returns: np.ndarray, oracle: np.ndarray, ppy: float) -> float:
    """Agent / oracle Sharpe with the epoch chosen out of sample, `returns` [epoch, bar] of one
    ensemble, `oracle` [bar]: for halves (A, B) and (B, A) of the bars, e* = argmax_e
    Sharpe(returns[e, A]) and the ratio is Sharpe(returns[e*, B]) / Sharpe(oracle[B]); the
    mean of the two directions."""
    from rl_trader.evaluation.metrics import sharpe

    return float(np.mean([float(sharpe(returns[best, score], ppy) / sharpe(oracle[score], ppy))
                          for best, score in split_half_picks(returns, ppy)]))


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    parser = build_parser(prog)
    parser.add_argument("--grid", dest="sweep", action="append", metavar="NAME=V1,V2",
                        help="the same as --sweep")
    parser.add_argument("--out", default=None, help="JSON output path")
    args = parser.parse_args(argv)
    try:
        enable_compilation_cache()
        cfg = config_from_args(args)
        refuse_gate_data(cfg.data.path)
        from rl_trader.evaluation.metrics import sharpe
        from rl_trader.run.experiment import run_experiment
        from rl_trader.run.prepare import prepare
        from rl_trader.runtime.devices import describe_device

        prep = prepare(cfg)
        run_dir = Path(args.run_dir or f"runs/{time.strftime('%Y%m%d-%H%M%S')}-sweep")
        print(f"sweep on validation only, {describe_device()}", flush=True)
        t0 = time.time()
        summary = run_experiment(prep, run_dir, overwrite=args.overwrite,
                                 log=lambda line: print(line, flush=True),
                                 devices=args.devices, validation_only=True)
        seconds = time.time() - t0
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    settings = summary.settings
    table = np.array([f.best_val_sharpe_by_setting for f in summary.folds],
                     dtype=float).T  # [setting, fold]
    swept = [name for name, _ in cfg.sweep]
    rows = [{"setting": s, "val_sharpe_by_fold": [float(x) for x in table[i]],
             "mean_val_sharpe": float(np.mean(table[i]))} for i, s in enumerate(settings)]
    for row in sorted(rows, key=lambda r: -r["mean_val_sharpe"]):
        folds_txt = " ".join(f"{x:+.2f}" for x in row["val_sharpe_by_fold"])
        print(f"{row['mean_val_sharpe']:+.3f}  [{folds_txt}]  "
              f"{ {k: row['setting'][k] for k in swept} }")
    print(f"{len(settings)} settings × {cfg.train.seeds} seeds × {len(prep.folds)} folds, "
          f"{cfg.train.epochs} epochs in {seconds:.1f}s (compile included); run dir {run_dir}")
    oracle_returns = oracle_val_returns(cfg, prep)
    oracle = (None if oracle_returns is None else
              [float(sharpe(r, prep.periods_per_year)) for r in oracle_returns])
    np.save(run_dir / "buy_hold_val_returns.npy",  # the baseline every market has
            np.stack(position_val_returns(np.ones(len(prep.bars.close)), cfg, prep)))
    ridge_returns, ridge_ics = ridge_val(cfg, prep)
    np.save(run_dir / "ridge_val_returns.npy", np.stack(ridge_returns))
    np.save(run_dir / "ridge_val_ic.npy", np.asarray(ridge_ics))
    print("ridge val Sharpe by fold: " + " ".join(
        f"{float(sharpe(r, prep.periods_per_year)):+.2f}" for r in ridge_returns)
        + "; forecast IC " + " ".join(f"{x:+.3f}" for x in ridge_ics))
    if oracle is not None:
        print("oracle val Sharpe by fold: " + " ".join(f"{x:+.2f}" for x in oracle))
        np.save(run_dir / "oracle_val_returns.npy", np.stack(oracle_returns))
        val = np.load(run_dir / "validation_returns.npz")
        print("split-half agent / oracle (epoch chosen on the other half), by fold:")
        for row_i, row in enumerate(rows):
            row["split_half_by_fold"] = [
                split_half_ratio(val["val_returns"][:, g], oracle_returns[f],
                                 prep.periods_per_year)
                for g, (f, s) in enumerate(zip(val["fold"], val["setting"], strict=True))
                if s == row_i]
        for row in sorted(rows, key=lambda r: -np.mean(r["split_half_by_fold"])):
            ratios = row["split_half_by_fold"]
            print(f"{np.mean(ratios):.3f} (min {min(ratios):.2f})  "
                  f"[{' '.join(f'{x:.2f}' for x in ratios)}]  "
                  f"{ {k: row['setting'][k] for k in swept} }")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"rows": rows, "seconds": seconds, "oracle": oracle,
                       "trials": summary.trials, "config": cfg.to_dict()}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
