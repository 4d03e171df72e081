"""Acting with a saved run: a fold's ensemble and its inference metadata, applied to new bars.

Nothing is re-fit and nothing in the run directory is written. The new bars' features are
computed by `features.compute_features` and normalised with the statistics saved with the
fold's checkpoint (fit on the fold's train segment, `market.fold_inference_metadata`). The
policy is the one scored on test: the ensemble's mean greedy target (`agent.policy.greedy_decide`).

A new bar file is one evaluation segment: bars before `start = first_valid + lookback` are the
features' warm-up and the first look-back window; the first decision is taken at the close of
bar start − 1 (as for a fold's test block), the last at the close of the last bar.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rl_trader import env
from rl_trader.agent.heads import make_head
from rl_trader.agent.learner import TrainState, init_train_state
from rl_trader.agent.policy import greedy_decide
from rl_trader.baselines.gbm import TREES_FILE, load_trees, tree_column
from rl_trader.config import RunConfig, config_from_dict
from rl_trader.data import Bars
from rl_trader.data.buckets import bucket, trim
from rl_trader.data.features import Normaliser, compute_features, normalise
from rl_trader.data.fold_data import (
    FoldData,
    aux_target,
    bar_context,
    device_fold_data,
    observe,
    with_trust,
    zero_obs,
)
from rl_trader.data.prior import trailing_vol, vol_ratio
from rl_trader.errors import InputError
from rl_trader.evaluation.headline import superior_ability
from rl_trader.evaluation.metrics import geometric_mean_positive, sharpe
from rl_trader.evaluation.record import FoldEntry, Headline, RunSummary, Spa
from rl_trader.evaluation.rollout import Aux, Rollout, rollout
from rl_trader.evaluation.stats import min_track_record_length, moments, probabilistic_sharpe_ratio
from rl_trader.run.checkpoint import FoldCheckpoints, fingerprint
from rl_trader.run.prepare import TREE_FORECAST_NAME
from rl_trader.run.scoring import compare, random_keys, save_returns, test_figures
from rl_trader.runtime.rundir import write_json

SPACING_TOLERANCE = 0.25  # relative difference of periods per year refused between run and file
DIRECTIONS = ("short", "flat", "long")
MAX_HELD = 1.0  # |--position| allowed: the largest target the env's actions produce


@dataclass(frozen=True)
class Policy:
    """A fold's restored ensemble with everything needed to act on new bars."""

    run_dir: Path
    fold: int
    epoch: int
    cfg: RunConfig
    meta: dict  # the checkpoint's metadata; meta["inference"]: see fold_inference_metadata
    params: Any  # acting params of the S ensemble members, leading axis [S]
    trees: tuple | None = None  # `gbm.load_trees`: where the fold used the tree forecast

    @property
    def info(self) -> dict:
        return self.meta["inference"]

    @property
    def sigma_star(self) -> float:
        """The fold's vol_target σ* (fit on its train bars), the prior's; NaN where undefined
        (the prior is then flat) or not saved (a run before issue 58, whose agent had no
        prior)."""
        star = self.info.get("sigma_star")
        return float("nan") if star is None else float(star)

    @property
    def market_names(self) -> list[str]:
        return market_names(self.info)

    @property
    def normaliser(self) -> Normaliser:
        n = self.info["normaliser"]
        return Normaliser(mean=np.asarray(n["mean"], np.float32),
                          std=np.asarray(n["std"], np.float32))

    @property
    def start(self) -> int:
        """First bar of a new file whose return the policy earns (warm-up + look-back)."""
        return int(self.info["first_valid"]) + int(self.info["lookback"])


def market_names(info: dict) -> list[str]:
    """The network's market variables of a fold's inference metadata `info`: the features,
    then the tree forecast's column where the run had one (`prepare.Prepared.market_names`)."""
    extra = [TREE_FORECAST_NAME] if "tree_forecast" in info else []
    return list(info["feature_names"]) + extra


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: not found (not a run directory?)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: cannot read: {err}") from None


