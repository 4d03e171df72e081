"""Stages 3–5 of a run: train the population epoch by epoch, score each fold once, report.

    prepare (prepare.py) → build the population (population.build) → train an epoch
    (`train_epoch`: NaN guard, selection, checkpoints, resume state) × E → score (`score`,
    scoring.py) → report (`report`)

The policy of a (fold, setting) is the **ensemble of its seeds**: each seed's greedy target
position, averaged (`agent.policy.greedy_decide`). After each epoch every ensemble is rolled out on
its fold's validation block; per fold, the ensemble chosen by the selection rule
(`selection.best_of` on validation Sharpe) is checkpointed (orbax keeps the fold's best epoch
and the latest). At the end each fold's best checkpoint is restored and scored **once** on its
test block, beside the baselines on the same bars with the same costs.

The run's state between epochs is a `RunState`: the members on the devices, the host's
per-epoch `Records` and the JSON `Progress`; the last two and the members are what `--resume`
restores.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from rl_trader import env
from rl_trader.agent.learner import TrainState
from rl_trader.baselines.gbm import TREES_FILE, GbmFits, save_trees
from rl_trader.data.fold_data import fold_inference_metadata
from rl_trader.data.folds import format_folds
from rl_trader.errors import InputError
from rl_trader.evaluation.metrics import sharpe_of
from rl_trader.evaluation.record import RunSummary
from rl_trader.evaluation.rollout import decision_targets
from rl_trader.evaluation.selection import best_of
from rl_trader.report.figures import start_workers
from rl_trader.run.ahead import CompileAhead
from rl_trader.run.checkpoint import HOLDS_ACTING, FoldCheckpoints, ResumeState, fingerprint
from rl_trader.run.prepare import Prepared, build_cohort, with_trees
from rl_trader.run.run_state import (
    Diagnostics,
    Progress,
    Records,
    RunState,
    check_resumable,
    diagnostics_fields,
    diagnostics_of,
    discounted_returns,
    fold_records,
    forecast_ic,
    horizon,
    runner_layout,
)
from rl_trader.run.scoring import BaselinesOnTest, score_folds, validation_summary
from rl_trader.run.validation import validate
from rl_trader.runtime.compile_watch import CompileLog, format_seconds, time_left, totals
from rl_trader.runtime.devices import (
    barrier,
    describe_device,
    is_multiprocess,
    rows,
    shard_population,
    to_host,
)
from rl_trader.runtime.rundir import RunLock, fault_point, open_run_dir, write_json
from rl_trader.runtime.stopwatch import Stopwatch
from rl_trader.runtime.tensorboard import ScalarWriter
from rl_trader.training.population import Cohort
from rl_trader.training.train import EpochMetrics

FINITE_WHAT = ("loss", "gradient", "parameters", "validation returns")


@dataclass
class Run:
    """What stays fixed while a run trains."""

    prep: Prepared
    run_dir: Path
    cohort: Cohort
    log: Callable[[str], None]
    fingerprint: str
    template: TrainState  # one ensemble's learner state (zeros): the restore template
    checkpoints: list[FoldCheckpoints | None]  # per fold; None where another process owns it
    resume_state: ResumeState
    writers: list[ScalarWriter | None]  # per fold, TensorBoard (process 0)
    t_start: float
    clock: Stopwatch  # seconds per stage (timings.json)
    compiles: CompileLog  # announces each stage's first compilation
    laps: list[dict] = dataclasses.field(default_factory=list)  # this process's epochs
    # this process's epochs, each without the seconds spent compiling: the time-left estimate
    work_seconds: list[float] = dataclasses.field(default_factory=list)
    baselines: BaselinesOnTest | None = None  # on test, and gbm's fits (process 0, scored)

    def wait_for_writes(self) -> None:
        """Block until this process's fold checkpoints and resume state started so far are
        committed on disk."""
        self.resume_state.wait()
        for ckpt in self.checkpoints:
            if ckpt is not None:
                ckpt.wait()

    def fold_checkpoints(self, k: int, process: int | None) -> FoldCheckpoints:
        """Fold k's checkpoint manager, used by `process` alone (None: by every process)."""
        f, prep = self.prep.folds[k], self.prep
        inference = fold_inference_metadata(prep.features, prep.bars.dates, prep.bars.close, f,
                                            prep.cfg, prep.periods_per_year)
        if k in prep.tree_forecast_choices:  # the column's choice and normaliser
            inference["tree_forecast"] = prep.tree_forecast_choices[k].to_dict()
        if k in prep.trusts:  # the forecast's trust (--view trusted), fit on train
            inference["trust"] = prep.trusts[k].to_dict()
        return FoldCheckpoints(self.run_dir / f"fold_{f.index}" / "checkpoints",
                               self.fingerprint,
                               {"config": prep.cfg.to_dict(), "fold": f.to_dict(),
                                "data_sha256": prep.data_sha256, "inference": inference},
                               process=process)


