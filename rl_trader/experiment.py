"""The multi-fold experiment: layout → per-fold training with checkpoints → test once → summary.

Per fold: a fresh `Runner` from `Trainer.init`, E jitted epochs, a greedy validation rollout
after each, a checkpoint per epoch (orbax keeps the best by validation Sharpe and the latest);
then the best checkpoint is restored and scored **once** on the test block, beside buy-and-hold
on the same bars with the same costs.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from rl_trader import evaluate as ev
from rl_trader.checkpoint import FoldCheckpoints, export_safetensors, fingerprint
from rl_trader.config import RunConfig
from rl_trader.data import Bars, load
from rl_trader.env import PORTFOLIO_NAMES
from rl_trader.errors import InputError
from rl_trader.features import MarketFeatures, compute_features
from rl_trader.folds import Fold, format_folds, make_folds
from rl_trader.market import FoldData, make_fold_data
from rl_trader.metrics import geometric_mean_positive, sharpe
from rl_trader.tensorboard import ScalarWriter
from rl_trader.train import Trainer, make_train


@dataclass(frozen=True)
class Prepared:
    """Everything known before training: data, features, the fold layout, annualisation."""

    cfg: RunConfig
    bars: Bars
    features: MarketFeatures
    folds: list[Fold]
    periods_per_year: float


def prepare(cfg: RunConfig) -> Prepared:
    """Validate the config, load and check the data, compute features, lay out the folds."""
    cfg.validate()
    bars = load(cfg.data.path)
    feats = compute_features(bars.open, bars.high, bars.low, bars.close, bars.volume)
    first_bar = feats.first_valid + cfg.features.lookback
    folds = make_folds(len(bars), first_bar, cfg.folds, cfg.features.lookback, cfg.agent.n_step)
    ppy = cfg.data.periods_per_year or bars.periods_per_year()
    return Prepared(cfg=cfg, bars=bars, features=feats, folds=folds, periods_per_year=ppy)


def open_run_dir(run_dir: Path, overwrite: bool) -> None:
    """Create the run directory; never reuse a non-empty one silently."""
    if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        if not overwrite:
            raise InputError(f"run directory '{run_dir}' already exists and is not empty: "
                             "pass --overwrite to replace it or choose another --run-dir")
        if run_dir.is_dir():
            shutil.rmtree(run_dir)
        else:
            run_dir.unlink()
    run_dir.mkdir(parents=True, exist_ok=True)


def write_json(path: Path, obj: dict) -> None:
    """Write JSON atomically (temp file + rename): a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def _sharpe(returns: jax.Array | np.ndarray, ppy: float) -> float:
    return float(sharpe(np.asarray(returns, np.float64), ppy))


