"""A fold's market on the device: normalised features, prices, aux targets, segment bounds;
and the observation (`Obs`) gathered from it, the network's input.

The features are normalised with statistics fit on the fold's **train segment only**; val and
test bars are transformed with those statistics. Observations are gathered from these arrays
by bar index (`observe`), which is what lets replay store bar indices instead of windows.

With pooled instruments (`--data target,other,…`) each other instrument's bars follow the
target's on the same bar axis, normalised with statistics fit on its own bars inside the
fold's train dates; training episodes start in any of the `episodes` ranges (the target's
train segment first), while validation, test and every baseline but ridge read the target
alone (ridge fits on the same training bars as the agent).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from rl_trader.config import EnvConfig, FeatureConfig, RunConfig
from rl_trader.data.buckets import bucket
from rl_trader.data.features import (
    MarketFeatures,
    Normaliser,
    fit_normaliser,
    next_bar_log_return,
    normalise,
)
from rl_trader.data.folds import Fold
from rl_trader.data.prior import vol_target_ratios
from rl_trader.env import PORTFOLIO_NAMES, Prices, action_sizes


@struct.dataclass
class Obs:
    """One observation (or a batch, with leading axes)."""

    market: jax.Array  # float32 [..., F]
    window: jax.Array  # float32 [..., L, F]
    portfolio: jax.Array  # float32 [..., P]


@struct.dataclass
class FoldData:
    """Device arrays of one fold over the whole bar range [0, T), padded to T_b = bucket(T)
    bars with copies of bar T − 1 (`buckets`): a read past the last bar sees what an
    index clamped to T − 1 would, so results do not depend on the padding."""

    features: jax.Array  # float32 [T_b, F], normalised with train statistics
    prices: Prices  # float32 [T_b]
    aux_target: jax.Array  # float32 [T_b]: next-bar log return / train std (used at t < end − 1)
    return_scale: jax.Array  # float32 [T_b]: s, that train std, of each bar's instrument
    # float32 [T_b]: ȳ, the mean of `aux_target` over the train bars of each bar's instrument
    # (the forecast's unconditional level: the drift that belongs to the prior)
    drift: jax.Array
    # float32 [T_b]: σ*/σ̂_t (`data.prior.vol_ratio`), σ* fit on the train bars of each bar's
    # instrument: the `vol_target` baseline holds min(1, ·), the agent's prior min(1, k·)
    vol_ratio: jax.Array
    # float32 []: w, the fold's trust in its forecast as a view on the prior (`--view trusted`,
    # `baselines.gbm.forecast_trust`, fit on its train segment); 0 until it is set
    trust: jax.Array
    train: jax.Array  # int32 [2]: half-open bar range
    val: jax.Array  # int32 [2]
    test: jax.Array  # int32 [2]
    episodes: jax.Array  # int32 [I, 2]: training bar ranges, row 0 = `train`; one per instrument
    # float32 [T_b, E]: market variables fit per fold after the features, seen by the agent
    # only (E = 1 with --tree-forecast: `gbm.with_tree_forecast`; else 0)
    tree_forecast: jax.Array


@dataclass(frozen=True)
class PoolSegment:
    """A pooled instrument's host arrays over its own T_j bars, and the bars of the fold's train
    dates it trains on, [start, end) in its own index (past its feature warm-up)."""

    open: np.ndarray
    close: np.ndarray
    features: np.ndarray  # raw [T_j, F]
    start: int
    end: int


@struct.dataclass
class BarContext:
    """What the Q-heads read of a decision's bar besides the network (leaves of the bar
    index's shape): the return scale, the forecast's unconditional level and the prior."""

    scale: jax.Array  # s, `FoldData.return_scale`
    drift: jax.Array  # ȳ, `FoldData.drift` (normalised units, as the forecast μ̂)
    trust: jax.Array  # w, `FoldData.trust`
    prior: jax.Array  # π_t: the position the zero action holds (0 under --prior flat)
    prior_tm1: jax.Array  # π_{t−1}: the prior the held position was set against


def prior_position(data: FoldData, bar: jax.Array, cfg: EnvConfig) -> jax.Array:
    """The agent's prior at `bar` (any shape): π_t = min(1, k·σ*/σ̂_t), k = `cfg.prior_scale`,
    under `cfg.prior` vol_target (k = 1: vol_target's own position), else 0."""
    if cfg.prior == "flat":
        return jnp.zeros(jnp.shape(bar), jnp.float32)
    return jnp.minimum(1.0, cfg.prior_scale * data.vol_ratio[bar])


def bar_context(data: FoldData, bar: jax.Array, cfg: EnvConfig) -> BarContext:
    """The `BarContext` of decisions at `bar` (any shape); π_{t−1} at bar 0 is π_0."""
    return BarContext(scale=data.return_scale[bar], drift=data.drift[bar],
                      trust=jnp.broadcast_to(data.trust, jnp.shape(bar)),
                      prior=prior_position(data, bar, cfg),
                      prior_tm1=prior_position(data, jnp.maximum(bar - 1, 0), cfg))


def market_width(data: FoldData) -> int:
    """The network's market variables: the features and the `tree_forecast` columns."""
    return data.features.shape[1] + data.tree_forecast.shape[1]


def training_bars(data: FoldData, xp=jnp) -> jax.Array:
    """bool [T_b]: bars t with t and t + 1 inside one training range (the rows a fit on
    training data may use: the next bar is in the same instrument's train dates). `xp`: jnp
    (traced, in a program) or np (on the host: no device program)."""
    t = xp.arange(data.features.shape[0])[:, None]
    episodes = xp.asarray(data.episodes)
    return xp.any((t >= episodes[:, 0]) & (t < episodes[:, 1] - 1), axis=1)


def segment_normaliser(values: np.ndarray, close: np.ndarray, start: int,
                       end: int) -> tuple[Normaliser, float]:
    """The normaliser of `values` [T, F] and the aux-target scale, both fit on bars
    [start, end) only: scale = std(log(c_{t+1} / c_t), start ≤ t < end − 1), 1 if it is 0."""
    scale = float(np.std(next_bar_log_return(close)[start:end - 1])) or 1.0
    return fit_normaliser(values, start, end), scale


def fold_normaliser(values: np.ndarray, close: np.ndarray,
                    fold: Fold) -> tuple[Normaliser, float]:
    """`segment_normaliser` on the fold's train segment."""
    return segment_normaliser(values, close, *fold.train)


def _normalised(values: np.ndarray, close: np.ndarray, start: int, end: int,
                clip: float) -> tuple[np.ndarray, ...]:
    """(features, aux target, its scale, its train mean ȳ, the prior) of one instrument per
    bar, each fit on its bars [start, end) (`segment_normaliser`, `prior_fit`)."""
    norm, scale = segment_normaliser(values, close, start, end)
    aux = aux_target(close, scale, clip)
    ratio, _, drift = prior_fit(close, aux, start, end)
    return (normalise(values, norm, clip), aux, np.full(len(close), scale),
            np.full(len(close), drift), ratio)


def aux_target(close: np.ndarray, scale: float, clip: float) -> np.ndarray:
    """The forecasts' target y_t = log(c_{t+1} / c_t) / s, clipped to [−clip, clip] [T]."""
    return np.clip(next_bar_log_return(close) / scale, -clip, clip)


def prior_fit(close: np.ndarray, aux: np.ndarray, start: int,
              end: int) -> tuple[np.ndarray, float, float]:
    """What the prior is fit to on the train bars [start, end): σ*/σ̂ [T] and σ*
    (`prior.vol_target_ratios`), and ȳ = mean(aux[t], start ≤ t < end − 1) of the target
    `aux` (`aux_target`): the bars whose next bar is in the train segment too."""
    ratio, sigma_star = vol_target_ratios(close, start, end)
    return ratio, sigma_star, float(np.mean(aux[start:end - 1]))


def make_fold_data(open_: np.ndarray, close: np.ndarray, feats: MarketFeatures, fold: Fold,
                   clip: float, pool: tuple[PoolSegment, ...] = ()) -> FoldData:
    """Fit the normalisers (the target's on `fold.train`, each pooled instrument's on its own
    train-date bars) and move the fold's arrays to the device, the pooled instruments' bars
    after the target's."""
    features, aux, scale, drift, prior = _normalised(feats.values, close, *fold.train, clip)
    parts = [(features, open_, close, aux, scale, drift, prior)]
    episodes, offset = [fold.train], len(close)
    for seg in pool:
        features, aux, scale, drift, prior = _normalised(seg.features, seg.close, seg.start,
                                                         seg.end, clip)
        parts.append((features, seg.open, seg.close, aux, scale, drift, prior))
        episodes.append((offset + seg.start, offset + seg.end))
        offset += len(seg.close)
    features, opens, closes, auxes, scales, drifts, priors = (
        np.concatenate(x) for x in zip(*parts, strict=True))
    return device_fold_data(features, opens, closes, auxes, scales, fold.train, fold.val,
                            fold.test, episodes, drift=drifts, vol_ratio=priors)


def device_fold_data(features: np.ndarray, open_: np.ndarray, close: np.ndarray,
                     aux_target: np.ndarray, return_scale: np.ndarray | float, train, val, test,
                     episodes: Sequence[Sequence[int]] | None = None, *,
                     drift: np.ndarray | float, vol_ratio: np.ndarray) -> FoldData:
    """`FoldData` from host arrays over T bars (features [T, F], the rest [T]; `return_scale`
    and `drift` [T] or one value for every bar) and segment bounds (half-open bar ranges;
    `episodes` [I, 2], default the train segment alone): float32 on the device, the bar axis
    padded to `bucket(T)` with copies of bar T − 1 (`pad_bars`)."""
    episodes = [train] if episodes is None else episodes
    every = (len(close),)
    return FoldData(features=pad_bars(features),
                    prices=Prices(open=pad_bars(open_), close=pad_bars(close)),
                    aux_target=pad_bars(aux_target),
                    return_scale=pad_bars(np.broadcast_to(return_scale, every)),
                    drift=pad_bars(np.broadcast_to(drift, every)),
                    vol_ratio=pad_bars(vol_ratio), trust=with_trust(0.0),
                    train=_host_int32(train), val=_host_int32(val), test=_host_int32(test),
                    episodes=_host_int32(np.asarray(episodes).reshape(-1, 2)),
                    tree_forecast=jax.device_put(np.zeros((bucket(len(close)), 0), np.float32)))


def with_trust(w: float) -> jax.Array:
    """`FoldData.trust` of value `w`, made on the host and copied (`jax.device_put`: no
    device program, where `jnp.asarray` compiles one per shape since jax 0.11)."""
    return jax.device_put(np.float32(w))


def _host_int32(x) -> jax.Array:
    """`x` as an int32 device array, converted on the host (no device program)."""
    return jax.device_put(np.array(x, np.int32))  # a copy: on the CPU the device shares it


def pad_bars(x: np.ndarray) -> jax.Array:
    """A host array over T bars (axis 0) as float32 on the device, padded to `bucket(T)` bars
    with copies of bar T − 1 (converted on the host: no device program per length)."""
    x = np.asarray(x, np.float32)
    pad = bucket(len(x)) - len(x)
    return jax.device_put(np.pad(x, [(0, pad)] + [(0, 0)] * (x.ndim - 1), mode="edge"))


def fold_inference_metadata(feats: MarketFeatures, dates: np.ndarray, close: np.ndarray,
                            fold: Fold, cfg: RunConfig, ppy: float) -> dict:
    """What acting with the fold's policy on new bars needs besides the weights (JSON-able):
    the train-fit normaliser (`mean`, `std` per feature, in `feature_names` order), the aux
    target's scale (the aux head predicts log(c_{t+1} / c_t) / aux_scale), the feature warm-up
    (`first_valid` bars), look-back, clip, the magnitude branch's sizes (`magnitudes`: the
    positions, or the residuals under --prior vol_target), portfolio feature names, periods per
    year, the prior's train-fit σ* (`sigma_star`, NaN: undefined) and the forecast's train
    level ȳ (`drift`, `prior_fit`), and the first/last date of each segment (ISO, for
    checking new bars' overlap)."""
    norm, scale = fold_normaliser(feats.values, close, fold)
    _, star, drift = prior_fit(close, aux_target(close, scale, cfg.features.clip), *fold.train)
    day = np.datetime_as_string(np.asarray(dates, "datetime64[s]"))
    return {"feature_names": list(feats.names), "first_valid": int(feats.first_valid),
            "normaliser": {"mean": [float(x) for x in norm.mean],
                           "std": [float(x) for x in norm.std]},
            "aux_scale": scale, "lookback": cfg.features.lookback, "clip": cfg.features.clip,
            "magnitudes": list(action_sizes(cfg.env)), "portfolio_names": list(PORTFOLIO_NAMES),
            "periods_per_year": float(ppy),
            "sigma_star": star if np.isfinite(star) else None,  # JSON has no NaN
            "drift": drift,
            "dates": {name: [str(day[a]), str(day[b - 1])] for name, (a, b) in
                      (("train", fold.train), ("val", fold.val), ("test", fold.test))}}


def zero_obs(n_market: int, cfg: FeatureConfig) -> Obs:
    """An all-zero observation with `observe`'s shapes (market [F + E], window [L, F + E],
    portfolio [P]; `n_market` = F + E): what a network is initialised with."""
    return Obs(market=jnp.zeros((n_market,)), window=jnp.zeros((cfg.lookback, n_market)),
               portfolio=jnp.zeros((len(PORTFOLIO_NAMES),)))


def observe(data: FoldData, bar: jax.Array, portfolio: jax.Array, cfg: FeatureConfig) -> Obs:
    """Observation at the close of `bar` (unbatched): market row [F + E] (the features, then
    the `tree_forecast` columns), window [L, F + E] (L = cfg.lookback), and the portfolio
    features [P]: every network input, learning or acting, is made here."""
    parts = [data.features] + ([data.tree_forecast] if data.tree_forecast.shape[1] else [])
    start = bar - cfg.lookback + 1
    rows = [x[bar] for x in parts]
    windows = [jax.lax.dynamic_slice(x, (start, 0), (cfg.lookback, x.shape[1])) for x in parts]
    market, window = ((rows[0], windows[0]) if len(parts) == 1 else
                      (jnp.concatenate(rows), jnp.concatenate(windows, axis=1)))
    return Obs(market=market, window=window, portfolio=portfolio)


def observe_batch(data: FoldData, bar: jax.Array, portfolio: jax.Array,
                  cfg: FeatureConfig) -> Obs:
    """`observe` of a batch: bars [B] with portfolio features [B, P], or [B, K, P] (K
    portfolios sharing each bar's market row and window)."""
    return jax.vmap(partial(observe, cfg=cfg), in_axes=(None, 0, 0))(data, bar, portfolio)