def run_experiment(prep: Prepared, run_dir: Path, overwrite: bool = False,
                   resume: bool = False, log: Callable[[str], None] = print,
                   devices: int | None = None, validation_only: bool = False,
                   write_html: bool = True) -> RunSummary:
    """Train the population, score each fold once on test, write the outputs; return the
    summary (on a process other than 0 of a multi-process run: its `stopped` alone).

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
        return _run(prep, run_dir, resume, log if main else (lambda _: None), devices,
                    validation_only, write_html)


def _run(prep: Prepared, run_dir: Path, resume: bool, log: Callable[[str], None],
         devices: int | None, validation_only: bool, write_html: bool) -> RunSummary:
    """The stages, in order, inside the locked run directory."""
    log(format_folds(prep.folds, prep.bars.dates))
    t_start, clock = time.time(), Stopwatch()
    # on an accelerator the training program compiles while the trees are fit (`ahead`)
    ahead = CompileAhead(prep, devices) if prep.needs_trees and host_is_idle() else None
    try:
        with clock.stage("trees"):  # the tree forecast's fits, unless `prepare` made them
            prep = with_trees(prep, spare_cores=2 if ahead is not None else 0)
    finally:  # also when the fits fail: nothing may trace while that thread does
        if ahead is not None:
            with clock.stage("compile_ahead"):  # what is left of it once the trees are fit
                line = ahead.wait()
            log(line)
    with clock.stage("population"):
        cohort = build_cohort(prep, devices)
    for k, choice in sorted(prep.tree_forecast_choices.items()):
        log(f"fold {prep.folds[k].index}: the tree forecast column: {choice.describe()}")
    for k, trust in sorted(prep.trusts.items()):
        log(f"fold {prep.folds[k].index}: trust in the forecast w = {trust.w:.3f} (the "
            f"cross-fitted trees' t = {trust.t:+.2f} over {trust.bars} train bars)")
    with clock.stage("start"):
        run, state = start(prep, run_dir, cohort, log, resume, t_start, clock)
    scored = jax.process_index() == 0 and not validation_only  # process 0 alone scores
    # the report's figure workers start while the host waits on the accelerator's training
    pool = start_workers() if scored and write_html and host_is_idle() else None
    try:
        if scored:
            gbm_fits = GbmFits(cohort.fold_data, prep.val_steps, prep.cfg, host_is_idle(),
                               prep.gbm_fits)
            run.baselines = BaselinesOnTest(prep, cohort.fold_data, gbm_fits,
                                          cohort.run_keys.random, host_is_idle())
        for epoch in range(state.progress.epochs_done, prep.cfg.train.epochs):
            state = train_epoch(run, state, epoch)
        with clock.stage("resume_wait"):  # the last epoch's writes
            run.wait_for_writes()
            run.resume_state.close()
        fault_point(f"saved:{state.progress.epochs_done - 1}")
        with clock.stage("score"):
            summary = score(run, state, validation_only)
        if jax.process_index() == 0:
            report(run, state, summary, validation_only, write_html, pool)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    barrier("scored")
    return summary


def host_is_idle() -> bool:
    """Whether the host's cores wait while the run trains (an accelerator backend), so that
    the gbm baseline can be fit beside training (`gbm.GbmFits`); on a CPU backend the
    host's cores are the training device, and the trees are fit at scoring time."""
    return jax.default_backend() != "cpu"


