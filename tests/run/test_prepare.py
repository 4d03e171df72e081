"""Stage 1 with pooled instruments (`--data target,other,…`): each other instrument adds
training episodes from its own bars inside each fold's train dates, normalised on those bars
alone; nothing else about the target changes."""

import dataclasses

import jax
import numpy as np
import pytest

from rl_trader.data.fold_data import training_bars
from rl_trader.errors import InputError
from rl_trader.run.prepare import prepare
from rl_trader.training.train import make_train
from tests.helpers import tiny_config

TARGET, OTHER = "synthetic:ar1:1200:1", "synthetic:ar1:900:2"


def _prep(data: str):
    """The tiny run's preparation on `data`, without the tree forecast and the trust (which
    pooled instruments refuse)."""
    cfg = tiny_config()
    return prepare(dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, path=data),
                                       features=dataclasses.replace(cfg.features,
                                                                    tree_forecast="off"),
                                       env=dataclasses.replace(cfg.env, view="excess")))


@pytest.fixture(scope="module")
def pooled():
    return _prep(f"{TARGET},{OTHER}"), _prep(TARGET)


def test_the_pooled_instrument_trains_only_inside_each_folds_train_dates(pooled):
    prep, alone = pooled
    assert [f.to_dict() for f in prep.folds] == [f.to_dict() for f in alone.folds]
    other = prep.pool[0][0]
    first = prep.pool[0][1].first_valid + prep.cfg.features.lookback
    for f, [seg] in zip(prep.folds, prep.pool_segments, strict=True):
        lo, hi = prep.bars.dates[f.train[0]], prep.bars.dates[f.train[1] - 1]
        assert seg.start >= first and seg.end > seg.start
        assert other.dates[seg.start] >= lo and other.dates[seg.end - 1] <= hi
        assert seg.end == len(other) or other.dates[seg.end] > hi  # every train-date bar
    assert prep.data_sha256 != alone.data_sha256 and alone.data_sha256 == alone.bars.sha256


def test_pooled_fold_data_appends_the_other_instrument_normalised_on_its_own_bars(pooled):
    prep, alone = pooled
    k = 1
    data, base = prep.fold_data(k), alone.fold_data(k)
    n, [seg] = len(prep.bars), prep.pool_segments[k]
    np.testing.assert_array_equal(np.asarray(data.features[:n]), np.asarray(base.features[:n]))
    np.testing.assert_array_equal(np.asarray(data.episodes),
                                  [prep.folds[k].train, (n + seg.start, n + seg.end)])
    np.testing.assert_array_equal(np.asarray(data.prices.close[n:n + len(seg.close)]),
                                  seg.close.astype(np.float32))
    own = np.asarray(data.features[n + seg.start:n + seg.end])  # its own train-date bars
    np.testing.assert_allclose(own.mean(0), 0.0, atol=0.15)  # normalised on them (then clipped)
    mask = np.asarray(training_bars(data))
    assert mask[prep.folds[k].train[0]] and not mask[prep.folds[k].train[1] - 1]
    assert mask[n + seg.start] and not mask[n + seg.end - 1] and not mask[n + seg.end]
    assert mask.sum() == (prep.folds[k].train[1] - prep.folds[k].train[0] - 1) + (
        seg.end - seg.start - 1)


def test_episodes_start_in_every_range_and_never_leave_their_own(pooled):
    prep, _ = pooled
    cfg = dataclasses.replace(prep.cfg, train=dataclasses.replace(prep.cfg.train, n_envs=64))
    data = prep.fold_data(0)
    trainer = make_train(cfg)
    runner = jax.jit(trainer.init)(jax.random.PRNGKey(0), data)
    ranges = np.asarray(data.episodes)
    seen = np.asarray(runner.replay.data.state_tm1.t)[:int(runner.replay.size)].ravel()
    stops = np.asarray(runner.replay.data.state_tm1.stop)[:int(runner.replay.size)].ravel()
    which = [np.flatnonzero((ranges[:, 0] <= t) & (t < ranges[:, 1])) for t in seen]
    assert all(len(w) == 1 for w in which)  # every visited bar is inside one range
    for t, s, [i] in zip(seen, stops, which, strict=True):
        assert t < s <= ranges[i, 1] - 1  # and its episode stops inside that range
    assert {int(w[0]) for w in which} == {0, 1}  # both instruments are trained on


def test_a_pooled_file_without_train_dates_is_refused_in_one_line(tmp_path):
    from rl_trader.data.synthetic import from_spec

    bars = from_spec("synthetic:ar1:300:3").bars
    path = tmp_path / "late.csv"
    late = bars.dates + np.timedelta64(365 * 40, "D")  # after every train date of the target
    rows = ["date,open,high,low,close,volume"] + [
        f"{np.datetime_as_string(d, 'D')},{o},{h},{lo},{c},{v}" for d, o, h, lo, c, v in
        zip(late, bars.open, bars.high, bars.low, bars.close, bars.volume, strict=True)]
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(InputError, match=r"late\.csv' has 0 usable bars in fold 0's train dates"):
        _prep(f"{TARGET},{path}")
    with pytest.raises(InputError, match="an empty item"):
        _prep(f"{TARGET},")


