"""Stage 1 of a run: validate the config, load the bars, compute features, lay out the folds.

`prepare(cfg)` → `Prepared`, everything known before training, the tree forecast's fits
included (`FoldTrees`, made once by `with_trees`). `prepare(cfg, fit_trees=False)` validates
and reads everything in seconds, so that a command refuses bad input before any fit, and the
run fits the trees inside its timed stages (`run.experiment`). `Prepared.fold_data(k)` moves fold
k's arrays (features normalised with fold k's train statistics) to the device; it refuses to
before the trees a `--tree-forecast validation` run needs are fit.

`--data A,B,C` pools instruments: A is the target, the one traded, validated, tested and
reported; B and C only add training episodes, from their bars inside each fold's train dates
(`pool_segments`), each normalised on its own train-date bars.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from dataclasses import dataclass, field

import jax
import numpy as np

from rl_trader.baselines.gbm import (
    GbmFit,
    TreeForecastChoice,
    Trust,
    block_jobs,
    candidate_iterations,
    choose_tree_forecast,
    fit_gbm,
    forecast_trust,
    staged_jobs,
    tree_forecast_trials,
    trust_trees,
    with_tree_forecast,
    zero_column,
)
from rl_trader.baselines.ridge import fit_ridge
from rl_trader.baselines.suite import N_RANDOM_SEEDS
from rl_trader.baselines.tree_fits import FitJob, FitPool, fit_workers
from rl_trader.config import RunConfig
from rl_trader.data import Bars, data_specs, load, load_market
from rl_trader.data.buckets import bucket
from rl_trader.data.features import MarketFeatures, compute_features
from rl_trader.data.fold_data import FoldData, PoolSegment, make_fold_data, with_trust
from rl_trader.data.folds import Fold, make_folds
from rl_trader.errors import InputError
from rl_trader.training.population import Cohort, build

TREE_FORECAST_NAME = "gbm_forecast"


@dataclass(frozen=True)
class Prepared:
    """Everything known before training: data, features, the fold layout, annualisation."""

    cfg: RunConfig
    bars: Bars
    features: MarketFeatures
    folds: list[Fold]
    periods_per_year: float
    oracle_position: np.ndarray | None  # [T] the oracle's target of a synthetic market
    # pooled instruments (`--data target,other,…`): bars and features, and per fold each one's
    # PoolSegment (its train-date bars)
    pool: tuple[tuple[Bars, MarketFeatures], ...] = ()
    pool_segments: tuple[tuple[PoolSegment, ...], ...] = ()
    # with --tree-forecast validation or --view trusted, each fold's trees (`fold_trees`, made
    # by `with_trees`)
    trees: tuple[FoldTrees, ...] = field(default=(), compare=False, repr=False)

    @property
    def market_names(self) -> tuple[str, ...]:
        """The network's market variables: the features', then `TREE_FORECAST_NAME` with
        `--tree-forecast` (`FoldData.tree_forecast`)."""
        extra = (TREE_FORECAST_NAME,) if self.cfg.features.tree_forecast != "off" else ()
        return self.features.names + extra

    @property
    def pool_sources(self) -> list[str]:
        """The pooled instruments as given to `--data` (training episodes only)."""
        return data_specs(self.cfg.data.path)[1:]

    @property
    def data_sha256(self) -> str:
        """The target's sha256, or with pooled instruments the sha256 of all of theirs."""
        if not self.pool:
            return self.bars.sha256
        shas = [self.bars.sha256] + [b.sha256 for b, _ in self.pool]
        return hashlib.sha256(",".join(shas).encode()).hexdigest()

    @property
    def val_len(self) -> int:
        """Bars per validation block (equal in every fold: `make_folds` guarantees it)."""
        return self.folds[0].val[1] - self.folds[0].val[0]

    @property
    def test_len(self) -> int:
        """Bars per test block (equal in every fold)."""
        return self.folds[0].test[1] - self.folds[0].test[0]

    @property
    def val_steps(self) -> int:
        """Steps a validation rollout runs (≥ `val_len`), see `_bucket_steps`."""
        return self._bucket_steps[0]

    @property
    def test_steps(self) -> int:
        """Steps a test rollout runs (≥ `test_len`), see `_bucket_steps`."""
        return self._bucket_steps[1]

    @functools.cached_property
    def _bucket_steps(self) -> tuple[int, int]:
        """(validation, test) rollout steps shared by every file length in this one's shape
        bucket: the segment lengths the fold layout would have on `bucket(T)` bars (block
        lengths grow with T), each rounded up to its own bucket."""
        cfg = self.cfg
        widest = _layout(bucket(len(self.bars)), self.features, cfg)[0]
        return (bucket(max(self.val_len, widest.val[1] - widest.val[0])),
                bucket(max(self.test_len, widest.test[1] - widest.test[0])))

    @property
    def gbm_fits(self) -> dict[int, GbmFit]:
        """The gbm baseline's fits `prepare` made (with the tree forecast), by fold."""
        return {k: t.fit for k, t in enumerate(self.trees)}

    @property
    def tree_forecast_choices(self) -> dict[int, TreeForecastChoice]:
        """Each fold's tree-forecast choice (with `--tree-forecast validation`), by fold."""
        return {k: t.choice for k, t in enumerate(self.trees) if t.choice is not None}

    @property
    def tree_forecast_trials(self) -> dict[int, dict[str, np.ndarray]]:
        """The candidates each fold's choice was made on (`gbm.tree_forecast_trials`: trials
        of the DSR and PBO), by fold."""
        return {k: t.trials for k, t in enumerate(self.trees) if t.choice is not None}

    @property
    def trusts(self) -> dict[int, Trust]:
        """Each fold's trust in its forecast (with `--view trusted`), by fold."""
        return {k: t.trust for k, t in enumerate(self.trees) if t.trust is not None}

    @property
    def wants_trees(self) -> bool:
        """Whether the run needs each fold's trees: for the tree forecast's column
        (`--tree-forecast validation`) or for the trust in the forecast (`--view trusted`)."""
        return self.cfg.features.tree_forecast != "off" or self.cfg.env.view == "trusted"

    @property
    def needs_trees(self) -> bool:
        """Whether the trees it wants are still to be fit (`with_trees`)."""
        return self.wants_trees and not self.trees

    def fold_data(self, k: int) -> FoldData:
        """Fold k's device arrays, normalised with statistics fit on its train segment; with
        `--tree-forecast validation`, the trees' column beside them (`FoldTrees.column`).
        Refused (RuntimeError) while the trees are still to be fit: the column would be
        missing."""
        if self.needs_trees:
            raise RuntimeError("Prepared.fold_data before the tree forecast's fits: call "
                               "with_trees(prep) first")
        data = self._arrays(k)
        if not self.trees:
            return data
        trees = self.trees[k]
        if trees.column is not None:
            data = data.replace(tree_forecast=trees.column)
        if trees.trust is not None:
            data = data.replace(trust=with_trust(trees.trust.w))
        return data

    def placeholder_fold_data(self, k: int) -> FoldData:
        """Fold k's device arrays with the trees' values at zero (the trust 0, the tree
        forecast's column zeros): the shapes, dtypes and placement of `fold_data(k)`, known
        before the trees are fit, for compiling its programs ahead (`run.ahead`)."""
        data = self._arrays(k)
        if self.cfg.features.tree_forecast == "off":
            return data
        return data.replace(tree_forecast=zero_column(data))

    def _arrays(self, k: int) -> FoldData:
        """Fold k's device arrays without the tree forecast's column (zeros)."""
        return make_fold_data(self.bars.open, self.bars.close, self.features, self.folds[k],
                              self.cfg.features.clip, self.pool_segments[k] if self.pool else ())