def start(prep: Prepared, run_dir: Path, cohort: Cohort, log: Callable[[str], None],
          resume: bool, t_start: float, clock: Stopwatch) -> tuple[Run, RunState]:
    """Fresh members (or, with `resume`, the saved ones), the fold checkpoint managers, the
    resume store and the TensorBoard writers."""
    cfg, c = prep.cfg, cohort
    n_members, n_epochs = len(c.members), cfg.train.epochs
    multi, pid = is_multiprocess(), jax.process_index()
    # Zero host arrays with the members' structure (`jax.eval_shape`: nothing is compiled or
    # copied): the restore templates, and the records' placeholder until the first epoch.
    zeros = jax.tree.map(lambda s: np.zeros((n_members,) + s.shape[1:], s.dtype),
                         jax.eval_shape(c.pop.init, c.keys, c.data))
    template = jax.tree.map(lambda x: x[:c.n_seeds], zeros.learner)
    metrics0 = EpochMetrics(**{f.name: np.zeros((n_epochs, n_members))
                               for f in dataclasses.fields(EpochMetrics)})
    records = Records(runners=zeros,  # no pad members
                      val_returns=np.zeros((n_epochs, len(c.groups), prep.val_len)),
                      metrics=metrics0,
                      diagnostics=Diagnostics.zeros(n_epochs, len(c.groups), prep.val_len))
    progress = Progress(epochs_done=0, stopped={}, epoch_seconds=[],
                        data_sha256=prep.data_sha256, folds=[f.to_dict() for f in prep.folds])
    run = Run(prep=prep, run_dir=run_dir, cohort=c, log=log,
              fingerprint=fingerprint(template.params, cfg.net,
                                      len(env.action_sizes(cfg.env))),
              template=template, checkpoints=[], resume_state=ResumeState(run_dir / "resume"),
              writers=[ScalarWriter(run_dir / "tensorboard" / f"fold_{f.index}")
                       if pid == 0 else None for f in prep.folds], t_start=t_start,
              clock=clock, compiles=CompileLog(log))
    # Fold k's directory belongs to process k mod (process count), which alone writes it, so a
    # multi-process run spreads its checkpoint writes evenly over the processes. Where the
    # fold's members live does not matter: `rows` gathers each saved ensemble to every process.
    run.checkpoints = [run.fold_checkpoints(k, pid if multi else None)
                       if f.index % jax.process_count() == pid else None
                       for k, f in enumerate(prep.folds)]
    for k, f in enumerate(prep.folds):  # the trees a used tree-forecast column needs to act
        choice = prep.tree_forecast_choices.get(k)
        if run.checkpoints[k] is not None and choice is not None and choice.used:
            save_trees(run_dir / f"fold_{f.index}" / TREES_FILE, prep.gbm_fits[k])
    if resume and run.resume_state.latest_epoch() is not None:
        meta = run.resume_state.meta()
        check_resumable(meta, run_dir, runner_layout(zeros))
        # members as saved: the padded population of the saving run's layout (older resume
        # states: the members alone); the first n_members are the run's own
        saved = meta.pop("members_saved", n_members)
        progress = Progress.from_json(meta)
        if (progress.data_sha256, progress.folds) != (prep.data_sha256,
                                                      [f.to_dict() for f in prep.folds]):
            raise InputError(f"option --resume: the data behind '{run_dir}' changed since the "
                             f"run started (sha256 {progress.data_sha256[:12]}… then, "
                             f"{prep.data_sha256[:12]}… now); start a new run instead")
        members, host = run.resume_state.restore(
            jax.tree.map(lambda x: np.zeros((saved,) + x.shape[1:], x.dtype), zeros),
            records.replace(runners=None))
        restored = host.replace(runners=members)
        runners = shard_population(_first_members(restored.runners, n_members, c.n_padded),
                                   c.mesh)
        records = restored.replace(runners=zeros)
        log(f"resuming after epoch {progress.epochs_done - 1} of 0..{n_epochs - 1}")
    else:
        with run.compiles.first("initialisation program"):
            runners = c.pop.init(c.keys, c.data)
    for ckpt in run.checkpoints:  # epochs saved by a run killed after its last resume point
        if ckpt is not None:
            ckpt.delete_after(progress.epochs_done - 1)
    if resume and progress.epochs_done:
        _restore_lost_checkpoints(run, restored, progress)
    return run, RunState(runners=runners, records=records, progress=progress)


