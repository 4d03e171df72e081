"""Tests for rl_trader.data.folds: gaps, ordering, tiling of the test tail, refusals, printing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rl_trader.config import FoldConfig
from rl_trader.data.folds import Fold, format_folds, make_folds
from rl_trader.errors import InputError


def check_layout(folds: list[Fold], n_bars: int, first_bar: int, min_gap: int) -> None:
    """Invariants every layout must satisfy."""
    for f in folds:
        (a, b), (c, d), (e, g) = f.train, f.val, f.test
        assert first_bar <= a < b and c < d and e < g <= n_bars
        assert f.gap >= min_gap
        assert c - b == f.gap and e - d == f.gap  # train | gap | val | gap | test
        assert b < c < e  # order train < val < test
    assert [f.index for f in folds] == list(range(len(folds)))
    assert folds[-1].test[1] == n_bars
    for prev, nxt in zip(folds[:-1], folds[1:], strict=True):
        assert prev.test[1] == nxt.test[0]  # contiguous, non-overlapping, in time order
    lengths = {f.test[1] - f.test[0] for f in folds}
    assert len(lengths) == 1


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("lookback,n_step", [(32, 3), (8, 2), (4, 10)])
def test_default_layout_invariants(k, lookback, n_step):
    n_bars, first_bar = 5031, 251
    folds = make_folds(n_bars, first_bar, FoldConfig(n_folds=k), lookback, n_step)
    assert len(folds) == k
    check_layout(folds, n_bars, first_bar, max(lookback, n_step) + 1)
    assert all(f.gap == max(lookback, n_step) + 1 for f in folds)
    f0 = folds[0]
    block = f0.test[1] - f0.test[0]
    assert f0.val[1] - f0.val[0] == block
    assert f0.train[1] - f0.train[0] >= max(2 * block, 250)
    assert all(f.train[0] == first_bar for f in folds)  # expanding by default


def test_real_embedded_sizes_are_sane():
    folds = make_folds(5031, 252, FoldConfig(n_folds=3), lookback=32, n_step=3)
    check_layout(folds, 5031, 252, 33)
    tb = [f.test[1] - f.test[0] for f in folds]
    # the three test blocks cover most of the last ~half of the data, each > 2 years of days
    assert tb[0] > 500 and 3 * tb[0] > 0.4 * (5031 - 252)
    assert folds[0].train == (252, folds[0].val[0] - 33)
    assert folds[0].train[1] - folds[0].train[0] >= 2 * tb[0]
    # leftover bars go to train: nothing between first_bar and fold 0 is lost
    f0 = folds[0]
    assert f0.train[1] - f0.train[0] + 2 * 33 + tb[0] * 4 == 5031 - 252


def test_rolling_train_has_fixed_length_and_slides():
    cfg = FoldConfig(n_folds=4, expanding=False)
    folds = make_folds(3000, 100, cfg, 16, 3)
    check_layout(folds, 3000, 100, 17)
    lens = {f.train[1] - f.train[0] for f in folds}
    assert len(lens) == 1
    starts = [f.train[0] for f in folds]
    assert starts[0] == 100 and starts == sorted(starts) and len(set(starts)) == 4
    exp = make_folds(3000, 100, FoldConfig(n_folds=4), 16, 3)
    assert [f.test for f in exp] == [f.test for f in folds]
    assert exp[0].train == folds[0].train and exp[-1].train[0] == 100


def test_explicit_sizes_and_gap():
    cfg = FoldConfig(n_folds=2, test_bars=100, val_bars=50, gap=40)
    folds = make_folds(1000, 10, cfg, 8, 2)
    check_layout(folds, 1000, 10, 9)
    assert folds[0].test == (800, 900) and folds[1].test == (900, 1000)
    assert folds[1].val == (900 - 40 - 50, 900 - 40) and folds[1].gap == 40
    assert folds[0].train == (10, 800 - 40 - 50 - 40)
    only_test = make_folds(1000, 10, FoldConfig(n_folds=2, test_bars=120), 8, 2)
    assert only_test[0].val[1] - only_test[0].val[0] == 120


def test_single_fold_works():
    folds = make_folds(800, 50, FoldConfig(n_folds=1), 8, 2)
    assert len(folds) == 1
    check_layout(folds, 800, 50, 9)


def test_too_short_data_is_refused_naming_folds():
    with pytest.raises(InputError, match="--folds") as e:
        make_folds(550, 252, FoldConfig(n_folds=3), 32, 3)
    msg = str(e.value)
    assert "298 usable bars" in msg and "3 folds need at least" in msg
    need = int(msg.split("need at least ")[1].split()[0])
    assert need > 298
    # the stated minimum is exact: with that many usable bars it fits, with one fewer it does not
    make_folds(252 + need, 252, FoldConfig(n_folds=3), 32, 3)
    with pytest.raises(InputError, match="--folds"):
        make_folds(252 + need - 1, 252, FoldConfig(n_folds=3), 32, 3)
    with pytest.raises(InputError, match="--folds"):
        make_folds(5031, 252, FoldConfig(n_folds=3, test_bars=2000), 32, 3)


def test_stated_minimum_is_monotone_for_defaults():
    """Every data length >= the stated minimum fits (no gaps in what is accepted)."""
    with pytest.raises(InputError) as e:
        make_folds(258, 8, FoldConfig(n_folds=3), 8, 2)
    need = int(str(e.value).split("need at least ")[1].split()[0])
    for n in range(need, need + 40):
        check_layout(make_folds(8 + n, 8, FoldConfig(n_folds=3), 8, 2), 8 + n, 8, 9)


def test_first_bar_must_leave_room_for_the_look_back_window():
    with pytest.raises(ValueError, match="look-back window"):
        make_folds(5031, 31, FoldConfig(n_folds=3), lookback=32, n_step=3)


def test_too_small_gap_or_block_is_refused():
    with pytest.raises(InputError, match=r"gap.*33"):
        make_folds(5031, 252, FoldConfig(gap=32), 32, 3)
    make_folds(5031, 252, FoldConfig(gap=33), 32, 3)
    with pytest.raises(InputError, match="test_bars"):
        make_folds(5031, 252, FoldConfig(test_bars=5), 32, 3)


def test_to_dict_is_json_and_format_lists_every_fold():
    folds = make_folds(5031, 252, FoldConfig(n_folds=4), 32, 3)
    d = json.loads(json.dumps([f.to_dict() for f in folds]))
    assert d[2]["test"] == list(folds[2].test) and d[2]["gap"] == 33
    table = format_folds(folds)
    lines = table.splitlines()
    for f in folds:
        assert any(line.split()[0] == str(f.index) for line in lines[1:])
        assert f"[{f.test[0]}, {f.test[1]})" in table
    dates = np.datetime64("2000-01-01") + np.arange(5031)
    dated = format_folds(folds, dates)
    assert str(dates[folds[-1].test[1] - 1]) in dated and "2000-" in dated
