"""Stage 1 of a run: validate the config, load the bars, compute features, lay out the folds.

`prepare(cfg)` → `Prepared`, everything known before training; `Prepared.fold_data(k)` moves
fold k's arrays (features normalised with fold k's train statistics) to the device.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from rl_trader.buckets import bucket
from rl_trader.config import RunConfig
from rl_trader.data import SYNTHETIC_PREFIX, Bars, load
from rl_trader.features import MarketFeatures, compute_features
from rl_trader.fold_data import FoldData, make_fold_data
from rl_trader.folds import Fold, make_folds


@dataclass(frozen=True)
class Prepared:
    """Everything known before training: data, features, the fold layout, annualisation."""

    cfg: RunConfig
    bars: Bars
    features: MarketFeatures
    folds: list[Fold]
    periods_per_year: float
    oracle_position: np.ndarray | None  # [T] the oracle's target of a synthetic market

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

    def fold_data(self, k: int) -> FoldData:
        """Fold k's device arrays, normalised with statistics fit on its train segment."""
        return make_fold_data(self.bars.open, self.bars.close, self.features, self.folds[k],
                              self.cfg.features.clip)


def _layout(n_bars: int, feats: MarketFeatures, cfg: RunConfig) -> list[Fold]:
    """The folds over `n_bars` bars: the first usable bar is the features' warm-up plus the
    look-back."""
    return make_folds(n_bars, feats.first_valid + cfg.features.lookback, cfg.folds,
                      cfg.features.lookback, cfg.agent.n_step)


def prepare(cfg: RunConfig) -> Prepared:
    """Validate the config, load and check the data, compute features, lay out the folds."""
    cfg.validate()
    oracle_position = None
    if (cfg.data.path or "").startswith(SYNTHETIC_PREFIX):
        from rl_trader.data.synthetic import from_spec

        market = from_spec(cfg.data.path)
        bars, oracle_position = market.bars, market.oracle_position
    else:
        bars = load(cfg.data.path)
    feats = compute_features(bars.open, bars.high, bars.low, bars.close, bars.volume)
    folds = _layout(len(bars), feats, cfg)
    ppy = cfg.data.periods_per_year or bars.periods_per_year()
    return Prepared(cfg=cfg, bars=bars, features=feats, folds=folds, periods_per_year=ppy,
                    oracle_position=oracle_position)