def _restore_lost_checkpoints(run: Run, restored: Records, progress: Progress) -> None:
    """Save again, from the resume state, a fold checkpoint of the resumed epoch that never
    reached the disk: the fold checkpoints and the resume state are written in the background
    side by side, so a run killed at the wrong moment can have committed the second only."""
    epoch = progress.epochs_done - 1
    val_sh = [sharpe_of(r, run.prep.periods_per_year) for r in restored.val_returns[epoch]]
    acting = restored.runners.learner.params
    for k, ckpt in enumerate(run.checkpoints):
        if ckpt is not None and k not in progress.stopped and epoch not in ckpt.saved_epochs():
            _save_fold(run, k, epoch, val_sh,
                       lambda i, n: jax.tree.map(lambda x: x[i:i + n], acting))
            run.log(f"fold {k}: the checkpoint of epoch {epoch} was not on disk; saved again "
                    f"from the resume state")


def _save_fold(run: Run, k: int, epoch: int, val_sh: list[float],
               params_of: Callable[[int, int], object]) -> int:
    """Start saving fold k's checkpoint of `epoch` (its owning process only): the acting
    params of the ensemble chosen on validation (`best_of`), `params_of(first member, seeds)`
    (host arrays; called on every process, as it may be a collective). Returns the ensemble."""
    c = run.cohort
    best = best_of(c.ensembles_of(k), val_sh)
    params = params_of(best * c.n_seeds, c.n_seeds)
    if run.checkpoints[k] is not None:
        run.checkpoints[k].save(epoch, params, val_sh[best],
                                {"seeds": c.n_seeds, "holds": HOLDS_ACTING,
                                 "setting": c.settings[c.groups[best].setting]})
    return best


def train_epoch(run: Run, state: RunState, epoch: int) -> RunState:
    """Stage 3, once per epoch: train every member (then wait for the previous epoch's fold
    checkpoints and resume state, written meanwhile), roll every ensemble out on validation;
    per fold the NaN guard, the selection, the start of its checkpoint's write, the logs; then
    the start of the resume state's write.
    """
    prep, c, cfg, clock = run.prep, run.cohort, run.prep.cfg, run.clock
    t_epoch, compiled_before = time.time(), totals()
    clock.lap()  # this epoch's lap starts here
    # the first epoch's includes compiling it
    with clock.stage("train_program"), run.compiles.first("training program"):
        runners, metrics = jax.block_until_ready(c.pop.epoch(state.runners, c.data, c.hps))
    with clock.stage("resume_wait"):  # the previous epoch's writes, done meanwhile
        run.wait_for_writes()
    if epoch > 0:
        fault_point(f"saved:{epoch - 1}")
    fault_point(f"epoch:{epoch}")
    learnt = runners.learner.params  # [members, ...]
    with clock.stage("validation"), run.compiles.first("validation program"):
        acting, val, finite = validate(prep, c, runners, metrics)
        val_returns = val.returns.astype(np.float64)
    records, progress = state.records, state.progress
    records.val_returns[epoch] = val_returns
    with clock.stage("diagnostics"):
        _diagnose(run, records.diagnostics, epoch, acting, val)
    for f in dataclasses.fields(EpochMetrics):
        getattr(records.metrics, f.name)[epoch] = to_host(getattr(metrics, f.name))[
            :len(c.members)]
    val_sh = [sharpe_of(r, prep.periods_per_year) for r in val_returns]
    weights = val.market_weights.mean(1)  # [G, F]
    run.work_seconds.append(time.time() - t_epoch - totals().minus(compiled_before).seconds)
    left = time_left(run.work_seconds, cfg.train.epochs - epoch - 1)
    for k in range(len(prep.folds)):
        if k in progress.stopped:
            continue
        problem = _nan_guard(c, k, finite, val_returns)
        if problem:
            progress.stopped[k] = {"epoch": epoch, "message": f"fold {k} stopped at epoch "
                                                              f"{epoch}: non-finite {problem}"}
            run.log(progress.stopped[k]["message"] + "; its last good checkpoint is kept")
            continue
        with clock.stage("checkpoints"):  # started: written in the background
            best = _save_fold(run, k, epoch, val_sh, lambda i, n: rows(learnt, i, n, c.mesh))
        fault_point(f"saving:{epoch}")
        _log_fold(run, k, epoch, {**records.fold_means(epoch, c.members_of(k)),
                                  **diagnostics_of(records.diagnostics, epoch, best)},
                  val_sh[best], weights[best], left)
    progress.epochs_done = epoch + 1
    progress.epoch_seconds.append(time.time() - t_epoch)  # all but the resume state's launch
    with clock.stage("resume_state"):
        # The members as they lie on the devices (each process writes its own rows; the
        # copy to the host ends before `save` returns, so the next epoch may donate them).
        run.resume_state.save(epoch, runners, records.replace(runners=None),
                              {**progress.to_json(), "members_saved": c.n_padded,
                               "diagnostics": diagnostics_fields(),
                               "runner_layout": runner_layout(runners)})
    run.laps.append({"epoch": epoch, "seconds": round(time.time() - t_epoch, 3),
                     "stages": clock.lap()})
    return RunState(runners=runners, records=records, progress=progress)


