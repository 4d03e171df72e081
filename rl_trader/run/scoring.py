"""Scoring a finished run: each fold's best checkpoint once on test, beside the baselines.

A fold stopped before its first checkpoint (non-finite training) has no test figures; the
stitched record and the headline then cover the folds that were scored, and say so.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import jax
import numpy as np
from jax.sharding import Mesh

from rl_trader.baselines.gbm import GbmFit, GbmFits
from rl_trader.baselines.oracle import oracle_rollout
from rl_trader.baselines.suite import BASELINES, N_RANDOM_SEEDS, baseline_rollouts
from rl_trader.config import RunConfig
from rl_trader.data.buckets import trim
from rl_trader.data.fold_data import FoldData, pad_bars
from rl_trader.env import PORTFOLIO_NAMES
from rl_trader.evaluation.headline import headline
from rl_trader.evaluation.metrics import performance, prior_figures, sharpe_of
from rl_trader.evaluation.record import FoldEntry, Performance, PriorFigures, RunSummary
from rl_trader.evaluation.rollout import Rollout
from rl_trader.run.checkpoint import FoldCheckpoints, export_safetensors
from rl_trader.run.prepare import Prepared
from rl_trader.runtime.compile_watch import unwatched
from rl_trader.runtime.devices import describe_device, replicated
from rl_trader.training.population import Population, RunKeys, make_run_keys, stack, take


def perf_of(r: Rollout, ppy: float) -> dict[str, float]:
    return performance(np.asarray(r.returns, np.float64), np.asarray(r.position, np.float64),
                       np.asarray(r.turnover, np.float64), ppy)


def _named(names, weights) -> dict[str, float]:
    mean = np.asarray(weights, np.float64).mean(0)
    return {n: float(x) for n, x in zip(names, mean, strict=True)}


def test_figures(acting: Rollout, policies: dict[str, Rollout], metrics: dict[str, dict],
                 rand: Rollout, priors: np.ndarray, market_names, cfg: RunConfig,
                 ppy: float) -> dict:
    """A fold entry's figures on the bars it was scored on, the one builder of them (scoring's
    test blocks and a backtest's new bars): `acting` the network's own rollout (its VSN
    weights), `policies` and `metrics` as `compare` gives them (the fold's policy under
    "agent"), `rand` the random policy's rollouts [R, bars], `priors` [bars] each decision's
    prior; keyword arguments of `FoldEntry`."""
    _, rand_sharpes = _over_seeds(rand, ppy)
    return dict(
        test_sharpe=metrics["agent"]["sharpe"],
        buy_and_hold_test_sharpe=metrics["buy_and_hold"]["sharpe"],
        market_vsn_weights=_named(market_names, acting.market_weights),
        portfolio_vsn_weights=_named(PORTFOLIO_NAMES, acting.portfolio_weights),
        baseline_test_sharpes={name: metrics[name]["sharpe"] for name in BASELINES
                               if name in metrics},
        random_test_sharpe_mean=float(np.mean(rand_sharpes)),
        random_test_sharpe_std=float(np.std(rand_sharpes, ddof=1)),
        metrics={name: Performance(**m) for name, m in metrics.items()},
        prior=PriorFigures(**prior_figures(np.asarray(policies["agent"].position, np.float64),
                                           priors, cfg.env.prior, ppy)))


def compare(agent: Rollout, data: FoldData, start: int, length: int, steps: int,
            cfg: RunConfig, ppy: float, val_steps: int | None, random_keys: np.ndarray,
            gbm: GbmFit | None = None, base: dict[str, Rollout] | None = None
            ) -> tuple[dict[str, Rollout], dict[str, dict], Rollout, dict]:
    """The agent's rollout beside the baselines over bars [start, start + length) of `data`,
    same fills and costs: (rollouts by name, the random policy's first seed standing for it),
    metrics by name (the random policy's: the mean over `N_RANDOM_SEEDS` seeds), the random
    policy's rollouts (leaves [R, bars]) and what the gbm baseline chose ({} without it). The
    baselines run `steps` ≥ `length` steps (a shape bucket, `Prepared.test_steps`), cut back
    to `length`. `val_steps`: the steps of the validation rollouts on which ridge and gbm are
    chosen (`Prepared.val_steps`); None (a backtest on new bars, which has no train or
    validation block) leaves out the baselines fit to the training data
    (`baselines.suite.FITTED_BASELINES`). `random_keys`: the random policy's seeds' keys
    [R, 2] (`random_keys`). `gbm`: the gbm baseline's fit to `data` (`gbm.GbmFits`); None
    leaves gbm out. `base`: the baselines' rollouts of these arguments, made already
    (`BaselinesOnTest`); None makes them here."""
    fit = gbm
    if base is None:
        base = baselines_over(data, start, steps, cfg, random_keys, val_steps, fit)
    base = dict(base)
    rand = trim(base.pop("random"), length, axis=1)
    base = trim(base, length, axis=0)
    policies = {"agent": agent, **base, "random": take(rand, 0)}
    metrics = {name: perf_of(r, ppy) for name, r in policies.items() if name != "random"}
    metrics["random"], _ = _over_seeds(rand, ppy)
    chosen = {} if fit is None else {"leaves": fit.leaves, "iterations": fit.iterations}
    return policies, metrics, rand, chosen


def baselines_over(data: FoldData, start: int, steps: int, cfg: RunConfig,
                   random_keys: np.ndarray, val_steps: int | None,
                   gbm: GbmFit | None) -> dict[str, Rollout]:
    """`baseline_rollouts` over `steps` bars from `start` (the gbm baseline's forecast from
    `gbm`, None: no gbm), as host arrays."""
    return jax.tree.map(np.asarray, baseline_rollouts(
        data, start, steps, cfg, random_keys, val_steps, None if gbm is None else gbm.forecast))


class BaselinesOnTest:
    """Each fold's baselines over its test block (`baselines_over`) and its gbm fit, made
    once. With `background` (an accelerator run: `experiment.host_is_idle`) they are made on a
    host thread started here, fold after fold, while the run trains, so that scoring finds
    them, and their program, ready. They read the fold's data, its gbm fit (`gbm_fits`) and
    the run's random-policy keys, never the agent, and are deterministic: they equal the
    rollouts made at scoring time, and nothing chosen during training sees them. That
    thread's compilations are left out of the run's compile log (`compile_watch.unwatched`).
    Otherwise fold k's are made when `result(k)` asks. `result(k)` raises their error, if
    any."""

    def __init__(self, prep: Prepared, fold_data: list[FoldData], gbm_fits: GbmFits,
                 rand_keys: np.ndarray, background: bool) -> None:
        self._prep, self._data, self._gbm, self._keys = prep, fold_data, gbm_fits, rand_keys
        self._made: dict[int, Future] = {}
        if background:
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-baselines")
            self._made = {k: pool.submit(self._unwatched, k) for k in range(len(fold_data))}
            pool.shutdown(wait=False)  # the thread ends after the last fold

    def _make(self, k: int) -> tuple[dict[str, Rollout], GbmFit]:
        prep, fit = self._prep, self._gbm.result(k)
        return baselines_over(self._data[k], prep.folds[k].test[0], prep.test_steps, prep.cfg,
                              self._keys, prep.val_steps, fit), fit

    def _unwatched(self, k: int) -> tuple[dict[str, Rollout], GbmFit]:
        with unwatched():
            return self._make(k)

    def result(self, k: int) -> tuple[dict[str, Rollout], GbmFit]:
        """Fold k's baselines over its test block (host arrays) and its gbm fit."""
        return self._made[k].result() if k in self._made else self._make(k)


def test_keys(keys: RunKeys, n: int, cfg: RunConfig) -> np.ndarray:
    """The test rollouts' keys of `n` scored folds, split(PRNGKey(seed + 1), n): the first `n`
    of the run's (`RunKeys.test`), which are those under jax's partitionable threefry (its
    default), else split again."""
    if n == len(keys.test) or jax.config.jax_threefry_partitionable:
        return keys.test[:n]
    return make_run_keys(cfg.seed, [], 0, n, 0).test


def random_keys(cfg: RunConfig) -> np.ndarray:
    """The random policy's seeds' keys [N_RANDOM_SEEDS, 2] (`population.RunKeys.random`): a
    run draws them with its others, a backtest alone."""
    return make_run_keys(cfg.seed, [], 0, 0, N_RANDOM_SEEDS).random


def _over_seeds(rand: Rollout, ppy: float) -> tuple[dict[str, float], list[float]]:
    """The random policy's metrics averaged over its seeds, and each seed's Sharpe; `rand`
    leaves are [R, bars] (R seeds)."""
    per_seed = [perf_of(take(rand, i), ppy) for i in range(len(rand.returns))]
    return ({key: float(np.mean([p[key] for p in per_seed])) for key in per_seed[0]},
            [p["sharpe"] for p in per_seed])


def _concat(rollouts: list[Rollout], axis: int) -> Rollout:
    """The folds' rollouts joined in fold order along the time `axis`."""
    return jax.tree.map(lambda *xs: np.concatenate(xs, axis), *rollouts)


def _ns(dates: np.ndarray) -> np.ndarray:
    """Dates as int64 nanoseconds since the epoch, as the returns files store them."""
    return np.asarray(dates).astype("datetime64[ns]").astype(np.int64)


def save_returns(path: Path, bars: np.ndarray, dates: np.ndarray,
                 policies: dict[str, Rollout], rand: Rollout, prior: np.ndarray) -> None:
    """A `test_returns.npz`: bar indices, dates (int64 ns), the agent's target positions and
    costs (fraction of equity), the prior each position was chosen around (`prior_position`:
    vol_target's under --prior vol_target, else 0; the residual is agent_position − it),
    every random seed's returns [R, bars] (`random_seeds`) and each policy's per-bar returns
    (float64)."""
    agent = policies["agent"]
    np.savez(path, bars=bars, agent_position=np.asarray(agent.position, np.float64),
             agent_cost=np.asarray(agent.cost, np.float64),
             prior_position=np.asarray(prior, np.float64),
             random_seeds=np.asarray(rand.returns, np.float64),
             dates=_ns(dates),
             **{name: np.asarray(r.returns, np.float64) for name, r in policies.items()})


def forecast_trials(prep: Prepared) -> list[dict]:
    """The trials of the folds' tree-forecast column (`Prepared.tree_forecast_trials`): each
    candidate whose validation Sharpe its choice looked at (the gbm grid; with --tree-forecast
    validation ridge's penalties too), as {fold, forecast, val_sharpe} (annualised)."""
    return [{"fold": k, "forecast": name, "val_sharpe": sharpe_of(r, prep.periods_per_year)}
            for k, cands in sorted(prep.tree_forecast_trials.items())
            for name, r in cands.items()]


def with_forecast_rows(prep: Prepared, val_matrix: list[list[np.ndarray]]
                       ) -> list[list[np.ndarray]]:
    """Each fold's PBO trial matrix (per epoch [ensembles, val_len]) with the rows of its
    tree-forecast column's candidates ([C, val_len], `forecast_trials`) after them (issue 58:
    every choice made on validation that shapes what the agent does enters the PBO); a fold
    with no epoch (stopped before its first) keeps no matrix."""
    return [[*m, *([np.stack(list(prep.tree_forecast_trials[k].values()))]
                   if m and prep.tree_forecast_trials.get(k) else [])]
            for k, m in enumerate(val_matrix)]


def _fold_entry(prep: Prepared, run_dir: Path, k: int, agent: Rollout, data: FoldData,
                ckpt: FoldCheckpoints, history: list[dict], stitched: dict[str, list],
                baselines: BaselinesOnTest, rand_keys: np.ndarray) -> FoldEntry:
    cfg, ppy, f = prep.cfg, prep.periods_per_year, prep.folds[k]
    test_len = f.test[1] - f.test[0]
    base, gbm_fit = baselines.result(k)
    policies, metrics, rand, gbm = compare(agent, data, f.test[0], test_len, prep.test_steps,
                                           cfg, ppy, prep.val_steps, rand_keys, gbm_fit, base)
    meta = ckpt.metadata()
    if prep.oracle_position is not None:
        policies["oracle"] = trim(oracle_rollout(
            pad_bars(prep.oracle_position), data, np.int32(f.test[0]), prep.test_steps, cfg),
            test_len, axis=0)
    for name, r in policies.items():
        stitched[name].append(r)
    stitched["random_seeds"].append(rand)
    rel = Path(f"fold_{f.index}") / "test_returns.npz"
    priors = np.asarray(agent.prior, np.float64)  # the prior of each decision (0: flat)
    save_returns(run_dir / rel, np.arange(*f.test), prep.bars.dates[f.test[0]:f.test[1]],
                 policies, rand, priors)
    return FoldEntry(
        fold=f.index, best_epoch=ckpt.best_epoch(), ensemble_seeds=meta["seeds"],
        best_setting=meta["setting"], val_sharpe=meta["val_sharpe"],
        checkpoint_dir=str(Path(f"fold_{f.index}") / "checkpoints"),
        test_start=f.test[0], test_end=f.test[1], gbm_choice=gbm, epochs=history,
        returns_file=str(rel),
        **test_figures(agent, policies, metrics, rand, priors, prep.market_names, cfg, ppy),
        **({"oracle_test_sharpe": sharpe_of(policies["oracle"].returns, ppy)}
           if "oracle" in policies else {}),
        **({"tree_forecast": prep.tree_forecast_choices[k].to_dict()}
           if k in prep.tree_forecast_choices else {}),
        **({"trust": prep.trusts[k].to_dict()} if k in prep.trusts else {}))


def score_folds(prep: Prepared, run_dir: Path, pop: Population, template,
                ckpts: list[FoldCheckpoints], fold_data: list[FoldData], history, trials,
                val_matrix, baselines: BaselinesOnTest, keys: RunKeys,
                mesh: Mesh | None = None) -> RunSummary:
    """Restore each fold's best acting params (`template`: an ensemble's learner state, zeros),
    score them once on test; the summary's content. The rollouts are `pop.evaluate`'s, with
    the params `replicated` on `mesh` as in validation (None: a multi-process run, scored by
    process 0 alone from host arrays), so a test block as long as a validation block reuses
    the validation program instead of compiling it again. `baselines`: the folds' baselines
    on test and gbm fits (`BaselinesOnTest`, made with `keys.random`); `keys`: the run's keys
    (the scored folds' test rollouts take the first of `keys.test`)."""
    cfg, ppy, folds = prep.cfg, prep.periods_per_year, prep.folds
    scored = [k for k, c in enumerate(ckpts) if c.best_epoch() is not None]
    acting = {k: ckpts[k].restore_acting(template) for k in scored}
    for k in scored:
        export_safetensors(acting[k],
                           run_dir / f"fold_{folds[k].index}" / "best_params.safetensors",
                           ckpts[k].metadata())
    entries = [FoldEntry(fold=f.index, best_epoch=None, test_sharpe=None, test_start=f.test[0],
                         test_end=f.test[1], epochs=history[f.index],
                         status="stopped before its first checkpoint") for f in folds]
    stitched: dict[str, list] = {name: [] for name in ("agent", *BASELINES, "oracle",
                                                       "random_seeds")}
    if scored:
        data = stack([fold_data[k] for k in scored])
        params = stack([acting[k] for k in scored])
        if mesh is not None:
            params = jax.device_put(params, replicated(mesh))
        tests = trim(pop.evaluate(
            params, data, data.test[:, 0], prep.test_steps, test_keys(keys, len(scored), cfg)),
            prep.test_len, axis=1)
        for j, k in enumerate(scored):
            entries[k] = _fold_entry(prep, run_dir, k, take(tests, j), fold_data[k], ckpts[k],
                                     history[k], stitched, baselines, keys.random)
    trials = trials + forecast_trials(prep)
    for c in ckpts:
        c.close()
    cat = {name: _concat(rs, axis=1 if name == "random_seeds" else 0)  # random_seeds: [R, bars]
           for name, rs in stitched.items() if rs}
    stitched_figures: dict = {"stitched_test_sharpe": None,
                              "stitched_buy_and_hold_test_sharpe": None,
                              "geo_mean_test_sharpe": None}
    if scored:
        head = headline(np.asarray(cat["agent"].returns, np.float64), trials,
                        with_forecast_rows(prep, val_matrix), ppy,
                        {name: np.asarray(cat[name].returns, np.float64) for name in BASELINES},
                        cfg.seed, [entries[k].test_sharpe for k in scored],
                        cfg.train.prior_trials)
        mean, sharpes = _over_seeds(cat["random_seeds"], ppy)
        stitched_figures = {
            "stitched_test_sharpe": head.stitched_test_sharpe,
            "stitched_buy_and_hold_test_sharpe": sharpe_of(cat["buy_and_hold"].returns, ppy),
            "geo_mean_test_sharpe": (head.geo_mean_test_sharpe
                                     if len(scored) == len(folds) else None),
            "stitched": {name: Performance(**perf_of(r, ppy)) for name, r in cat.items()
                         if name not in ("oracle", "random_seeds")},
            "stitched_random": Performance(**mean),
            "stitched_random_test_sharpe_band": [float(np.percentile(sharpes, 5)),
                                                 float(np.percentile(sharpes, 95))],
            "headline": head,
            "scored_folds": scored,
            **({"stitched_oracle_test_sharpe": sharpe_of(cat["oracle"].returns, ppy)}
               if "oracle" in cat else {})}
    return RunSummary(folds=tuple(entries), **stitched_figures, trials=trials,
                      config=cfg.to_dict(), data_sha256=prep.data_sha256,
                      data_source=prep.bars.source, data_pool=prep.pool_sources,
                      n_bars=len(prep.bars), periods_per_year=ppy,
                      feature_names=list(prep.market_names), device=describe_device())


def validation_summary(prep: Prepared, records: tuple, settings: list[dict]) -> RunSummary:
    """The summary of a validation-only run: per fold its epochs and the best validation
    Sharpe of each setting's ensemble; every trial; no test figure."""
    history, trials, _ = records
    best = {}
    for t in trials:
        key = (t["fold"], t["setting"])
        best[key] = max(best.get(key, -np.inf), t["val_sharpe"])
    return RunSummary(
        validation_only=True, settings=settings,
        folds=tuple(FoldEntry(fold=f.index, epochs=history[f.index],
                              best_val_sharpe_by_setting=[best.get((f.index, s), None)
                                                          for s in range(len(settings))])
                    for f in prep.folds),
        trials=trials, config=prep.cfg.to_dict(), data_sha256=prep.data_sha256,
        data_pool=prep.pool_sources, periods_per_year=prep.periods_per_year,
        device=describe_device())