@dataclass(frozen=True)
class FoldTrees:
    """A fold's trees: the gbm baseline's fit; with `--tree-forecast validation`, whether
    validation wants its column (`gbm.choose_tree_forecast`), the candidates that choice was
    made on (trials of the DSR and PBO) and the column the network sees [T_b, 1] (zeros where
    not used); with `--view trusted`, the trust in the forecast (`gbm.forecast_trust`).
    What a mode does not make is None (trials: empty)."""

    fit: GbmFit
    choice: TreeForecastChoice | None
    trials: dict[str, np.ndarray]
    column: jax.Array | None
    trust: Trust | None


def fold_jobs(prep: Prepared, k: int) -> list[FitJob]:
    """The fits of fold k's trees that depend on nothing else: the gbm baseline's
    (`gbm.staged_jobs`) and, with `--view trusted`, the trust's cross-fit blocks; the tree
    forecast's blocks wait for the gbm baseline's choice of leaves and iterations."""
    cfg, data = prep.cfg, prep._arrays(k)
    trust = block_jobs(data, *trust_trees(cfg), prep.folds[k].gap) if _trusts(cfg) else []
    return staged_jobs(data, cfg) + trust


def _trusts(cfg: RunConfig) -> bool:
    """Whether a fold's trees include the trust in the forecast (`--view trusted`)."""
    return cfg.env.view == "trusted"