def _diagnose(run: Run, d: Diagnostics, epoch: int, acting, val) -> None:
    """Fill epoch `epoch` of the learning diagnostics (`run_state.Diagnostics`) in place: the
    greedy Sharpe on the end of each fold's train segment, Q against the realised discounted
    reward on validation, the validation positions, the forecast's information coefficient
    there. `val`: the validation rollouts on the host, trimmed to the validation length
    (decisions at bars val₀ − 1 …, each forecasting the target `aux_target` of its bar)."""
    prep, c = run.prep, run.cohort
    probe = min(prep.val_len, min(f.train[1] - f.train[0] for f in prep.folds))
    train = c.pop.evaluate(acting, c.val_data, c.val_data.train[:, 1] - probe, prep.val_steps,
                           c.eval_keys)  # probe ≤ val_len: the validation program, reused
    d.train_sharpe[epoch] = [sharpe_of(r[:probe], prep.periods_per_year)
                             for r in to_host(train.returns)]
    gamma = np.array([c.settings[m.setting]["gamma"] for m in c.groups])
    realised = discounted_returns(val.reward.astype(np.float64), gamma)
    q = val.q.astype(np.float64)
    for g in range(len(c.groups)):
        fits = max(1, prep.val_len - horizon(float(gamma[g])))  # bars whose horizon fits
        d.q_greedy[epoch, g] = q[g, :fits].mean()
        d.realised[epoch, g] = realised[g, :fits].mean()
        d.forecast_ic[epoch, g] = forecast_ic(val.forecast[g], decision_targets(
            c.val_data.aux_target[g], int(c.val_data.val[g, 0]), prep.val_len))
    d.positions[epoch] = val.position


def _nan_guard(c: Cohort, k: int, finite: np.ndarray, val_returns: np.ndarray) -> str | None:
    """What is non-finite in fold k this epoch, and whose ('loss (seed 2)'), or None."""
    bad = [f"{what} (seed {c.members[i].seed})" for i in c.members_of(k)
           for what, ok in zip(FINITE_WHAT[:3], finite[i], strict=True) if not ok]
    bad += [f"{FINITE_WHAT[-1]} (ensemble)" for g in c.ensembles_of(k)
            if not np.isfinite(val_returns[g]).all()]
    return bad[0] if bad else None


def _log_fold(run: Run, k: int, epoch: int, mean: dict[str, float], val_sharpe: float,
              weights: np.ndarray, left: float) -> None:
    """TensorBoard scalars and the console line of fold k's epoch: its figures, the seconds
    since the start and the training time `left` (estimated, compile excluded)."""
    if run.writers[k] is not None:
        vsn = {f"vsn/{n}": float(x)
               for n, x in zip(run.prep.market_names, weights, strict=True)}
        scalars = {name: v for name, v in mean.items() if isinstance(v, float)}
        mags = {f"magnitude/{b}": x for b, x in zip(("flat", "le_0.25", "le_0.5", "le_0.75",
                                                      "le_1"), mean["magnitude_fractions"],
                                                     strict=True)}
        dirs = {f"direction/{d}": x for d, x in zip(("short", "flat", "long"),
                                                    mean["direction_fractions"], strict=True)}
        run.writers[k].scalars(epoch, {**scalars, **mags, **dirs, "val_sharpe": val_sharpe,
                                       **vsn})
    run.log(f"fold {k} epoch {epoch} of 0..{run.prep.cfg.train.epochs - 1}"
            f"  loss {mean['loss']:.4f}"
            f"  td {mean['td_abs']:.3f}  aux {mean['aux_loss']:.3f}"
            f"  ε {mean['epsilon']:.3f}  train Sharpe {mean['train_sharpe']:+.3f}"
            f"  val Sharpe {val_sharpe:+.3f}"
            f"  {time.time() - run.t_start:6.1f}s  training left ~{format_seconds(left)}")


