"""The multi-fold experiment: layout → population training with checkpoints → test once.

The population is every (fold, hyper-parameter setting, seed); each member starts from its own
fresh state (`Trainer.init`) and all train together, one jitted, vmapped program per epoch.
The policy of a (fold, setting) is the **ensemble of its seeds**: each seed's greedy target
position, averaged (`evaluate.greedy_decide`), which cuts the seed-to-seed variance of single
agents. After each epoch every ensemble is rolled out on its fold's validation block; per fold,
the ensemble with the best validation Sharpe that epoch is checkpointed (orbax keeps the fold's
best epoch and the latest). At the end each fold's best checkpoint is restored and scored
**once** on its test block, beside the baselines on the same bars with the same costs.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from rl_trader.agent import policy_params
from rl_trader.checkpoint import (
    FoldCheckpoints,
    ResumeState,
    fingerprint,
)
from rl_trader.config import RunConfig
from rl_trader.data import SYNTHETIC_PREFIX, Bars, load
from rl_trader.devices import (
    barrier,
    describe_device,
    is_multiprocess,
    padded_size,
    population_mesh,
    rows,
    shard_population,
    to_host,
)
from rl_trader.errors import InputError
from rl_trader.features import MarketFeatures, compute_features
from rl_trader.folds import Fold, format_folds, make_folds
from rl_trader.market import fold_inference_metadata, make_fold_data
from rl_trader.population import (
    Population,
    ensembles,
    grid,
    members_of,
    population_inputs,
    stack,
)
from rl_trader.rundir import RunLock, fault_point, open_run_dir, write_json
from rl_trader.scoring import score_folds, sharpe_of
from rl_trader.tensorboard import ScalarWriter
from rl_trader.train import EpochMetrics, make_train


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


@jax.jit
def _finite(runners, metrics) -> jax.Array:
    """[P, 3] flags: loss, gradient norm and every parameter finite, per member (the
    validation returns are checked on the host as a fourth flag)."""
    params_ok = jax.vmap(lambda p: jnp.all(jnp.stack(
        [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(p)])))(runners.learner.params)
    return jnp.stack([jnp.isfinite(metrics.loss), jnp.isfinite(metrics.grad_norm), params_ok], 1)


FINITE_WHAT = ("loss", "gradient", "parameters", "validation returns")


def run_experiment(prep: Prepared, run_dir: Path, overwrite: bool = False,
                   resume: bool = False, log: Callable[[str], None] = print,
                   devices: int | None = None, validation_only: bool = False) -> dict:
    """Train the population, score each fold once on test, write the outputs; return summary.

    With `resume`, continue from the last completed epoch saved in `run_dir/resume/` (state of
    every member, replay and PRNG keys included), so the result equals an uninterrupted run's.
    The population is sharded over `devices` devices (default: all); results do not depend on
    it. With `validation_only` (hyper-parameter sweeps) no test block is touched: the summary
    holds the validation records only, and `validation_returns.npz` every ensemble's per-bar
    validation returns [epoch, ensemble, bar].
    """
    cfg, folds = prep.cfg, prep.folds
    main = jax.process_index() == 0
    if main and not resume:
        open_run_dir(run_dir, overwrite)
    with RunLock(run_dir) if main else contextlib.nullcontext():
        if main and not resume:
            write_json(run_dir / "config.json", cfg.to_dict())
            write_json(run_dir / "folds.json", {"folds": [f.to_dict() for f in folds]})
        barrier("run_dir")
        return _run_locked(prep, run_dir, resume, log if main else (lambda _: None), devices,
                           validation_only)


def _run_locked(prep: Prepared, run_dir: Path, resume: bool, log: Callable[[str], None],
                devices: int | None, validation_only: bool) -> dict:
    cfg, ppy, folds = prep.cfg, prep.periods_per_year, prep.folds
    log(format_folds(folds, prep.bars.dates))
    t_start = time.time()
    settings = grid(cfg, {k: list(v) for k, v in cfg.sweep})
    n_seeds = cfg.train.seeds
    members = members_of(len(folds), len(settings), list(range(n_seeds)))
    groups = members[::n_seeds]  # ensemble g = members [g·S, (g+1)·S): one (fold, setting)
    fold_data = [make_fold_data(prep.bars.open, prep.bars.close, prep.features, f,
                                cfg.features.clip) for f in folds]
    mesh = population_mesh(devices)
    n_members = len(members)
    padded = members + [members[0]] * (padded_size(n_members, mesh) - n_members)
    inputs = population_inputs(padded, fold_data, settings, cfg.seed)  # host numpy
    keys, data, hps = shard_population(inputs, mesh)
    val_len = folds[0].val[1] - folds[0].val[0]
    pop = Population(make_train(cfg, ppy, val_len), mesh)
    n_epochs = cfg.train.epochs
    runners = pop.init(keys, data)
    multi, pid = is_multiprocess(), jax.process_index()
    template = rows(runners.learner, 0, n_seeds, mesh)  # host copy: restore template
    state = {"runners": _rows(runners, 0, n_members),  # no pad members
             "val_returns": np.zeros((n_epochs, len(groups), val_len)),
             "metrics": {name: np.zeros((n_epochs, n_members))
                         for name in EpochMetrics.__dataclass_fields__}}
    meta = {"epochs_done": 0, "stopped": {}, "epoch_seconds": [],
            "data_sha256": prep.bars.sha256, "folds": [f.to_dict() for f in folds]}
    fp = fingerprint(template.params, cfg.net, len(cfg.env.magnitudes))

    def fold_checkpoints(f: Fold, process: int | None) -> FoldCheckpoints:
        return FoldCheckpoints(run_dir / f"fold_{f.index}" / "checkpoints", fp,
                               {"config": cfg.to_dict(), "fold": f.to_dict(),
                                "data_sha256": prep.bars.sha256,
                                "inference": fold_inference_metadata(
                                    prep.features, prep.bars.dates, prep.bars.close, f, cfg,
                                    ppy)}, process=process)

    # Fold k's directory belongs to process k mod (process count), which alone writes it, so a
    # multi-process run spreads its checkpoint writes evenly over the processes. Where the
    # fold's members live does not matter: `rows` gathers each saved ensemble to every process.
    ckpts = [fold_checkpoints(f, pid if multi else None)
             if f.index % jax.process_count() == pid else None for f in folds]
    saved = ResumeState(run_dir / "resume")  # every process: orbax coordinates the write
    if resume and saved.latest_epoch() is not None:
        state, meta = saved.restore(state)
        runners = shard_population(_pad(state["runners"], len(padded)), mesh)
        state = {**state, "val_returns": np.array(state["val_returns"]),
                 "metrics": {k: np.array(state["metrics"][k])  # field order, not sorted
                             for k in EpochMetrics.__dataclass_fields__}}
        if (meta["data_sha256"], meta["folds"]) != (prep.bars.sha256,
                                                     [f.to_dict() for f in folds]):
            raise InputError(f"option --resume: the data behind '{run_dir}' changed since the "
                             f"run started (sha256 {meta['data_sha256'][:12]}… then, "
                             f"{prep.bars.sha256[:12]}… now); start a new run instead")
        log(f"resuming after epoch {meta['epochs_done']} of {n_epochs}")
    for c in ckpts:  # epochs saved by a run killed after its last resume point
        if c is not None:
            c.delete_after(meta["epochs_done"] - 1)
    writers = [ScalarWriter(run_dir / "tensorboard" / f"fold_{f.index}") if pid == 0 else None
               for f in folds]
    by_fold = [[g for g, m in enumerate(groups) if m.fold == f.index] for f in folds]
    members_by_fold = [[i for i, m in enumerate(members) if m.fold == f.index] for f in folds]
    val_data = stack([fold_data[m.fold] for m in groups])  # host numpy, [G, ...]
    eval_keys = jax.random.split(jax.random.PRNGKey(cfg.seed), len(groups))
    for epoch in range(meta["epochs_done"], n_epochs):
        t_epoch = time.time()
        runners, metrics = pop.epoch(runners, data, hps)
        fault_point(f"epoch:{epoch}")
        acting = ensembles(policy_params(runners.learner, cfg.train.eval_params), len(groups),
                           n_seeds)
        val = pop.evaluate(acting, val_data, val_data.val[:, 0], val_len, eval_keys)
        val_returns = to_host(val.returns).astype(np.float64)
        finite = to_host(_finite(runners, metrics))
        state["val_returns"][epoch] = val_returns
        for name, v in vars(metrics).items():
            state["metrics"][name][epoch] = to_host(v)[:n_members]
        val_sh = [sharpe_of(r, ppy) for r in state["val_returns"][epoch]]
        weights = to_host(val.market_weights).mean(1)  # [G, F]
        meta["epoch_seconds"].append(time.time() - t_epoch)
        for k, idx in enumerate(by_fold):
            if str(k) in meta["stopped"]:
                continue
            bad = [(f"seed {members[i].seed}", w) for i in members_by_fold[k]
                   for w, ok in zip(FINITE_WHAT[:3], finite[i], strict=True) if not ok]
            bad += [("ensemble", FINITE_WHAT[-1]) for g in idx
                    if not np.isfinite(val_returns[g]).all()]
            if bad:
                who, what = bad[0]
                meta["stopped"][str(k)] = {
                    "epoch": epoch, "message": f"fold {k} stopped at epoch {epoch}: non-finite "
                                               f"{what} ({who})"}
                log(meta["stopped"][str(k)]["message"] + "; its last good checkpoint is kept")
                continue
            best = max(idx, key=lambda g: val_sh[g])
            m = groups[best]
            learner = rows(runners.learner, best * n_seeds, n_seeds, mesh)  # every process
            if ckpts[k] is not None:
                ckpts[k].save(epoch, learner, val_sh[best],
                              {"seeds": n_seeds, "setting": settings[m.setting]})
            fault_point(f"saving:{epoch}")
            mean = {name: float(v[epoch, members_by_fold[k]].mean())
                    for name, v in state["metrics"].items()}
            if writers[k] is not None:
                vsn = {f"vsn/{n}": float(x)
                       for n, x in zip(prep.features.names, weights[best], strict=True)}
                writers[k].scalars(epoch, {**mean, "val_sharpe": val_sh[best], **vsn})
            log(f"fold {k} epoch {epoch + 1}/{n_epochs}  loss {mean['loss']:.4f}"
                f"  td {mean['td_abs']:.3f}  aux {mean['aux_loss']:.3f}"
                f"  ε {mean['epsilon']:.3f}  val Sharpe {val_sh[best]:+.3f}"
                f"  {time.time() - t_start:6.1f}s")
        meta["epochs_done"] = epoch + 1
        state["runners"] = _rows(runners, 0, n_members)
        saved.save(epoch, state, meta)
        fault_point(f"saved:{epoch}")
    stopped = [meta["stopped"][k]["message"] for k in sorted(meta["stopped"], key=int)]
    saved.close()
    fault_point("scoring")
    for w in writers:
        if w is not None:
            w.close()
    for c in ckpts:
        if c is not None:
            c.close()  # every save returned when committed
    barrier("fold_checkpoints")  # every owner's saves are on disk before process 0 reads them
    if pid != 0:  # process 0 scores every fold and writes the summary
        barrier("scored")
        return {"stopped": stopped}
    records = _records(state, meta, groups, by_fold, members_by_fold, n_seeds, ppy)
    if validation_only:
        summary = _validation_summary(prep, records, settings)
        np.savez_compressed(run_dir / "validation_returns.npz",
                            val_returns=state["val_returns"][:meta["epochs_done"]],
                            fold=[m.fold for m in groups], setting=[m.setting for m in groups])
    else:
        readers = [fold_checkpoints(f, 0 if multi else None) for f in folds]
        summary = score_folds(prep, run_dir, pop, template, readers, fold_data, *records)
    summary["fingerprint"] = fp
    summary["stopped"] = stopped
    write_json(run_dir / "summary.json", summary)
    write_json(run_dir / "timings.json", {
        "seconds_total": time.time() - t_start, "seconds_per_epoch": meta["epoch_seconds"],
        "members": n_members, "devices": int(mesh.devices.size),
        "processes": jax.process_count(),
        "device": describe_device()})
    if not validation_only:
        from rl_trader.report import write_report

        write_report(run_dir)
    shutil.rmtree(run_dir / "resume")  # complete: the resume state is no longer needed
    barrier("scored")
    return summary


def _validation_summary(prep: Prepared, records: tuple, settings: list[dict]) -> dict:
    """The summary of a validation-only run: per fold its epochs and the best validation
    Sharpe of each setting's ensemble; every trial; no test figure."""
    history, trials, _ = records
    best = {}
    for t in trials:
        key = (t["fold"], t["setting"])
        best[key] = max(best.get(key, -np.inf), t["val_sharpe"])
    return {"validation_only": True, "settings": settings,
            "folds": [{"fold": f.index, "epochs": history[f.index],
                       "best_val_sharpe_by_setting": [best.get((f.index, s), None)
                                                      for s in range(len(settings))]}
                      for f in prep.folds],
            "trials": trials, "config": prep.cfg.to_dict(), "data_sha256": prep.bars.sha256,
            "periods_per_year": prep.periods_per_year, "device": describe_device()}


