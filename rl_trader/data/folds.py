"""Walk-forward fold layout with purge gaps: the one definition of train | gap | val | gap | test.

Usable bars are [first_bar, n_bars) (first_bar is normally the features' `first_valid`), U of them.
The K test blocks are contiguous, non-overlapping and tile the tail of the data, the last one
ending at n_bars. For fold k (0-based), with t_k = n_bars - (K - k) * test_bars:

    test  = [t_k, t_k + test_bars)
    val   = [t_k - gap - val_bars, t_k - gap)
    train = [train_start_k, val_start_k - gap)

train_start_k = first_bar (expanding) or val_start_k - gap - train_0 (rolling: every fold's train
has fold 0's length train_0). A fold's val may overlap earlier folds' test blocks and its train
may contain them: that is ordinary walk-forward; within a fold, train < val < test with gaps.

gap = cfg.gap or max(lookback, n_step) + 1: no look-back window nor n-step return reaches across.

Default sizes (test_bars and val_bars None), with S = U - 2 gap:
    block = min(S // (K + 3), (S - min_train_bars) // (K + 1));  test_bars = val_bars = block,
and fold 0's train gets the rest, train_0 = S - (K + 1) block >= max(2 block, min_train_bars).
If only one of test_bars / val_bars is given, the other equals it. Blocks must hold at least
2 * n_step + 2 bars.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from rl_trader.config import FoldConfig
from rl_trader.errors import InputError


@dataclass(frozen=True)
class Fold:
    """One fold: half-open bar ranges [start, end) into the input bars, and the purge gap."""

    index: int
    train: tuple[int, int]
    val: tuple[int, int]
    test: tuple[int, int]
    gap: int

    def to_dict(self) -> dict:
        """Plain, json-serialisable dict (ranges as [start, end] lists)."""
        d = asdict(self)
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


def make_folds(
    n_bars: int, first_bar: int, cfg: FoldConfig, lookback: int, n_step: int
) -> list[Fold]:
    """The K folds over bars [first_bar, n_bars); raises `InputError` when they do not fit.

    `first_bar` must be ≥ `lookback`: a segment starting at bar a is entered with a decision at
    bar a − 1, whose look-back window starts at a − lookback and must not be negative.
    """
    if first_bar < lookback:
        raise ValueError(f"first_bar={first_bar} < lookback={lookback}: the first look-back "
                         "window would start before bar 0")
    cfg.validate()
    k = cfg.n_folds
    min_gap = max(lookback, n_step) + 1
    if cfg.gap is not None and cfg.gap < min_gap:
        raise InputError(f"option gap={cfg.gap} is too small: must be >= {min_gap} "
                         f"(max(lookback={lookback}, n_step={n_step}) + 1)")
    gap = cfg.gap if cfg.gap is not None else min_gap
    min_block = 2 * max(n_step, 1) + 2
    usable = n_bars - max(first_bar, 0)

    test_bars = cfg.test_bars if cfg.test_bars is not None else cfg.val_bars
    val_bars = cfg.val_bars if cfg.val_bars is not None else cfg.test_bars
    if test_bars is None or val_bars is None:
        span = usable - 2 * gap
        block = max(min(span // (k + 3), (span - cfg.min_train_bars) // (k + 1)), 0)
        test_bars = val_bars = block
        need = 2 * gap + max((k + 3) * min_block, (k + 1) * min_block + cfg.min_train_bars)
    else:
        for name, v in (("test_bars", test_bars), ("val_bars", val_bars)):
            if v < min_block:
                raise InputError(f"option {name}={v} is too small: must be >= {min_block} "
                                 f"(2 * n_step + 2)")
        need = 2 * gap + val_bars + k * test_bars + cfg.min_train_bars
    train0 = usable - 2 * gap - val_bars - k * test_bars
    if test_bars < min_block or val_bars < min_block or train0 < cfg.min_train_bars:
        raise InputError(f"data has {max(usable, 0)} usable bars (bars {first_bar}..{n_bars - 1}); "
                         f"{k} folds need at least {need} (option --folds)")

    folds = []
    for i in range(k):
        t0 = n_bars - (k - i) * test_bars
        v0 = t0 - gap - val_bars
        tr_end = v0 - gap
        tr_start = first_bar if cfg.expanding else tr_end - train0
        folds.append(Fold(index=i, train=(tr_start, tr_end), val=(v0, t0 - gap),
                          test=(t0, t0 + test_bars), gap=gap))
    return folds


def _fmt_range(r: tuple[int, int], dates: np.ndarray | None) -> str:
    s = f"[{r[0]}, {r[1]}) n={r[1] - r[0]}"
    if dates is not None:
        s += f" {dates[r[0]]}..{dates[r[1] - 1]}"
    return s


def format_folds(folds: list[Fold], dates: np.ndarray | None = None) -> str:
    """Printable table: one row per fold with train/val/test ranges (and YYYY-MM-DD, inclusive)."""
    ds = None
    if dates is not None:
        ds = np.datetime_as_string(np.asarray(dates).astype("datetime64[D]"), unit="D")
    header = ("fold", "train", "val", "test")
    rows = [header] + [
        (str(f.index), _fmt_range(f.train, ds), _fmt_range(f.val, ds), _fmt_range(f.test, ds))
        for f in folds
    ]
    widths = [max(len(r[j]) for r in rows) for j in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if folds:
        lines.append(f"gap = {folds[0].gap} bars between train|val and val|test")
    return "\n".join(lines)