def score(run: Run, state: RunState, validation_only: bool) -> dict:
    """Stage 4: close the writers and fold checkpoint managers; on process 0, each fold's best
    checkpoint scored once on test beside the baselines (or, for a sweep, the validation
    records only). Other processes return only the stopped folds."""
    progress = state.progress
    stopped = [progress.stopped[k]["message"] for k in sorted(progress.stopped)]
    fault_point("scoring")
    for w in run.writers:
        if w is not None:
            w.close()
    for ckpt in run.checkpoints:
        if ckpt is not None:
            ckpt.close()  # waits for its last save
    barrier("fold_checkpoints")  # every owner's saves are on disk before process 0 reads them
    if jax.process_index() != 0:  # process 0 scores every fold and writes the summary
        return RunSummary(folds=(), config=run.prep.cfg.to_dict(), stopped=stopped)
    records = fold_records(run.prep, run.cohort, state.records, progress)
    if validation_only:
        summary = validation_summary(run.prep, records, run.cohort.settings)
    else:
        readers = [run.fold_checkpoints(k, 0 if is_multiprocess() else None)
                   for k in range(len(run.prep.folds))]
        with run.compiles.first("scoring programs (test rollouts and baselines)"):
            summary = score_folds(run.prep, run.run_dir, run.cohort.pop, run.template,
                                  readers, run.cohort.fold_data, *records,
                                  baselines=run.baselines, keys=run.cohort.run_keys,
                                  mesh=None if is_multiprocess() else run.cohort.mesh)
    return dataclasses.replace(summary, fingerprint=run.fingerprint, stopped=stopped)


def report(run: Run, state: RunState, summary: RunSummary, validation_only: bool,
           write_html: bool, pool: Executor | None = None) -> None:
    """Stage 5 (process 0): summary.json, the per-bar validation returns of a sweep or (with
    `write_html`) the HTML report of a run (its figures drawn by `pool`'s workers, if any),
    timings.json (stages included); then the resume state is removed (the run is done)."""
    run_dir, c = run.run_dir, run.cohort
    done = state.progress.epochs_done
    write_json(run_dir / "summary.json", summary.to_json())
    with run.clock.stage("report"):
        if validation_only:
            np.savez_compressed(run_dir / "validation_returns.npz",
                                val_returns=state.records.val_returns[:done],
                                fold=[m.fold for m in c.groups],
                                setting=[m.setting for m in c.groups])
        elif write_html:
            from rl_trader.report.writer import write_report

            write_report(run_dir, pool)
    write_json(run_dir / "timings.json", {
        "seconds_total": time.time() - run.t_start,
        # every epoch since the start, each up to its resume-state write (which overlaps the
        # next epoch's training program)
        "seconds_per_epoch": state.progress.epoch_seconds,
        # this process's epochs (a resumed run: since the resume), whole, with their stages
        "epochs": run.laps,
        # this process's stages since it started (a resumed run: since the resume)
        "stage_seconds": run.clock.rounded(),
        "members": len(c.members), "devices": int(c.mesh.devices.size),
        "processes": jax.process_count(),
        "device": describe_device()})
    shutil.rmtree(run_dir / "resume")  # complete: the resume state is no longer needed


def _first_members(tree, n: int, size: int):
    """The first `n` members of a host population pytree (a saved run's pad members dropped),
    padded to `size` with copies of member 0 (ignored), in numpy (no program per leaf)."""
    return jax.tree.map(lambda x: np.concatenate(
        [x[:n], np.repeat(x[:1], size - n, axis=0)]), tree)