def learner_template(cfg: RunConfig, n_features: int, seeds: int) -> TrainState:
    """Zero learner state of `seeds` members (leading axis) with the training run's structure,
    as host numpy arrays (shapes from `jax.eval_shape`: nothing is initialised or compiled)."""
    net = make_head(cfg).network
    dummy = zero_obs(n_features, cfg.features)
    shapes = jax.eval_shape(lambda k: init_train_state(net.init(k, dummy), cfg.agent),
                            jax.random.PRNGKey(0))
    return jax.tree.map(lambda s: np.zeros((seeds,) + s.shape, s.dtype), shapes)


def restore_acting(directory: Path, cfg: RunConfig, n_features: int, seeds: int,
                   epoch: int | None = None) -> Any:
    """The ensemble's acting (online) params (leading axis `seeds`) saved in the
    fold checkpoint `directory` (default: the best epoch), read only; refused (InputError)
    unless the stored fingerprint equals that of the network `cfg` builds. Reads either layout
    (`FoldCheckpoints.restore_acting`)."""
    learner = learner_template(cfg, n_features, seeds)
    fp = fingerprint(learner.params, cfg.net, len(env.action_sizes(cfg.env)))
    with FoldCheckpoints(directory, fp, {}, read_only=True) as ckpt:
        return ckpt.restore_acting(learner, epoch)


