"""The multi-fold experiment: layout → population training with checkpoints → test once.

The population is every (fold, hyper-parameter setting, seed); each member starts from its own
fresh state (`Trainer.init`) and all train together, one jitted, vmapped program per epoch.
After each epoch every member is rolled out greedily on its fold's validation block; per fold,
the member with the best validation Sharpe that epoch is checkpointed (orbax keeps the fold's
best epoch and the latest). At the end each fold's best checkpoint is restored and scored
**once** on its test block, beside the baselines on the same bars with the same costs.
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
from rl_trader.agent import policy_params
from rl_trader.checkpoint import FoldCheckpoints, export_safetensors, fingerprint
from rl_trader.config import RunConfig
from rl_trader.data import SYNTHETIC_PREFIX, Bars, load
from rl_trader.env import PORTFOLIO_NAMES
from rl_trader.errors import InputError
from rl_trader.features import MarketFeatures, compute_features
from rl_trader.folds import Fold, format_folds, make_folds
from rl_trader.market import make_fold_data
from rl_trader.metrics import performance, sharpe
from rl_trader.population import (
    Population,
    grid,
    members_of,
    population_inputs,
    stack,
    take,
)
from rl_trader.selection import headline
from rl_trader.tensorboard import ScalarWriter
from rl_trader.train import make_train

N_RANDOM_SEEDS = 16  # random-policy baseline: mean and spread over this many seeds


@dataclass(frozen=True)
class Prepared:
    """Everything known before training: data, features, the fold layout, annualisation."""

    cfg: RunConfig
    bars: Bars
    features: MarketFeatures
    folds: list[Fold]
    periods_per_year: float
    signal: np.ndarray | None  # planted signal of a synthetic market (for the oracle)


def prepare(cfg: RunConfig) -> Prepared:
    """Validate the config, load and check the data, compute features, lay out the folds."""
    cfg.validate()
    signal = None
    if (cfg.data.path or "").startswith(SYNTHETIC_PREFIX):
        from rl_trader.data.synthetic import from_spec

        market = from_spec(cfg.data.path)
        bars, signal = market.bars, market.signal
    else:
        bars = load(cfg.data.path)
    feats = compute_features(bars.open, bars.high, bars.low, bars.close, bars.volume)
    first_bar = feats.first_valid + cfg.features.lookback
    folds = make_folds(len(bars), first_bar, cfg.folds, cfg.features.lookback, cfg.agent.n_step)
    grid(cfg, {k: list(v) for k, v in cfg.sweep})  # refuses unknown sweep names early
    ppy = cfg.data.periods_per_year or bars.periods_per_year()
    return Prepared(cfg=cfg, bars=bars, features=feats, folds=folds, periods_per_year=ppy,
                    signal=signal)


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
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, path)


def _sharpe(returns, ppy: float) -> float:
    return float(sharpe(np.asarray(returns, np.float64), ppy))


def _perf(r: ev.Rollout, ppy: float) -> dict[str, float]:
    return performance(np.asarray(r.returns, np.float64), np.asarray(r.position, np.float64),
                       np.asarray(r.turnover, np.float64), ppy)


def describe_device() -> str:
    """e.g. 'gpu: NVIDIA H200 (1 device)' or 'cpu: cpu (1 device)'."""
    devs = jax.devices()
    return f"{devs[0].platform}: {devs[0].device_kind} ({len(devs)} device{'s' * (len(devs) > 1)})"


def run_experiment(prep: Prepared, run_dir: Path, overwrite: bool = False,
                   log: Callable[[str], None] = print) -> dict:
    """Train the population, score each fold once on test, write the outputs; return summary."""
    cfg, ppy, folds = prep.cfg, prep.periods_per_year, prep.folds
    open_run_dir(run_dir, overwrite)
    write_json(run_dir / "config.json", cfg.to_dict())
    write_json(run_dir / "folds.json", {"folds": [f.to_dict() for f in folds]})
    log(format_folds(folds, prep.bars.dates))
    t_start = time.time()
    settings = grid(cfg, {k: list(v) for k, v in cfg.sweep})
    members = members_of(len(folds), len(settings), list(range(cfg.train.seeds)))
    fold_data = [make_fold_data(prep.bars.open, prep.bars.close, prep.features, f,
                                cfg.features.clip) for f in folds]
    keys, data, hps = population_inputs(members, fold_data, settings, cfg.seed)
    val_len = folds[0].val[1] - folds[0].val[0]
    trainer = make_train(cfg, ppy, val_len)
    pop = Population(trainer)
    runners = pop.init(keys, data)
    fp = fingerprint(take(runners.learner.params, 0), cfg.net, len(cfg.env.magnitudes))
    ckpts = [FoldCheckpoints(run_dir / f"fold_{f.index}" / "checkpoints", fp,
                             {"config": cfg.to_dict(), "fold": f.to_dict(),
                              "data_sha256": prep.bars.sha256}) for f in folds]
    writers = [ScalarWriter(run_dir / "tensorboard" / f"fold_{f.index}") for f in folds]
    by_fold = [[i for i, m in enumerate(members) if m.fold == f.index] for f in folds]
    eval_keys = jax.random.split(jax.random.PRNGKey(cfg.seed), len(members))
    trials: list[dict] = []
    val_matrix: list[list[np.ndarray]] = [[] for _ in folds]
    history: list[list[dict]] = [[] for _ in folds]
    epoch_seconds = []
    for epoch in range(cfg.train.epochs):
        t_epoch = time.time()
        runners, metrics = pop.epoch(runners, data, hps)
        acting = policy_params(runners.learner, cfg.train.eval_params)
        val = pop.evaluate(acting, data, data.val[:, 0], val_len, eval_keys)
        val_ret = np.asarray(val.returns, np.float64)  # [P, V]
        val_sh = [_sharpe(r, ppy) for r in val_ret]
        weights = np.asarray(val.market_weights).mean(1)  # [P, F]
        metrics = {k: np.asarray(v) for k, v in vars(metrics).items()}  # each [P]
        epoch_seconds.append(time.time() - t_epoch)
        for k, idx in enumerate(by_fold):
            best = max(idx, key=lambda i: val_sh[i])
            m = members[best]
            ckpts[k].save(epoch, take(runners.learner, best), val_sh[best],
                          {"seed": m.seed, "setting": settings[m.setting]})
            trials += [{"fold": k, "epoch": epoch, "seed": members[i].seed,
                        "setting": members[i].setting, "val_sharpe": val_sh[i]} for i in idx]
            val_matrix[k].append(val_ret[idx])
            mean = {name: float(v[idx].mean()) for name, v in metrics.items()}
            history[k].append({"epoch": epoch, "val_sharpe": val_sh[best], "seed": m.seed,
                               "setting": m.setting, **mean})
            writers[k].scalars(epoch, {**mean, "val_sharpe": val_sh[best], **{
                f"vsn/{n}": float(x)
                for n, x in zip(prep.features.names, weights[best], strict=True)}})
            log(f"fold {k} epoch {epoch + 1}/{cfg.train.epochs}  loss {mean['loss']:.4f}"
                f"  td {mean['td_abs']:.3f}  aux {mean['aux_loss']:.3f}"
                f"  ε {mean['epsilon']:.3f}  val Sharpe {val_sh[best]:+.3f}"
                f"  {time.time() - t_start:6.1f}s")
    for w in writers:
        w.close()
    summary = _score(prep, run_dir, pop, runners, ckpts, fold_data, history, trials, val_matrix)
    summary["fingerprint"] = fp
    write_json(run_dir / "summary.json", summary)
    write_json(run_dir / "timings.json", {
        "seconds_total": time.time() - t_start, "seconds_per_epoch": epoch_seconds,
        "members": len(members), "device": describe_device()})
    from rl_trader.report import write_report

    write_report(run_dir)
    return summary


def _score(prep: Prepared, run_dir: Path, pop: Population, runners,
           ckpts: list[FoldCheckpoints], fold_data, history, trials, val_matrix) -> dict:
    """Restore each fold's best checkpoint, score it once on test beside the baselines."""
    cfg, ppy, folds = prep.cfg, prep.periods_per_year, prep.folds
    test_len = folds[0].test[1] - folds[0].test[0]
    template = take(runners.learner, 0)
    learners = [c.restore(template) for c in ckpts]
    best_meta = [c.metadata() for c in ckpts]
    for c, lrn, f in zip(ckpts, learners, folds, strict=True):
        export_safetensors(policy_params(lrn, cfg.train.eval_params),
                           run_dir / f"fold_{f.index}" / "best_params.safetensors")
        c.close()
    data = stack(fold_data)
    keys = jax.random.split(jax.random.PRNGKey(cfg.seed + 1), len(folds))
    params = stack([policy_params(lrn, cfg.train.eval_params) for lrn in learners])
    tests = pop.evaluate(params, data, data.test[:, 0], test_len, keys)
    random_keys = jax.random.split(jax.random.PRNGKey(cfg.seed + 2), N_RANDOM_SEEDS)
    entries, oracles, stitched = [], [], {name: [] for name in ("agent",) + ev.BASELINES}
    for k, f in enumerate(folds):
        agent = take(tests, k)
        base = ev.baseline_rollouts(fold_data[k], fold_data[k].test[0], test_len, cfg,
                                    random_keys)
        rand = base.pop("random")
        first_random = take(rand, 0)
        policies = {"agent": agent, **base, "random": first_random}
        metrics = {name: _perf(r, ppy) for name, r in policies.items() if name != "random"}
        per_seed = [_perf(take(rand, i), ppy) for i in range(N_RANDOM_SEEDS)]
        metrics["random"] = {key: float(np.mean([p[key] for p in per_seed]))
                             for key in per_seed[0]}
        rand_sharpes = [p["sharpe"] for p in per_seed]
        returns = {name: np.asarray(r.returns, np.float64) for name, r in policies.items()}
        for name, r in policies.items():
            stitched[name].append(r)
        rel = Path(f"fold_{f.index}") / "test_returns.npz"
        np.savez(run_dir / rel, bars=np.arange(*f.test), agent_position=np.asarray(
            agent.position, np.float64), dates=prep.bars.dates[f.test[0]:f.test[1]].astype(
            "datetime64[ns]").astype(np.int64), **returns)
        entry = {
            "fold": f.index,
            "best_epoch": ckpts[k].best_epoch(),
            "best_seed": best_meta[k]["seed"],
            "best_setting": best_meta[k]["setting"],
            "val_sharpe": best_meta[k]["val_sharpe"],
            "test_sharpe": metrics["agent"]["sharpe"],
            "buy_and_hold_test_sharpe": metrics["buy_and_hold"]["sharpe"],
            "checkpoint_dir": str(Path(f"fold_{f.index}") / "checkpoints"),
            "test_start": f.test[0],
            "test_end": f.test[1],
            "market_vsn_weights": _named(prep.features.names, agent.market_weights),
            "portfolio_vsn_weights": _named(PORTFOLIO_NAMES, agent.portfolio_weights),
            "baseline_test_sharpes": {name: metrics[name]["sharpe"] for name in ev.BASELINES},
            "random_test_sharpe_mean": float(np.mean(rand_sharpes)),
            "random_test_sharpe_std": float(np.std(rand_sharpes, ddof=1)),
            "metrics": metrics,
            "epochs": history[k],
            "returns_file": str(rel),
        }
        if prep.signal is not None:
            oracle = ev.oracle_rollout(jax.numpy.asarray(prep.signal, jax.numpy.float32),
                                       fold_data[k], fold_data[k].test[0], test_len, cfg)
            entry["oracle_test_sharpe"] = _sharpe(oracle.returns, ppy)
            oracles.append(np.asarray(oracle.returns, np.float64))
        entries.append(entry)
    cat = {name: jax.tree.map(lambda *xs: np.concatenate(xs), *rs)
           for name, rs in stitched.items()}
    head = headline(np.asarray(cat["agent"].returns, np.float64), trials, val_matrix, ppy,
                    [e["test_sharpe"] for e in entries])
    oracle = {"stitched_oracle_test_sharpe": _sharpe(np.concatenate(oracles), ppy)
              } if oracles else {}
    return {
        "folds": entries,
        "stitched_test_sharpe": head["stitched_test_sharpe"],
        "stitched_buy_and_hold_test_sharpe": _sharpe(cat["buy_and_hold"].returns, ppy),
        "geo_mean_test_sharpe": head["geo_mean_test_sharpe"],
        "stitched": {name: _perf(r, ppy) for name, r in cat.items()},
        "headline": head,
        "trials": trials,
        "config": cfg.to_dict(),
        "data_sha256": prep.bars.sha256,
        "data_source": prep.bars.source,
        "n_bars": len(prep.bars),
        "periods_per_year": ppy,
        "feature_names": list(prep.features.names),
        "device": describe_device(),
        **oracle,
    }


def _named(names, weights) -> dict[str, float]:
    mean = np.asarray(weights, np.float64).mean(0)
    return {n: float(x) for n, x in zip(names, mean, strict=True)}
