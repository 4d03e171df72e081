"""A fold's market on the device: normalised features, prices, aux targets, segment bounds;
and the observation (`Obs`) gathered from it, the network's input.

The features are normalised with statistics fit on the fold's **train segment only**; val and
test bars are transformed with those statistics. Observations are gathered from these arrays
by bar index (`observe`), which is what lets replay store bar indices instead of windows.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from rl_trader.env import Prices
from rl_trader.features import MarketFeatures, fit_normaliser, next_bar_log_return, normalise
from rl_trader.folds import Fold


@struct.dataclass
class Obs:
    """One observation (or a batch, with leading axes)."""

    market: jax.Array  # float32 [..., F]
    window: jax.Array  # float32 [..., L, F]
    portfolio: jax.Array  # float32 [..., P]


@struct.dataclass
class FoldData:
    """Device arrays of one fold over the whole bar range [0, T)."""

    features: jax.Array  # float32 [T, F], normalised with train statistics
    prices: Prices  # float32 [T]
    aux_target: jax.Array  # float32 [T]: next-bar log return / train std (used at t < end − 1)
    train: jax.Array  # int32 [2]: half-open bar range
    val: jax.Array  # int32 [2]
    test: jax.Array  # int32 [2]


def make_fold_data(open_: np.ndarray, close: np.ndarray, feats: MarketFeatures, fold: Fold,
                   clip: float) -> FoldData:
    """Fit the normaliser on `fold.train` and move the fold's arrays to the device."""
    start, end = fold.train
    norm = fit_normaliser(feats.values, start, end)
    nxt = next_bar_log_return(close)
    scale = float(np.std(nxt[start:end - 1])) or 1.0
    aux = np.clip(nxt / scale, -clip, clip).astype(np.float32)
    return FoldData(
        features=jnp.asarray(normalise(feats.values, norm, clip)),
        prices=Prices(open=jnp.asarray(open_, jnp.float32), close=jnp.asarray(close, jnp.float32)),
        aux_target=jnp.asarray(aux),
        train=jnp.asarray(fold.train, jnp.int32), val=jnp.asarray(fold.val, jnp.int32),
        test=jnp.asarray(fold.test, jnp.int32))


def observe(data: FoldData, bar: jax.Array, portfolio: jax.Array, lookback: int) -> Obs:
    """Observation at the close of `bar` (unbatched): market row, window [L, F], portfolio."""
    n_feat = data.features.shape[1]
    window = jax.lax.dynamic_slice(data.features, (bar - lookback + 1, 0), (lookback, n_feat))
    return Obs(market=data.features[bar], window=window, portfolio=portfolio)