def load_policy(run_dir: str | Path, fold: int | None = None) -> Policy:
    """Fold `fold`'s (default: the run's last fold) best-epoch ensemble and its metadata."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(f"run directory not found: {run_dir}")
    indices = [f["index"] for f in _read_json(run_dir / "folds.json").get("folds", [])]
    if not indices:
        raise InputError(f"{run_dir / 'folds.json'}: lists no folds")
    fold = indices[-1] if fold is None else fold
    if fold not in indices:
        raise InputError(f"option --fold {fold}: the run has folds {indices}")
    directory = run_dir / f"fold_{fold}" / "checkpoints"
    with FoldCheckpoints(directory, "", {}, read_only=True) as ckpt:
        if ckpt.best_epoch() is None:
            raise InputError(f"fold {fold} of {run_dir} has no checkpoint (stopped before its "
                             "first epoch, or unfinished): choose another --fold")
        meta = ckpt.metadata()
    if "inference" not in meta:
        raise InputError(f"checkpoint {directory} holds no inference metadata (normaliser, "
                         "feature order): written by an older version; re-run the training")
    try:
        cfg = config_from_dict(meta["config"])
    except InputError as err:
        raise InputError(f"run {run_dir}: {err}") from None
    trees, choice = None, meta["inference"].get("tree_forecast")
    if cfg.features.tree_forecast != "off" and choice is None:
        raise InputError(f"run {run_dir}: trained with --tree-forecast "
                         f"{cfg.features.tree_forecast} by a version that did not save its "
                         "trees, so its policy cannot be applied to new bars: re-run the "
                         "training")
    if choice is not None and choice["used"]:
        trees = load_trees(run_dir / f"fold_{fold}" / TREES_FILE)
    params = restore_acting(directory, cfg, len(market_names(meta["inference"])),
                            int(meta["seeds"]), meta["epoch"])
    return Policy(run_dir=run_dir, fold=fold, epoch=int(meta["epoch"]), cfg=cfg, meta=meta,
                  params=params, trees=trees)


def market_data(policy: Policy, bars: Bars, min_returns: int = 0) -> FoldData:
    """The new bars as one evaluation segment [start, T), normalised with the SAVED statistics.

    Refuses (InputError) bars whose spacing implies periods per year more than 25% off the
    run's, fewer than start + `min_returns` bars, or features other than the run's.
    """
    info, src, n = policy.info, bars.source, len(bars)
    ppy, run_ppy = bars.periods_per_year(), float(info["periods_per_year"])
    if abs(ppy / run_ppy - 1.0) > SPACING_TOLERANCE:
        raise InputError(f"data file {src!r}: its bar spacing means {ppy:.4g} bars a year, the "
                         f"run was trained on {run_ppy:.4g} (differs by more than "
                         f"{SPACING_TOLERANCE:.0%})")
    need = policy.start + min_returns
    if n < need:
        raise InputError(f"data file {src!r}: {n} bars, needs at least {need} (feature warm-up "
                         f"{info['first_valid']} + look-back {info['lookback']}"
                         + (f" + {min_returns} to evaluate" if min_returns else "") + ")")
    feats = compute_features(bars.open, bars.high, bars.low, bars.close, bars.volume)
    if (list(feats.names), feats.first_valid) != (info["feature_names"], info["first_valid"]):
        raise InputError(f"run {policy.run_dir}: its features ({len(info['feature_names'])}, "
                         f"warm-up {info['first_valid']}) differ from this version's "
                         f"({len(feats.names)}, warm-up {feats.first_valid})")
    clip = float(info["clip"])
    aux = aux_target(bars.close, float(info["aux_scale"]), clip)
    segment = [policy.start, n]
    data = device_fold_data(normalise(feats.values, policy.normaliser, clip), bars.open,
                            bars.close, aux, float(info["aux_scale"]), segment, segment, segment,
                            drift=float(info.get("drift", 0.0)),
                            vol_ratio=vol_ratio(trailing_vol(bars.close), policy.sigma_star))
    if policy.cfg.env.view == "trusted":  # the trust fit on the fold's train segment
        if not isinstance(info.get("trust"), dict) or "w" not in info["trust"]:
            raise InputError(f"run {policy.run_dir}: fold {policy.fold}'s checkpoint has no "
                             "trust in its inference metadata (--view trusted needs it)")
        data = data.replace(trust=with_trust(info["trust"]["w"]))
    if "tree_forecast" not in info:
        return data
    column = tree_column(info["tree_forecast"], policy.trees, np.asarray(data.features), clip)
    return data.replace(tree_forecast=jnp.asarray(column))


def held_state(t: int, position: float, data: FoldData) -> env.EnvState:
    """The env state at the close of bar `t` holding the signed fraction `position` of equity:
    equity 1, entered at bar t's close one bar ago, no drawdown, no cost (flat when 0)."""
    close = data.prices.close[t]
    state = env.reset(t, t + 1)
    if position == 0.0:
        return state
    return state.replace(units=jnp.float32(position) / close, entry_price=close,
                         bars_in_position=jnp.float32(1.0))


@partial(jax.jit, static_argnums=3)
def act(params, data: FoldData, state: env.EnvState,
        cfg: RunConfig) -> tuple[jax.Array, Aux, dict[str, jax.Array], jax.Array, jax.Array]:
    """At the close of bar `state.t`: the ensemble's target and what it reports (`Aux`: mean
    VSN weights and forecast; `greedy_decide`), every member's choice and Q-values
    (`Head.describe`, leading axis [S]), each member's forecast ŷ [S] and the portfolio
    features [P]."""
    port = env.portfolio_features(state, data.prices)
    target, aux = greedy_decide(params, data, cfg)(None, state, port)
    head = make_head(cfg)
    out = jax.vmap(head.network.apply, in_axes=(0, None))(
        params, observe(data, state.t, port, cfg.features))
    return (target, aux, head.describe(out, port[0], bar_context(data, state.t, cfg.env)),
            out.aux, port)


def _when(date: np.datetime64) -> str:
    """ISO date, with the time of day only when it is not midnight."""
    return str(np.datetime_as_string(date, "s")).removesuffix("T00:00:00")


def _direction(fraction: float) -> str:
    return DIRECTIONS[int(np.sign(fraction)) + 1]


