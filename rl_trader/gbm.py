"""The gradient-boosted-trees baseline: the model a quant tries first on the same features.

scikit-learn's `HistGradientBoostingRegressor` of ridge's target (`FoldData.aux_target`, the
next bar's log return over its train std) on ridge's features (the bar-t market variables,
normalised on train), fit on ridge's rows (`training_bars`: train bars whose next bar is in
the same training range). The number of leaves (`GBM_LEAVES`) and of boosting iterations
(`GBM_ITERATIONS`, the staged predictions of one fit per leaf count) are chosen by the
validation Sharpe of its position rule, clip(ŷ / s, −1, 1) with s the root mean square of ŷ
over the fitted rows (`evaluate.forecast_position`), traded through the env with the run's
costs, as ridge's penalty is: the first best on ties. Only train and validation bars are read;
the fit is deterministic (fixed `random_state`, no early stopping, no subsampling).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from rl_trader.compile_watch import unwatched
from rl_trader.config import RunConfig
from rl_trader.evaluate import Forecast, forecast_val_sharpes
from rl_trader.fold_data import FoldData, training_bars

GBM_LEAVES = (4, 8, 16)  # max_leaf_nodes per tree
GBM_ITERATIONS = (25, 50, 100, 200, 400)  # boosting iterations (trees)
LEARNING_RATE = 0.05
MIN_SAMPLES_LEAF = 40  # rows per leaf at least: a few thousand noisy rows per fold


@dataclass(frozen=True)
class GbmFit:
    """The chosen forecast and what chose it."""

    forecast: Forecast  # ŷ at every bar [T_b] (float32) and its scale s
    leaves: int
    iterations: int
    val_sharpe: np.ndarray  # [len(GBM_LEAVES), len(GBM_ITERATIONS)] per-bar validation Sharpe


def fit_gbm(data: FoldData, val_steps: int, cfg: RunConfig) -> GbmFit:
    """Fit on train, choose leaves and iterations on validation (module docstring);
    `val_steps` as for `evaluate.fit_ridge`."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    x = np.asarray(data.features, np.float64)
    y = np.asarray(data.aux_target, np.float64)
    rows = np.asarray(training_bars(data))
    keep = set(GBM_ITERATIONS)
    y_hats = []
    for leaves in GBM_LEAVES:
        model = HistGradientBoostingRegressor(
            max_iter=max(GBM_ITERATIONS), max_leaf_nodes=leaves, learning_rate=LEARNING_RATE,
            min_samples_leaf=MIN_SAMPLES_LEAF, early_stopping=False, random_state=0)
        model.fit(x[rows], y[rows])
        y_hats += [p for i, p in enumerate(model.staged_predict(x), 1) if i in keep]
    y_hat = np.stack(y_hats).astype(np.float32)  # [C, T_b]
    scale = np.maximum(np.sqrt(np.mean(y_hat[:, rows] ** 2, axis=1)), 1e-12).astype(np.float32)
    sharpes = np.asarray(forecast_val_sharpes(Forecast(y_hat=y_hat, scale=scale), data,
                                              val_steps, cfg), np.float64)
    best = int(np.argmax(np.where(np.isnan(sharpes), -np.inf, sharpes)))
    n_it = len(GBM_ITERATIONS)
    return GbmFit(forecast=Forecast(y_hat=y_hat[best], scale=scale[best]),
                  leaves=GBM_LEAVES[best // n_it], iterations=GBM_ITERATIONS[best % n_it],
                  val_sharpe=sharpes.reshape(len(GBM_LEAVES), n_it))


def _unwatched_fit(data: FoldData, val_steps: int, cfg: RunConfig) -> GbmFit:
    with unwatched():
        return fit_gbm(data, val_steps, cfg)


class GbmFits:
    """Every fold's `fit_gbm` (`data`: the folds' FoldData), each made once. With `background`
    (an accelerator run: `experiment.host_is_idle`) they are made one after another on a host
    thread started here, while the run trains, so that scoring need not wait for the trees: a
    fit reads only a fold's train and validation bars and the run's configuration, which
    training does not change, and it is deterministic, so the results equal fits made at
    scoring time; that thread's compilations are left out of the run's compile log
    (`compile_watch.unwatched`). Otherwise fold k's fit is made when `result(k)` asks for it.
    `result(k)` raises the fit's error, if any."""

    def __init__(self, data: list[FoldData], val_steps: int, cfg: RunConfig, background: bool):
        self._data, self._val_steps, self._cfg = data, val_steps, cfg
        self._fits: dict[int, Future] = {}
        if background:
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gbm")
            self._fits = {k: pool.submit(_unwatched_fit, d, val_steps, cfg)
                          for k, d in enumerate(data)}
            pool.shutdown(wait=False)  # the thread ends after the last fit

    def result(self, k: int) -> GbmFit:
        if k in self._fits:
            return self._fits[k].result()
        return fit_gbm(self._data[k], self._val_steps, self._cfg)