def run_fold(prep: Prepared, trainer: Trainer, fold: Fold, run_dir: Path, key: jax.Array,
             log: Callable[[str], None]) -> tuple[dict, np.ndarray, np.ndarray]:
    """Train one fold from fresh state; return its summary entry and test returns."""
    cfg, ppy = prep.cfg, prep.periods_per_year
    data: FoldData = make_fold_data(prep.bars.open, prep.bars.close, prep.features, fold,
                                    cfg.features.clip)
    val_len = fold.val[1] - fold.val[0]
    test_len = fold.test[1] - fold.test[0]
    k_init, k_eval = jax.random.split(key)
    t_start = time.time()
    runner = trainer.init(k_init, data)
    fp = fingerprint(runner.learner.params, cfg.net, len(cfg.env.magnitudes))
    fold_dir = run_dir / f"fold_{fold.index}"
    meta = {"config": cfg.to_dict(), "fold": fold.to_dict(), "data_sha256": prep.bars.sha256}
    ckpt = FoldCheckpoints(fold_dir / "checkpoints", fp, meta)
    tb = ScalarWriter(run_dir / "tensorboard" / f"fold_{fold.index}")
    history = []
    for epoch in range(cfg.train.epochs):
        runner, m = trainer.epoch(runner, data)
        val = trainer.evaluate(runner.learner.params, data, data.val[0], val_len, k_eval)
        val_sharpe = _sharpe(val.returns, ppy)
        ckpt.save(epoch, runner.learner, val_sharpe)
        metrics = {k: float(v) for k, v in vars(m).items()}
        history.append({"epoch": epoch, "val_sharpe": val_sharpe, **metrics})
        w = np.asarray(val.market_weights).mean(0)
        tb.scalars(epoch, {"loss": metrics["loss"], "td_abs": metrics["td_abs"],
                           "aux_loss": metrics["aux_loss"], "epsilon": metrics["epsilon"],
                           "val_sharpe": val_sharpe,
                           **{f"vsn/{n}": float(x)
                              for n, x in zip(prep.features.names, w, strict=True)}})
        log(f"fold {fold.index} epoch {epoch + 1}/{cfg.train.epochs}  loss {metrics['loss']:.4f}"
            f"  td {metrics['td_abs']:.3f}  aux {metrics['aux_loss']:.3f}"
            f"  ε {metrics['epsilon']:.3f}  val Sharpe {val_sharpe:+.3f}"
            f"  {time.time() - t_start:6.1f}s")
    tb.close()
    best_epoch = ckpt.best_epoch()
    learner = ckpt.restore(runner.learner)
    ckpt.close()
    export_safetensors(learner.params, fold_dir / "best_params.safetensors")

    test = trainer.evaluate(learner.params, data, data.test[0], test_len, k_eval)
    baselines = ev.baseline_rollouts(data, data.test[0], test_len, cfg, k_eval)
    bh = baselines["buy_and_hold"]
    best_val = next(h["val_sharpe"] for h in history if h["epoch"] == best_epoch)
    entry = {
        "fold": fold.index,
        "best_epoch": best_epoch,
        "val_sharpe": best_val,
        "test_sharpe": _sharpe(test.returns, ppy),
        "buy_and_hold_test_sharpe": _sharpe(bh.returns, ppy),
        "checkpoint_dir": str((fold_dir / "checkpoints").relative_to(run_dir)),
        "test_start": fold.test[0],
        "test_end": fold.test[1],
        "market_vsn_weights": dict(zip(prep.features.names,
                                       _floats(np.asarray(test.market_weights).mean(0)),
                                       strict=True)),
        "portfolio_vsn_weights": dict(zip(PORTFOLIO_NAMES,
                                          _floats(np.asarray(test.portfolio_weights).mean(0)),
                                          strict=True)),
        "test_exposure": float(np.abs(np.asarray(test.position)).mean()),
        "baseline_test_sharpes": {n: _sharpe(r.returns, ppy) for n, r in baselines.items()},
        "epochs": history,
        "fingerprint": fp,
        "seconds": time.time() - t_start,
    }
    return entry, np.asarray(test.returns, np.float64), np.asarray(bh.returns, np.float64)


def _floats(a: np.ndarray) -> list[float]:
    return [float(x) for x in a]


def run_experiment(prep: Prepared, run_dir: Path, overwrite: bool = False,
                   log: Callable[[str], None] = print) -> dict:
    """Train every fold, score each once on test, write `summary.json`; return the summary."""
    cfg = prep.cfg
    open_run_dir(run_dir, overwrite)
    write_json(run_dir / "config.json", cfg.to_dict())
    write_json(run_dir / "folds.json", {"folds": [f.to_dict() for f in prep.folds]})
    log(format_folds(prep.folds, prep.bars.dates))
    key = jax.random.PRNGKey(cfg.seed)
    # One trainer for all folds: the jitted programs compile once (fold data are arguments).
    trainer = make_train(cfg, prep.periods_per_year, prep.folds[0].val[1] - prep.folds[0].val[0])
    entries, test_returns, bh_returns = [], [], []
    for fold in prep.folds:
        entry, r, bh = run_fold(prep, trainer, fold, run_dir,
                                jax.random.fold_in(key, fold.index), log)
        entries.append(entry)
        test_returns.append(r)
        bh_returns.append(bh)
    ppy = prep.periods_per_year
    summary = {
        "folds": entries,
        "stitched_test_sharpe": _sharpe(np.concatenate(test_returns), ppy),
        "stitched_buy_and_hold_test_sharpe": _sharpe(np.concatenate(bh_returns), ppy),
        "geo_mean_test_sharpe": geometric_mean_positive([e["test_sharpe"] for e in entries]),
        "fingerprint": entries[0]["fingerprint"],
        "config": cfg.to_dict(),
        "data_sha256": prep.bars.sha256,
        "data_source": prep.bars.source,
        "n_bars": len(prep.bars),
        "periods_per_year": ppy,
        "feature_names": list(prep.features.names),
        "device": describe_device(),
    }
    write_json(run_dir / "summary.json", summary)
    return summary


def describe_device() -> str:
    """e.g. 'gpu: NVIDIA H200 (1 device)' or 'cpu: cpu (1 device)'."""
    devs = jax.devices()
    return f"{devs[0].platform}: {devs[0].device_kind} ({len(devs)} device{'s' * (len(devs) > 1)})"
