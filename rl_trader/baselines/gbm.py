"""The gradient-boosted-trees baseline: the model a quant tries first on the same features.

scikit-learn's `HistGradientBoostingRegressor` of ridge's target (`FoldData.aux_target`, the
next bar's log return over its train std) on ridge's features (the bar-t market variables,
normalised on train), fit on ridge's rows (`training_bars`: train bars whose next bar is in
the same training range). The number of leaves (`GBM_LEAVES`) and of boosting iterations
(`GBM_ITERATIONS` up to `--gbm-iterations`, the staged predictions of one fit per leaf count)
are chosen by the validation Sharpe of its position rule, clip(ŷ / s, −1, 1) with s the root
mean square of ŷ over the fitted rows (`baselines.ridge.forecast_position`), traded through the env
with the run's costs, as ridge's penalty is: the first best on ties. Only train and validation
bars are read; the fit is deterministic (fixed `random_state`, no early stopping, no subsampling),
so its trees are cached on disk by their inputs (`tree_cache`).

With `--tree-forecast validation` the same trees become one more market variable of the agent
(`with_tree_forecast`), cross-fitted on the train segment so that no train bar's value comes
from trees fit on that bar, in a fold whose validation block they trade better than ridge does
(`choose_tree_forecast`): a choice made on validation, as the baselines' own settings are;
elsewhere, and with `off`, the column is zero.
"""

from __future__ import annotations

import os
import pickle
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import jax
import numpy as np

from rl_trader.baselines.ridge import RIDGE_ALPHAS, Forecast, forecast_val_returns
from rl_trader.baselines.tree_cache import fit_key, sklearn_version
from rl_trader.baselines.tree_fits import (
    LEARNING_RATE,
    MIN_SAMPLES_LEAF,
    FitJob,
    FitPool,
    block_fit,
    staged_fit,
    tree_threads,
)
from rl_trader.config import GBM_ITERATIONS, RunConfig
from rl_trader.data.features import Normaliser, fit_normaliser, normalise
from rl_trader.data.fold_data import FoldData, training_bars
from rl_trader.errors import InputError
from rl_trader.runtime.compile_watch import unwatched

GBM_LEAVES = (4, 8, 16)  # max_leaf_nodes per tree
CROSS_FIT_BLOCKS = 5  # contiguous blocks of the train segment in `cross_fitted_forecast`
TREES_FILE = "gbm_trees.pkl"  # a fold's trees (`save_trees`), where its column is used


@dataclass(frozen=True)
class GbmFit:
    """The chosen forecast and what chose it."""

    forecast: Forecast  # ŷ at every bar [T_b] (float32) and its scale s
    leaves: int
    iterations: int
    val_sharpe: np.ndarray  # [len(GBM_LEAVES), I] per-bar validation Sharpe, I iteration counts
    val_returns: np.ndarray  # [len(GBM_LEAVES)·I, val_steps] each candidate's validation returns
    # the chosen leaf count's regressor, fit to the largest iteration count (`predict_trees`),
    # pickled: a fit read from the tree cache does not import scikit-learn (~1.3 s a process)
    # unless its trees are loaded (`load_trees`)
    model: bytes = field(default=b"", compare=False, repr=False)


def candidate_iterations(cfg: RunConfig) -> tuple[int, ...]:
    """The boosting iterations the validation choice is among: `GBM_ITERATIONS` up to
    `cfg.train.gbm_iterations`."""
    return tuple(n for n in GBM_ITERATIONS if n <= cfg.train.gbm_iterations)


def _settings(**more: object) -> dict:
    """The trees' settings a fit's cache key holds (`tree_cache.fit_key`), with `more` (each
    fit's own: its leaves, iterations, block)."""
    return {"learning_rate": LEARNING_RATE, "min_samples_leaf": MIN_SAMPLES_LEAF, **more}