def fold_trees(prep: Prepared, k: int, pool: FitPool | None = None) -> FoldTrees:
    """Fold k's trees on its own arrays: the gbm fit, ridge's (made for the choice alone, as
    the baselines' scoring makes it again), the choice and the cross-fitted column
    (`gbm.with_tree_forecast`); the fits made by `pool` (default: here)."""
    cfg, data, gap = prep.cfg, prep._arrays(k), prep.folds[k].gap
    pool = pool or FitPool()
    fit = fit_gbm(data, prep.val_steps, cfg, pool)
    if cfg.features.tree_forecast == "off":
        trust = forecast_trust(data, gap, cfg, pool) if _trusts(cfg) else None
        return FoldTrees(fit=fit, choice=None, trials={}, column=None, trust=trust)
    ridge = fit_ridge(data, prep.val_steps, cfg)
    choice = choose_tree_forecast(fit, np.asarray(ridge.val_sharpe))
    if choice.used:  # its blocks fit while the trust's are read
        pool.submit(block_jobs(data, fit.leaves, fit.iterations, gap))
    trust = forecast_trust(data, gap, cfg, pool) if _trusts(cfg) else None
    with_column, choice = with_tree_forecast(data, fit, gap, cfg.features.clip, choice, pool)
    trials = tree_forecast_trials(fit, np.asarray(ridge.val_returns), candidate_iterations(cfg),
                                  prep.val_len)
    return FoldTrees(fit=fit, choice=choice, trials=trials, column=with_column.tree_forecast,
                     trust=trust)


def gbm_fit(prep: Prepared, k: int) -> GbmFit:
    """Fold k's gbm baseline: the fit `prepare` made, else made now (`gbm.fit_gbm`)."""
    return prep.trees[k].fit if prep.trees else fit_gbm(prep.fold_data(k), prep.val_steps,
                                                        prep.cfg)


def _layout(n_bars: int, feats: MarketFeatures, cfg: RunConfig) -> list[Fold]:
    """The folds over `n_bars` bars: the first usable bar is the features' warm-up plus the
    look-back."""
    return make_folds(n_bars, feats.first_valid + cfg.features.lookback, cfg.folds,
                      cfg.features.lookback, cfg.agent.n_step)


def _pooled(spec: str, target: Bars, seen: list[str]) -> Bars:
    """A pooled instrument's bars; refused (InputError) when it repeats the target or another
    pooled instrument (the same bytes), or when its bars are of another frequency than the
    target's (inferred bars per year more than 2× apart)."""
    bars = load(spec)
    if bars.sha256 == target.sha256 or bars.sha256 in seen:
        raise InputError(f"option --data: '{spec}' repeats an instrument already in the list")
    mine, theirs = bars.periods_per_year(), target.periods_per_year()
    if not 0.5 <= mine / theirs <= 2.0:
        raise InputError(f"option --data: '{spec}' has about {mine:g} bars per year, the target "
                         f"{theirs:g}: pooled instruments must share the target's bar frequency")
    return bars


