"""The run's state between epochs, and the per-fold records derived from it.

`RunState` = the members on the devices + the host's per-epoch `Records` (arrays) + the JSON
`Progress`; the last two and the members are what `--resume` restores, so everything derived
from them (`fold_records`) is the same for a resumed and an uninterrupted run.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import jax
import numpy as np
from flax import struct

from rl_trader.errors import InputError
from rl_trader.evaluation.metrics import information_coefficient, sharpe_of
from rl_trader.evaluation.selection import best_of
from rl_trader.evaluation.verdict import finite_or_none
from rl_trader.run.prepare import Prepared
from rl_trader.training.population import Cohort
from rl_trader.training.train import EpochMetrics, Runner

MAGNITUDE_BINS = (0.0, 0.25, 0.5, 0.75, 1.0)  # |position| bins: flat, (0, .25], …, (.75, 1]


@struct.dataclass
class Diagnostics:
    """Per epoch and ensemble: is the learner improving, over-estimating, churning?

    train_sharpe: greedy Sharpe on the last bars of the train segment (as many as validation
    has, or the whole train segment if shorter) — next to validation, it shows over-fitting.
    q_greedy, realised: on validation, the mean Q of the greedy action against the mean
    realised discounted learning reward of the greedy policy, G_t = Σ_k γ^k r_{t+k}, over the
    bars whose horizon fits in the block (γ^k ≥ 0.01); q_greedy − realised is over-estimation.
    positions: the greedy (ensemble-mean) position at every validation bar, from which the
    churn (fraction of bars whose position changed since the last epoch) and the magnitude
    distribution are derived.
    forecast_ic: on validation, the correlation of the aux head's forecast (ensemble mean) with
    the next-bar return it predicts (`forecast_ic`), the forecast's information coefficient;
    None in the summary when that forecast is constant.
    """

    train_sharpe: np.ndarray  # [E, G]
    q_greedy: np.ndarray  # [E, G]
    realised: np.ndarray  # [E, G]
    positions: np.ndarray  # float32 [E, G, V]
    forecast_ic: np.ndarray  # [E, G]

    @staticmethod
    def zeros(n_epochs: int, n_groups: int, n_bars: int) -> Diagnostics:
        z = np.zeros((n_epochs, n_groups))
        return Diagnostics(train_sharpe=z, q_greedy=z.copy(), realised=z.copy(),
                           forecast_ic=z.copy(),
                           positions=np.zeros((n_epochs, n_groups, n_bars), np.float32))


def diagnostics_fields() -> list[str]:
    """The names of `Diagnostics`' fields, saved with each resume state."""
    return [f.name for f in dataclasses.fields(Diagnostics)]


def runner_layout(runners: Runner) -> list[str]:
    """Every leaf's path in a population's training state (`train.Runner`, the template or the
    members), saved with each resume state: its fields, the learner's params and the optimiser's
    state, the replay, the envs."""
    return [jax.tree_util.keystr(path)
            for path, _ in jax.tree_util.tree_flatten_with_path(runners)[0]]


def check_resumable(meta: dict, run_dir: object, layout: list[str]) -> None:
    """Refuse (InputError) a resume state whose learning diagnostics or members' training
    state are not this version's: `meta["diagnostics"]` names the saved diagnostics and
    `meta["runner_layout"]` the saved state's leaves (`runner_layout`; this version's is
    `layout`), both popped. A state saved with another layout (another field, an optimiser
    state of another form: another version's, or another backend's, `optimizer.
    raveled_by_default`) or before the layout was saved (2026-12-07) does not fit this
    version's template: it is refused, never restored into the wrong leaves. That includes the
    states saved before the optimiser's state was raveled (2026-12-07), whose packed arrays
    would happen to fit (the leaf-by-leaf Adam moments concatenate in the raveled order): a
    fit by size alone cannot tell a right order from a wrong one, so no state is read on it."""
    saved = meta.pop("diagnostics", None)
    if saved != diagnostics_fields():
        raise InputError(f"option --resume: the run in '{run_dir}' was saved by a version with "
                         f"other learning diagnostics ({', '.join(saved or ['no field list'])}); "
                         f"start a new run, or resume it with that version")
    meta.pop("runner", None)  # the top-level field names, all that states before the layout had
    members = meta.pop("runner_layout", None)
    if members != layout:
        differ = ("saved before the layout was recorded" if members is None else next(
            f"{a or 'nothing'} saved where this version has {b or 'nothing'}"
            for a, b in itertools.zip_longest(members, layout) if a != b))
        raise InputError(f"option --resume: the run in '{run_dir}' was saved with a training "
                         f"state of another layout ({differ}): by another version, or on "
                         f"another backend (the optimiser's state is raveled on a CPU alone); "
                         f"start a new run, or resume it where it was saved")