def _fit_arrays(data: FoldData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A fold's trees' inputs on the host: (x [T, F], y [T]) float64 and the rows fit on
    (`training_bars`, bool [T])."""
    return (np.asarray(data.features, np.float64), np.asarray(data.aux_target, np.float64),
            training_bars(data, np))


def staged_jobs(data: FoldData, cfg: RunConfig) -> list[FitJob]:
    """`fit_gbm`'s fits: one regressor a leaf count of `GBM_LEAVES`, with its staged forecasts
    at `candidate_iterations` (`tree_fits.staged_fit`)."""
    x, y, rows = _fit_arrays(data)
    counts = candidate_iterations(cfg)
    return [FitJob(fit_key("gbm staged", (x, y, rows), _settings(leaves=leaves,
                                                                 iterations=counts)),
                   staged_fit, (x, y, rows, leaves, counts)) for leaves in GBM_LEAVES]


def fit_gbm(data: FoldData, val_steps: int, cfg: RunConfig,
            pool: FitPool | None = None) -> GbmFit:
    """Fit on train, choose leaves and iterations on validation (module docstring);
    `val_steps` as for `baselines.ridge.fit_ridge`; the fits made by `pool` (default: here)."""
    pool = pool or FitPool()
    fits = [pool.result(job) for job in staged_jobs(data, cfg)]
    y_hat, models = np.concatenate([f[0] for f in fits]), [f[1] for f in fits]
    rows, counts = training_bars(data, np), candidate_iterations(cfg)
    scale = np.maximum(np.sqrt(np.mean(y_hat[:, rows] ** 2, axis=1)), 1e-12).astype(np.float32)
    sharpes, returns = forecast_val_returns(Forecast(y_hat=y_hat, scale=scale), data,
                                            val_steps, cfg)
    sharpes = np.asarray(sharpes, np.float64)
    best = int(np.argmax(np.where(np.isnan(sharpes), -np.inf, sharpes)))
    n_it = len(counts)
    return GbmFit(forecast=Forecast(y_hat=y_hat[best], scale=scale[best]),
                  leaves=GBM_LEAVES[best // n_it], iterations=counts[best % n_it],
                  val_sharpe=sharpes.reshape(len(GBM_LEAVES), n_it),
                  val_returns=np.asarray(returns, np.float64), model=models[best // n_it])


def predict_trees(model, iterations: int, features: np.ndarray) -> np.ndarray:
    """ŷ [T] (float64) of `model`'s first `iterations` boosting iterations on `features`
    [T, F] (the normalised market variables): `GbmFit.forecast.y_hat` on a fold's own bars."""
    x = np.asarray(features, np.float64)
    with tree_threads():
        for i, y_hat in enumerate(model.staged_predict(x), 1):
            if i == iterations:
                return y_hat
    raise ValueError(f"the trees hold fewer than {iterations} iterations")


def save_trees(path: Path, fit: GbmFit) -> None:
    """`fit`'s regressor, pickled to `path` (written to a temporary file, then renamed) for
    acting on new bars (`load_trees`); the sklearn version is checked on load."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        pickle.dump({"sklearn": sklearn_version(), "iterations": fit.iterations,
                     "model": fit.model}, fh)
    os.replace(tmp, path)


def load_trees(path: Path):
    """(regressor, iterations) saved by `save_trees`; InputError naming the file when it is
    missing, unreadable or from another scikit-learn version. A pickle runs code when loaded:
    only a run directory one trusts should be acted on. The regressor is stored pickled
    inside the file (older runs: the regressor itself)."""
    try:
        with open(path, "rb") as fh:
            saved = pickle.load(fh)
        version = saved.get("sklearn")
        if version != sklearn_version():
            raise InputError(f"{path}: trees saved by scikit-learn {version}, this is "
                             f"{sklearn_version()}: install that version to act on new bars")
        model = saved["model"]
        model = pickle.loads(model) if isinstance(model, bytes) else model
    except FileNotFoundError:
        raise InputError(f"{path}: not found: the run's trees (its tree forecast) are "
                         "missing") from None
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError,
            KeyError) as err:
        raise InputError(f"{path}: cannot read the run's trees: {err}") from None
    return model, int(saved["iterations"])


@dataclass(frozen=True)
class TreeForecastChoice:
    """Whether a fold's network sees the trees' forecast, what decided it (per-bar
    validation Sharpes, the baselines' selection criterion) and, where used, the column's
    train-segment normaliser (`with_tree_forecast`: what acting on new bars needs)."""

    used: bool
    gbm_val_sharpe: float  # the gbm baseline's best over its leaves and iterations
    ridge_val_sharpe: float  # ridge's best over its penalties
    column_mean: float | None = None
    column_std: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        """One line for the run's log, e.g. 'used (validation Sharpe a bar: gbm 0.051 > ridge
        0.032)'."""
        verdict = ("used", ">") if self.used else ("zero", "<=")
        return (f"{verdict[0]} (validation Sharpe a bar: gbm {self.gbm_val_sharpe:.3f} "
                f"{verdict[1]} ridge {self.ridge_val_sharpe:.3f})")


def tree_forecast_trials(fit: GbmFit, ridge_returns: np.ndarray,
                         iterations: tuple[int, ...], val_len: int) -> dict[str, np.ndarray]:
    """The candidates whose validation returns chose a fold's tree-forecast column, each one
    trial of the run's DSR and PBO: every gbm (leaves, iterations) of the grid the column's
    fit was chosen from, and every ridge penalty its on/off choice was compared with
    (`ridge_returns` [len(RIDGE_ALPHAS), ≥ val_len]); name → returns [val_len] over the
    validation block's bars."""
    names = [f"gbm leaves={leaves} iterations={n}" for leaves in GBM_LEAVES for n in iterations]
    out = dict(zip(names, np.asarray(fit.val_returns, np.float64)[:, :val_len], strict=True))
    out |= {f"ridge alpha={a:g}": r[:val_len] for a, r in
            zip(RIDGE_ALPHAS, np.asarray(ridge_returns, np.float64), strict=True)}
    return out


def _best(sharpes: np.ndarray) -> float:
    """The best of candidate Sharpes, NaN (a flat candidate) counting as −∞."""
    return float(np.max(np.where(np.isnan(sharpes), -np.inf, sharpes)))


def choose_tree_forecast(fit: GbmFit, ridge_val_sharpe: np.ndarray) -> TreeForecastChoice:
    """`--tree-forecast validation` in a fold: the column is used iff max gbm validation
    Sharpe > max ridge validation Sharpe (`ridge_val_sharpe`: ridge's per-penalty Sharpes,
    `baselines.ridge.RidgeFit.val_sharpe`), i.e. where the trees find more on validation than
    a linear forecast of the same features does."""
    gbm_best = _best(np.asarray(fit.val_sharpe, np.float64))
    ridge_best = _best(np.asarray(ridge_val_sharpe, np.float64))
    return TreeForecastChoice(used=gbm_best > ridge_best, gbm_val_sharpe=gbm_best,
                              ridge_val_sharpe=ridge_best)


def cross_fit_blocks(data: FoldData) -> list[tuple[int, int]]:
    """The train segment [a, b) cut into `CROSS_FIT_BLOCKS` contiguous half-open blocks of
    (nearly) equal length."""
    a, b = (int(v) for v in np.asarray(data.train))
    edges = np.linspace(a, b, CROSS_FIT_BLOCKS + 1).round().astype(int)
    return list(zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True))


def cross_fitted_forecast(data: FoldData, fit: GbmFit, gap: int,
                          pool: FitPool | None = None) -> np.ndarray:
    """The trees' forecast ŷ at every bar [T_b] (float64), no train bar's from trees fit on it.

    The train segment [a, b) is cut into `CROSS_FIT_BLOCKS` contiguous blocks B_j = [l_j, h_j);
    ŷ on B_j comes from trees of `fit`'s leaves and iterations fit on the training rows
    (`training_bars`) outside [l_j − gap, h_j + gap) (`gap`: the fold's purge gap, so no row
    next to the block, whose next-bar target overlaps the block's bars, is fit on); every
    other bar's ŷ is `fit`'s own, from all training rows. Only train rows are fit on; the fits
    are made by `pool` (default: here)."""
    y_hat = np.asarray(fit.forecast.y_hat, np.float64).copy()
    for (lo, hi), block in _block_forecasts(data, fit.leaves, fit.iterations, gap, pool):
        y_hat[lo:hi] = block
    return y_hat


def block_jobs(data: FoldData, leaves: int, iterations: int, gap: int) -> list[FitJob]:
    """The fits of `_block_forecasts`, one a cross-fit block B_j = [l_j, h_j) in
    `cross_fit_blocks` order: trees of `leaves` and `iterations` fit on the training rows
    outside [l_j − gap, h_j + gap) (`tree_fits.block_fit`)."""
    x, y, rows = _fit_arrays(data)
    t = np.arange(len(y))
    jobs = []
    for lo, hi in cross_fit_blocks(data):
        use = rows & ((t < lo - gap) | (t >= hi + gap))
        key = fit_key("gbm block", (x, y, use), _settings(
            leaves=leaves, iterations=iterations, block=(lo, hi)))
        jobs.append(FitJob(key, block_fit, (x, y, use, leaves, iterations, lo, hi)))
    return jobs


def _block_forecasts(data: FoldData, leaves: int, iterations: int, gap: int,
                     pool: FitPool | None = None) -> list[tuple[tuple[int, int], np.ndarray]]:
    """((l_j, h_j), ŷ on B_j [h_j − l_j]) for each cross-fit block B_j of the train segment
    (`cross_fitted_forecast`, `block_jobs`), each fit cached by its inputs (`tree_cache`)."""
    pool = pool or FitPool()
    return [(block, pool.result(job)) for block, job in zip(
        cross_fit_blocks(data), block_jobs(data, leaves, iterations, gap), strict=True)]


@dataclass(frozen=True)
class Trust:
    """How much a fold's forecast is trusted as a view on the prior (`--view trusted`)."""

    t: float  # the robust t of the target's within-block slope on the cross-fitted forecast
    w: float  # the trust, max(0, 1 − 1/t²) where t > 1, else 0
    bars: int  # the train bars it was measured on

    def to_dict(self) -> dict:
        return asdict(self)


def trust_trees(cfg: RunConfig) -> tuple[int, int]:
    """(leaves, iterations) of the trees `forecast_trust` measures with: the middle of the gbm
    baseline's grid (`GBM_LEAVES`, `candidate_iterations`), fixed, so that nothing of the
    validation block, on which the baseline chooses its own, enters the trust."""
    counts = candidate_iterations(cfg)
    return GBM_LEAVES[len(GBM_LEAVES) // 2], counts[len(counts) // 2]


def forecast_trust(data: FoldData, gap: int, cfg: RunConfig,
                   pool: FitPool | None = None) -> Trust:
    """The trust w of `--view trusted`, from the fold's train segment [a, b) alone: trees of
    `trust_trees` cross-fitted on its blocks (`_block_forecasts`: no bar's forecast from trees
    fit on it or beside it), and t, the heteroskedasticity-consistent (White) t-statistic of
    the slope of the next-bar target y on that forecast f over the training rows of [a, b),
    both taken within each block (each less its block's mean: the forecast is trusted for
    where it moves, not for a level, which belongs to the prior; a forecast fit away from a
    block is also pulled away from that block's own mean, which would bias the slope down):

        β = Σ f·y / Σ f²,  se² = Σ f²·(y − β·f)² / (Σ f²)²,  t = β/se

    (robust to the clustered, fat-tailed volatility of returns, under which the plain
    correlation's ρ̂·√n overstates |t|), and the James–Stein weight

        w = max(0, 1 − 1/t²) for t > 1, else 0,

    the positive-part shrinkage of a signal measured with unit noise: 0 for t ≤ 1 (no
    direction the trees predict out of sample), → 1 as the evidence grows (t = 2: 0.75,
    t = 4: 0.94). It measures what the market's features predict, by trees; the network's own
    forecast, which it weighs, is fit to the same target on the same features."""
    a, b = (int(v) for v in np.asarray(data.train))
    rows = training_bars(data, np)
    y = np.asarray(data.aux_target, np.float64)
    f_parts, y_parts = [], []
    for (lo, hi), block in _block_forecasts(data, *trust_trees(cfg), gap, pool):
        keep = rows[lo:hi]
        if keep.sum() >= 2:
            f_parts.append(block[keep] - block[keep].mean())
            y_parts.append(y[lo:hi][keep] - y[lo:hi][keep].mean())
    n = int(rows[a:b].sum())
    f, r = (np.concatenate(p) if p else np.zeros(0) for p in (f_parts, y_parts))
    if len(f) - len(f_parts) < 2 or not f.any() or not r.any():
        return Trust(t=0.0, w=0.0, bars=n)
    beta = (f @ r) / (f @ f)
    t = float((f @ r) / np.sqrt(np.sum(f**2 * (r - beta * f) ** 2)))
    return Trust(t=t, w=max(0.0, 1.0 - 1.0 / t**2) if t > 1 else 0.0, bars=n)


def zero_column(data: FoldData) -> jax.Array:
    """The tree forecast's column of a fold that does not use it: zeros [T_b, 1] float32 on
    the device, the shape and placement of a used one."""
    return jax.device_put(np.zeros((data.features.shape[0], 1), np.float32))


def with_tree_forecast(data: FoldData, fit: GbmFit, gap: int, clip: float,
                       choice: TreeForecastChoice, pool: FitPool | None = None
                       ) -> tuple[FoldData, TreeForecastChoice]:
    """`data` with the cross-fitted forecast (`cross_fitted_forecast`) as its
    `tree_forecast` column [T_b, 1], normalised with its train-segment mean and std and
    clipped to ±`clip` as the other market variables are, and `choice` with that mean and
    std; a `choice` not used: a column of zeros (a constant, which tells the network
    nothing), so every fold has the same variables."""
    if not choice.used:
        return data.replace(tree_forecast=zero_column(data)), choice
    y_hat = cross_fitted_forecast(data, fit, gap, pool)[:, None]
    a, b = (int(v) for v in np.asarray(data.train))
    norm = fit_normaliser(y_hat, a, b)
    choice = replace(choice, column_mean=float(norm.mean[0]), column_std=float(norm.std[0]))
    return data.replace(tree_forecast=jax.device_put(normalise(y_hat, norm, clip))), choice


def tree_column(choice: dict, trees: tuple | None, features: np.ndarray,
                clip: float) -> np.ndarray:
    """The tree-forecast column [T, 1] (float32) of new bars for a fold whose choice is
    `choice` (`TreeForecastChoice.to_dict`, as saved): zeros where it was not used, else
    the saved trees' (`load_trees`) forecast normalised with the column's saved train
    statistics and clipped, as `with_tree_forecast` made it on the fold's val and test bars."""
    if not choice["used"]:
        return np.zeros((len(features), 1), np.float32)
    model, iterations = trees
    y_hat = predict_trees(model, iterations, features)[:, None]
    norm = Normaliser(mean=np.asarray([choice["column_mean"]], np.float32),
                      std=np.asarray([choice["column_std"]], np.float32))
    return normalise(y_hat, norm, clip)


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
    `result(k)` raises the fit's error, if any. `made`: fits already made (`Prepared.gbm_fits`,
    with `--tree-forecast`), by fold, which are used as they are."""

    def __init__(self, data: list[FoldData], val_steps: int, cfg: RunConfig, background: bool,
                 made: dict[int, GbmFit] | None = None):
        self._data, self._val_steps, self._cfg = data, val_steps, cfg
        self._made = dict(made or {})
        self._fits: dict[int, Future] = {}
        todo = [k for k in range(len(data)) if k not in self._made]
        if background and todo:
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gbm")
            self._fits = {k: pool.submit(_unwatched_fit, data[k], val_steps, cfg) for k in todo}
            pool.shutdown(wait=False)  # the thread ends after the last fit

    def result(self, k: int) -> GbmFit:
        if k in self._made:
            return self._made[k]
        if k in self._fits:
            return self._fits[k].result()
        return fit_gbm(self._data[k], self._val_steps, self._cfg)