def pool_segments(target: Bars, folds: list[Fold], source: str, bars: Bars,
                  feats: MarketFeatures, cfg: RunConfig) -> list[PoolSegment]:
    """Per fold, a pooled instrument's bars dated inside the fold's train dates (the first
    train bar's date to the last's, both included) and past its own warm-up (features and
    look-back); raises InputError naming the file and fold when fewer than n_step + 2 bars
    remain."""
    first = feats.first_valid + cfg.features.lookback
    out = []
    for f in folds:
        lo, hi = target.dates[f.train[0]], target.dates[f.train[1] - 1]
        start = max(int(np.searchsorted(bars.dates, lo, "left")), first)
        end = int(np.searchsorted(bars.dates, hi, "right"))
        need = cfg.agent.n_step + 2
        if end - start < need:
            raise InputError(f"option --data: '{source}' has {max(end - start, 0)} usable "
                             f"bars in fold {f.index}'s train dates {str(lo)[:10]}..{str(hi)[:10]}"
                             f" (at least {need} after its first {first} bars of warm-up)")
        out.append(PoolSegment(open=bars.open, close=bars.close, features=feats.values,
                               start=start, end=end))
    return out


def with_trees(prep: Prepared, spare_cores: int = 0) -> Prepared:
    """`prep` with each fold's trees (`fold_trees`) where `--tree-forecast validation` or
    `--view trusted` wants them (`Prepared.wants_trees`) and they are not yet fit; else `prep`
    itself. The fits the tree cache lacks are made side by side in worker processes
    (`tree_fits.FitPool`; `tree_fits.fit_workers`: a core each, less `spare_cores`): every
    fold's that depend on nothing else first (`fold_jobs`), then the folds in order, each
    one's tree-forecast blocks once its gbm fit has chosen their leaves and iterations. On
    the 2-core CPU the default run's fits took 5.0–5.1 s so, 6.0–6.2 s one after another in
    this process, the same bits (2026-12-07)."""
    if not prep.needs_trees:
        return prep
    with FitPool(fit_workers(spare_cores)) as pool:
        pool.submit(job for k in range(len(prep.folds)) for job in fold_jobs(prep, k))
        trees = tuple(fold_trees(prep, k, pool) for k in range(len(prep.folds)))
    return dataclasses.replace(prep, trees=trees)


def prepare(cfg: RunConfig, fit_trees: bool = True) -> Prepared:
    """Validate the config, load and check the data, compute features, lay out the folds and,
    with `fit_trees`, fit the tree forecast's trees (`with_trees`; the slow part)."""
    cfg.validate()
    specs = data_specs(cfg.data.path)
    if len(specs) > 1:  # the trees and the trust are fit on the target's bars alone
        needs = [f"--{flag} {off}" for flag, value, off in (
            ("tree-forecast", cfg.features.tree_forecast, "off"),
            ("view", cfg.env.view, "excess")) if value != off]
        if needs:
            raise InputError(f"option --data {cfg.data.path!r}: pooled instruments need "
                             f"{' '.join(needs)} (the trees' column and the trust in the "
                             "forecast are fit on the target's bars alone)")
    bars, oracle_position = load_market(specs[0])
    feats = compute_features(bars.open, bars.high, bars.low, bars.close, bars.volume)
    folds = _layout(len(bars), feats, cfg)
    ppy = cfg.data.periods_per_year or bars.periods_per_year()
    pool = []
    for spec in specs[1:]:
        other = _pooled(spec, bars, [b.sha256 for b, _ in pool])
        pool.append((other, compute_features(other.open, other.high, other.low, other.close,
                                             other.volume)))
    segments = tuple(zip(*(pool_segments(bars, folds, spec, b, f, cfg)
                           for spec, (b, f) in zip(specs[1:], pool, strict=True)),
                         strict=True)) if pool else ()
    prep = Prepared(cfg=cfg, bars=bars, features=feats, folds=folds, periods_per_year=ppy,
                    oracle_position=oracle_position, pool=tuple(pool), pool_segments=segments)
    return with_trees(prep) if fit_trees else prep


def build_cohort(prep: Prepared, devices: int | None = None,
                 placeholder: bool = False) -> Cohort:
    """Stage 2 of a run: the population of every fold's members (`training.population.build`)
    over the first `devices` local devices (default: all). With `placeholder`, on
    `Prepared.placeholder_fold_data`: the run's shapes and programs before its trees are fit,
    whose values mean nothing."""
    data = prep.placeholder_fold_data if placeholder else prep.fold_data
    return build(prep.cfg, [data(k) for k in range(len(prep.folds))], devices, N_RANDOM_SEEDS)