def predict(policy: Policy, bars: Bars, position: float = 0.0) -> dict:
    """The target position for the bar after the last one of `bars` (filled at its open), with
    each member's Q-values and the mean VSN weights. `position`: the signed fraction of equity
    held now (see `held_state`); 0 = flat."""
    if not (math.isfinite(position) and abs(position) <= MAX_HELD):
        raise InputError(f"option --position={position!r} is out of range: must be in "
                         f"[-{MAX_HELD:g}, {MAX_HELD:g}]")
    data = market_data(policy, bars)
    t = len(bars) - 1
    target, aux, described, forecast, port = jax.tree.map(
        np.asarray, act(policy.params, data, held_state(t, position, data), policy.cfg))
    labels, scale = make_head(policy.cfg).labels, float(policy.info["aux_scale"])
    members = []
    for s, frac in enumerate(map(float, described.pop("fraction"))):
        q = {name: (dict(zip(labels[name], map(float, v[s]), strict=True)) if name in labels
                    else float(v[s])) for name, v in described.items()}
        members.append({"member": s, "direction": _direction(frac), "magnitude": abs(frac),
                        "fraction": frac, **q, "aux_next_log_return": float(forecast[s]) * scale})
    fraction = float(target)
    prior = float(bar_context(data, t, policy.cfg.env).prior)
    return {
        "run_dir": str(policy.run_dir), "fold": policy.fold, "epoch": policy.epoch,
        "fingerprint": policy.meta["fingerprint"], "data_file": bars.source,
        "data_sha256": bars.sha256, "last_bar": t,
        "last_date": _when(bars.dates[t]),
        "last_close": float(bars.close[t]), "position_held": float(position),
        "target": {"direction": _direction(fraction), "magnitude": abs(fraction),
                   "fraction": fraction},
        # the position the zero action holds (--prior) and what the agent adds to it
        "prior": {"kind": policy.cfg.env.prior, "fraction": prior,
                  "residual": fraction - prior},
        "members": members,
        "market_vsn_weights": dict(zip(policy.market_names, map(float, aux.market_weights),
                                       strict=True)),
        "portfolio_vsn_weights": dict(zip(env.PORTFOLIO_NAMES, map(float, aux.portfolio_weights),
                                          strict=True)),
        "portfolio_features": dict(zip(env.PORTFOLIO_NAMES, map(float, port), strict=True)),
    }


@partial(jax.jit, static_argnums=(3, 4))
def _agent_rollout(params, data: FoldData, start: jax.Array, length: int,
                   cfg: RunConfig) -> Rollout:
    return rollout(greedy_decide(params, data, cfg), data, start, length, cfg,
                      jax.random.PRNGKey(cfg.seed + 1))


def _headline(returns: np.ndarray, ppy: float, baselines: dict[str, np.ndarray],
              seed: int) -> Headline:
    """PSR, MinTRL and the SPA against `baselines` (`superior_ability`) of the backtest's
    returns. No selection happens on these bars, so there is nothing to deflate: DSR, PBO and
    the trial count do not apply (None)."""
    sr, skew, kurt, n = moments(returns)
    mintrl = min_track_record_length(sr, skew, kurt)
    spa = superior_ability(returns, baselines, seed)
    return Headline(stitched_test_sharpe=float(sharpe(returns, ppy)),
                    psr=probabilistic_sharpe_ratio(sr, n, skew, kurt), dsr=None, n_trials=None,
                    expected_max_sharpe=None,
                    min_track_record_bars=None if math.isinf(mintrl) else mintrl,
                    n_test_bars=n, pbo=None, skew=skew, kurtosis=kurt,
                    spa=None if spa is None else Spa(**spa))


