"""The run's state between epochs, and the per-fold records derived from it.

`RunState` = the members on the devices + the host's per-epoch `Records` (arrays) + the JSON
`Progress`; the last two and the members are what `--resume` restores, so everything derived
from them (`fold_records`) is the same for a resumed and an uninterrupted run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from flax import struct

from rl_trader.metrics import sharpe_of
from rl_trader.population import Cohort
from rl_trader.prepare import Prepared
from rl_trader.selection import best_of
from rl_trader.train import EpochMetrics, Runner


@struct.dataclass
class Records:
    """The host's record of every epoch, saved with the members for `--resume`."""

    runners: Runner  # every member's state (pad members dropped), host numpy
    val_returns: np.ndarray  # float64 [E, G, V]: each ensemble's per-bar validation returns
    metrics: EpochMetrics  # leaves float [E, P]: each member's epoch means

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
                               **records.fold_means(epoch, c.members_of(k))})
    return history, trials, val_matrix