def test_a_repeated_or_other_frequency_instrument_is_refused_in_one_line(tmp_path):
    from rl_trader.data.synthetic import from_spec

    with pytest.raises(InputError, match=f"'{TARGET}' repeats an instrument"):
        _prep(f"{TARGET},{TARGET}")
    with pytest.raises(InputError, match=f"'{OTHER}' repeats an instrument"):
        _prep(f"{TARGET},{OTHER},{OTHER}")
    bars = from_spec("synthetic:ar1:300:3").bars
    weekly = bars.dates[0] + np.arange(len(bars)) * np.timedelta64(7, "D")
    path = tmp_path / "weekly.csv"
    path.write_text("\n".join(["date,open,high,low,close,volume"] + [
        f"{np.datetime_as_string(d, 'D')},{o},{h},{lo},{c},{v}" for d, o, h, lo, c, v in
        zip(weekly, bars.open, bars.high, bars.low, bars.close, bars.volume, strict=True)]))
    with pytest.raises(InputError, match=r"weekly\.csv' has about 52 bars per year, the target "
                                         r"252: pooled instruments must share"):
        _prep(f"{TARGET},{path}")


def test_a_pooled_run_trains_and_says_what_it_pooled(tmp_path):
    import json

    from experiments.sweep import refuse_gate_data
    from rl_trader.cli.train import main
    from tests.helpers import TINY_ARGS

    run_dir = tmp_path / "pooled"
    assert main([*TINY_ARGS, "--epochs", "1", "--no-report", "--data", f"{TARGET},{OTHER}",
                 "--tree-forecast", "off", "--view", "excess", "--run-dir", str(run_dir)]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["data_pool"] == [OTHER]
    assert all(np.isfinite(f["test_sharpe"]) for f in summary["folds"])
    with pytest.raises(InputError, match="convergence gate's"):  # a pooled gate draw too
        refuse_gate_data(f"{TARGET},synthetic:ar1:900:1001")


def test_the_trees_and_the_trust_are_refused_with_pooled_instruments():
    """The defaults (`--tree-forecast validation`, `--view trusted`), with the way out in the
    same line: the options still to pass, and only those."""
    cfg = tiny_config()
    pooled = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, path=f"{TARGET},{OTHER}"))
    assert (cfg.features.tree_forecast, cfg.env.view) == ("validation", "trusted")
    with pytest.raises(InputError, match="option --data .*pooled instruments need "
                                         "--tree-forecast off --view excess "):
        prepare(pooled)
    no_trees = dataclasses.replace(pooled, features=dataclasses.replace(cfg.features,
                                                                        tree_forecast="off"))
    with pytest.raises(InputError, match="pooled instruments need --view excess "):
        prepare(no_trees)


def test_the_trees_are_fit_in_their_own_step_and_no_fold_data_goes_without_them():
    """`prepare(cfg, fit_trees=False)` reads and checks everything but fits no tree (a command
    refuses bad input before the slow part); its fold arrays are refused until `with_trees`,
    which then gives what `prepare(cfg)` gives; with `--tree-forecast off` it is a no-op."""
    from rl_trader.run.prepare import with_trees

    cfg = tiny_config()
    assert cfg.features.tree_forecast == "validation"
    lazy = prepare(cfg, fit_trees=False)
    assert lazy.needs_trees and lazy.trees == ()
    with pytest.raises(RuntimeError, match="with_trees"):
        lazy.fold_data(0)
    fitted, whole = with_trees(lazy), prepare(cfg)
    assert not fitted.needs_trees and with_trees(fitted) is fitted
    assert [t.choice for t in fitted.trees] == [t.choice for t in whole.trees]
    for k in range(len(whole.folds)):
        np.testing.assert_array_equal(np.asarray(fitted.fold_data(k).tree_forecast),
                                      np.asarray(whole.fold_data(k).tree_forecast))
    off = _prep(TARGET)
    assert with_trees(off) is off and not off.needs_trees


@pytest.mark.parametrize("tree_forecast, view", [("validation", "trusted"), ("off", "trusted"),
                                                 ("validation", "excess"), ("off", "excess")])
def test_the_placeholder_fold_data_is_the_fold_datas_shape(tree_forecast, view):
    """What the training program is compiled ahead on (`run.ahead`) has every leaf's shape,
    dtype, weak type and placement of the fold data the run trains on, trees fit or not."""
    cfg = tiny_config()
    cfg = dataclasses.replace(
        cfg, features=dataclasses.replace(cfg.features, tree_forecast=tree_forecast),
        env=dataclasses.replace(cfg.env, view=view))
    prep = prepare(cfg)
    for k in range(len(prep.folds)):
        real, placeholder = prep.fold_data(k), prep.placeholder_fold_data(k)
        assert jax.tree.structure(real) == jax.tree.structure(placeholder)
        for a, b in zip(jax.tree.leaves(real), jax.tree.leaves(placeholder), strict=True):
            assert (a.shape, a.dtype, a.weak_type, a.sharding) == (
                b.shape, b.dtype, b.weak_type, b.sharding)