def backtest(policy: Policy,
             bars: Bars) -> tuple[RunSummary, dict[str, Rollout], Rollout, np.ndarray]:
    """Score the policy on `bars` from `start` to the last bar, starting flat, beside the
    baselines with the same costs: (the summary, every policy's rollout, the random policy's
    rollouts [R, bars], the prior of each decision [bars] (`Rollout.prior`)). The
    baselines fit to a fold's training data (ridge, gbm, vol target) are left out: the new
    file has no train or validation block to fit them on."""
    data = market_data(policy, bars, min_returns=2)
    cfg, ppy, info = policy.cfg, float(policy.info["periods_per_year"]), policy.info
    start, end = policy.start, len(bars)
    steps = bucket(end - start)
    agent = trim(_agent_rollout(policy.params, data, start, steps, cfg), end - start, axis=0)
    policies, metrics, rand, _ = compare(agent, data, start, end - start, steps, cfg, ppy,
                                         None, random_keys(cfg))
    returns = np.asarray(agent.returns, np.float64)
    priors = np.asarray(agent.prior, np.float64)
    dates = bars.dates[start:end]
    seen = np.datetime64(info["dates"]["val"][1])
    entry = FoldEntry(
        fold=policy.fold, best_epoch=policy.epoch, ensemble_seeds=policy.meta["seeds"],
        best_setting=policy.meta["setting"], val_sharpe=policy.meta["val_sharpe"],
        checkpoint_dir=str(policy.run_dir / f"fold_{policy.fold}" / "checkpoints"),
        test_start=start, test_end=end,
        returns_file=str(Path(f"fold_{policy.fold}") / "test_returns.npz"),
        **test_figures(agent, policies, metrics, rand, priors, policy.market_names, cfg, ppy))
    summary = RunSummary(
        backtest=True, run_dir=str(policy.run_dir), fold=policy.fold,
        first_date=_when(dates[0]), last_date=_when(dates[-1]),
        bars_seen_in_training=int(np.sum(dates <= seen)), fold_dates=info["dates"],
        folds=(entry,), stitched_test_sharpe=entry.test_sharpe,
        stitched_buy_and_hold_test_sharpe=entry.buy_and_hold_test_sharpe,
        geo_mean_test_sharpe=geometric_mean_positive([entry.test_sharpe]),
        stitched=entry.metrics,
        headline=_headline(returns, ppy, {name: np.asarray(r.returns, np.float64)
                                          for name, r in policies.items() if name != "agent"},
                           cfg.seed),
        config=policy.meta["config"], data_sha256=bars.sha256, data_source=bars.source,
        n_bars=end, periods_per_year=ppy, feature_names=info["feature_names"],
        fingerprint=policy.meta["fingerprint"])
    return summary, policies, rand, priors


def backtest_out_dir(out_dir: str | Path, run_dir: str | Path) -> Path:
    """`out_dir` resolved, refused (InputError) unless it is new or empty and outside
    `run_dir`."""
    out, run = Path(out_dir).resolve(), Path(run_dir).resolve()
    if out == run or run in out.parents:
        raise InputError(f"option --out {out_dir}: inside the run directory {run_dir}, which "
                         "a backtest never writes to")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"option --out {out_dir}: exists and is not an empty directory")
    return out


def write_backtest(out_dir: str | Path, run_dir: str | Path, summary: RunSummary,
                   policies: dict[str, Rollout], rand: Rollout, priors: np.ndarray,
                   dates: np.ndarray) -> Path:
    """Write `out_dir/summary.json`, `out_dir/fold_<k>/test_returns.npz` (a run's format) and
    `out_dir/report.html`; `out_dir` as `backtest_out_dir` accepts it."""
    from rl_trader.report.writer import write_report

    out = backtest_out_dir(out_dir, run_dir)
    entry = summary.folds[0]
    path = out / entry.returns_file
    path.parent.mkdir(parents=True, exist_ok=True)
    save_returns(path, np.arange(entry.test_start, entry.test_end), dates, policies, rand,
                 priors)
    write_json(out / "summary.json", summary.to_json())
    write_report(out)
    return out