def discounted_returns(rewards: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    """G_t = r_t + γ·G_{t+1} along the last axis, G beyond the block = 0; `rewards` [G, V],
    `gamma` [G]."""
    out = np.zeros_like(rewards, dtype=np.float64)
    acc = np.zeros(rewards.shape[0])
    for t in range(rewards.shape[1] - 1, -1, -1):
        acc = rewards[:, t] + gamma * acc
        out[:, t] = acc
    return out


def forecast_ic(forecast: np.ndarray, target: np.ndarray) -> float:
    """Pearson correlation of a forecast with its realised target, both [V]; NaN when either
    is constant (e.g. a baseline without a forecast)."""
    return float(information_coefficient(np.asarray(forecast, np.float64),
                                         np.asarray(target, np.float64)))


def horizon(gamma: float) -> int:
    """Bars k with γ^k ≥ 0.01 (1 for γ = 0): how far a discounted return looks ahead."""
    return 1 if gamma <= 0 else int(np.ceil(np.log(0.01) / np.log(gamma)))


FLAT_TOL = 1e-6  # a |position| (or a change of position) this small counts as zero


def magnitude_fractions(positions: np.ndarray) -> list[float]:
    """Fractions of bars whose |position| is 0, in (0, .25], (.25, .5], (.5, .75], (.75, 1]."""
    a = np.abs(np.asarray(positions, np.float64))
    flat = a <= FLAT_TOL
    bins = np.digitize(a[~flat], MAGNITUDE_BINS[1:-1], right=True)
    counts = [int(flat.sum())] + [int((bins == i).sum()) for i in range(4)]
    return [c / a.size for c in counts]


def direction_fractions(positions: np.ndarray) -> list[float]:
    """Fractions of bars whose position is short (< 0), flat (0) and long (> 0), in that
    order (|position| ≤ `FLAT_TOL` is flat)."""
    p = np.asarray(positions, np.float64)
    return [float(np.mean(p < -FLAT_TOL)), float(np.mean(np.abs(p) <= FLAT_TOL)),
            float(np.mean(p > FLAT_TOL))]


@struct.dataclass
class Records:
    """The host's record of every epoch, saved with the members for `--resume`."""

    runners: Runner  # every member's state: saved as the sharded population (pad members
    # included, `members_saved` in the JSON), restored on the host (numpy)
    val_returns: np.ndarray  # float64 [E, G, V]: each ensemble's per-bar validation returns
    metrics: EpochMetrics  # leaves float [E, P]: each member's epoch means
    diagnostics: Diagnostics  # leaves [E, G, ...]: each ensemble's learning diagnostics

    def fold_means(self, epoch: int, members: list[int]) -> dict[str, float]:
        """The epoch's metrics averaged over `members`."""
        return {f.name: float(getattr(self.metrics, f.name)[epoch, members].mean())
                for f in dataclasses.fields(EpochMetrics)}


@dataclass
class Progress:
    """What the host knows besides arrays (saved as JSON with the resume state)."""

    epochs_done: int
    stopped: dict[int, dict]  # fold → {"epoch": e, "message": why it was stopped}
    epoch_seconds: list[float]
    data_sha256: str
    folds: list[dict]

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "stopped": {str(k): v for k, v in
                                                        self.stopped.items()}}

    @staticmethod
    def from_json(d: dict) -> Progress:
        return Progress(**{**d, "stopped": {int(k): v for k, v in d["stopped"].items()}})


@dataclass
class RunState:
    """The run between epochs: members on the devices (padded), the records, the progress."""

    runners: Runner
    records: Records
    progress: Progress


def fold_records(prep: Prepared, c: Cohort, records: Records, progress: Progress) -> tuple:
    """Per-fold epoch history, every trial (an ensemble's validation Sharpe at an epoch), and
    the validation trial matrices, derived from the saved per-epoch arrays (so a resumed run
    derives exactly what an uninterrupted one would). Epochs from a fold's stop onwards are
    not trials."""
    ppy = prep.periods_per_year
    history: list[list[dict]] = [[] for _ in prep.folds]
    trials: list[dict] = []
    val_matrix: list[list[np.ndarray]] = [[] for _ in prep.folds]
    for k in range(len(prep.folds)):
        idx = c.ensembles_of(k)
        stop = progress.stopped.get(k)
        for epoch in range(stop["epoch"] if stop else progress.epochs_done):
            val = records.val_returns[epoch]
            val_sh = {g: sharpe_of(val[g], ppy) for g in idx}
            best = best_of(idx, val_sh)
            trials += [{"fold": k, "epoch": epoch, "setting": c.groups[g].setting,
                        "seeds": c.n_seeds, "val_sharpe": val_sh[g]} for g in idx]
            val_matrix[k].append(val[idx])
            history[k].append({"epoch": epoch, "val_sharpe": val_sh[best],
                               "setting": c.groups[best].setting,
                               **records.fold_means(epoch, c.members_of(k)),
                               **diagnostics_of(records.diagnostics, epoch, best)})
    return history, trials, val_matrix


def diagnostics_of(d: Diagnostics, epoch: int, g: int) -> dict:
    """Ensemble g's diagnostics at `epoch` as JSON-ready numbers (churn None at epoch 0)."""
    churn = (None if epoch == 0 else
             float(np.mean(np.abs(d.positions[epoch, g] - d.positions[epoch - 1, g]) > FLAT_TOL)))
    return {"train_sharpe": float(d.train_sharpe[epoch, g]),
            "q_greedy": float(d.q_greedy[epoch, g]), "realised_return": float(d.realised[epoch, g]),
            "overestimation": float(d.q_greedy[epoch, g] - d.realised[epoch, g]),
            "churn": churn, "magnitude_fractions": magnitude_fractions(d.positions[epoch, g]),
            "direction_fractions": direction_fractions(d.positions[epoch, g]),
            "forecast_ic": finite_or_none(d.forecast_ic[epoch, g])}