def _rows(tree, start: int, stop: int):
    """Members [start, stop) of a population pytree, as host numpy arrays on every process
    (a collective in a multi-process run)."""
    return jax.tree.map(lambda x: to_host(x)[start:stop], tree)


def _pad(tree, size: int):
    """Extend a population pytree to `size` members with copies of member 0 (ignored), on the
    host (numpy, so no small program is compiled per leaf)."""
    return jax.tree.map(lambda x: np.concatenate(
        [np.asarray(x), np.repeat(np.asarray(x)[:1], size - x.shape[0], axis=0)]), tree)


def _records(state: dict, meta: dict, groups, by_fold, members_by_fold, n_seeds: int,
             ppy: float) -> tuple:
    """Per-fold epoch history, every trial (an ensemble's validation Sharpe at an epoch), and
    the validation trial matrices, derived from the saved per-epoch arrays (so a resumed run
    derives exactly what an uninterrupted one would). Epochs from a fold's stop onwards are
    not trials."""
    history = [[] for _ in by_fold]
    trials: list[dict] = []
    val_matrix = [[] for _ in by_fold]
    for k, idx in enumerate(by_fold):
        stop = meta["stopped"].get(str(k))
        last = stop["epoch"] if stop else meta["epochs_done"]
        for epoch in range(last):
            val = state["val_returns"][epoch]
            val_sh = {g: sharpe_of(val[g], ppy) for g in idx}
            best = max(idx, key=lambda g: val_sh[g])
            trials += [{"fold": k, "epoch": epoch, "setting": groups[g].setting,
                        "seeds": n_seeds, "val_sharpe": val_sh[g]} for g in idx]
            val_matrix[k].append(val[idx])
            mean = {name: float(v[epoch, members_by_fold[k]].mean())
                    for name, v in state["metrics"].items()}
            history[k].append({"epoch": epoch, "val_sharpe": val_sh[best],
                               "setting": groups[best].setting, **mean})
    return history, trials, val_matrix
