"""The trees' fits cached on disk by their inputs: a hit returns what fitting would, any
change of input misses, `off` fits every time, an unreadable entry is fitted again."""

import pickle

import jax
import numpy as np
import pytest

from rl_trader.baselines import gbm, tree_cache, tree_fits
from rl_trader.baselines.gbm import cross_fitted_forecast, fit_gbm
from rl_trader.run.prepare import prepare
from tests.helpers import tiny_config


@pytest.fixture(scope="module")
def fold():
    cfg = tiny_config()
    prep = prepare(cfg)
    f = prep.folds[0]
    return cfg, prep.fold_data(0), int(f.val[1] - f.val[0]), int(f.gap)


def counting_trees(monkeypatch) -> list:
    """Patch `tree_fits.regressor` to count the regressors made (each one is a fit)."""
    made, trees = [], tree_fits.regressor
    monkeypatch.setattr(tree_fits, "regressor", lambda *a: made.append(a) or trees(*a))
    return made


def test_a_second_fit_of_the_same_inputs_reads_the_cache(fold, tmp_path, monkeypatch):
    cfg, data, val_len, gap = fold
    monkeypatch.setenv(tree_cache.CACHE_ENV, str(tmp_path))
    made = counting_trees(monkeypatch)
    first = fit_gbm(data, val_len, cfg)
    y_first = cross_fitted_forecast(data, first, gap)
    fits = len(made)
    assert fits == len(gbm.GBM_LEAVES) + gbm.CROSS_FIT_BLOCKS
    second = fit_gbm(data, val_len, cfg)
    y_second = cross_fitted_forecast(data, second, gap)
    assert len(made) == fits  # nothing fitted again
    np.testing.assert_array_equal(second.forecast.y_hat, first.forecast.y_hat)
    np.testing.assert_array_equal(second.val_sharpe, first.val_sharpe)
    assert (second.leaves, second.iterations) == (first.leaves, first.iterations)
    np.testing.assert_array_equal(y_second, y_first)
    x = np.asarray(data.features, np.float64)
    np.testing.assert_array_equal(pickle.loads(second.model).predict(x),
                                  pickle.loads(first.model).predict(x))
    # off: no cache, the same figures from new fits
    monkeypatch.setenv(tree_cache.CACHE_ENV, "off")
    third = fit_gbm(data, val_len, cfg)
    assert len(made) == fits + len(gbm.GBM_LEAVES)
    np.testing.assert_array_equal(third.forecast.y_hat, first.forecast.y_hat)


def test_any_change_of_input_misses(fold, tmp_path, monkeypatch):
    cfg, data, val_len, _ = fold
    monkeypatch.setenv(tree_cache.CACHE_ENV, str(tmp_path))
    made = counting_trees(monkeypatch)
    fit_gbm(data, val_len, cfg)
    n = len(made)
    y = np.asarray(data.aux_target).copy()
    y[int(data.train[0]) + 3] += 1e-3  # one train target
    fit_gbm(data.replace(aux_target=jax.numpy.asarray(y)), val_len, cfg)
    assert len(made) == 2 * n
    x = np.asarray(data.features).copy()
    x[int(data.train[0]) + 5, 2] -= 1e-3  # one feature of one train bar
    fit_gbm(data.replace(features=jax.numpy.asarray(x)), val_len, cfg)
    assert len(made) == 3 * n
    key = tree_cache.fit_key("gbm", (x,), {"a": 1})
    assert key != tree_cache.fit_key("gbm", (x,), {"a": 2})
    assert key != tree_cache.fit_key("gbm", (x.astype(np.float64),), {"a": 1})
    assert key != tree_cache.fit_key("gbm block", (x,), {"a": 1})


def test_an_unreadable_entry_is_fitted_again_and_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv(tree_cache.CACHE_ENV, str(tmp_path))
    key = tree_cache.fit_key("test", (np.arange(3),), {})
    (tmp_path / f"{key}.pkl").write_bytes(b"not a pickle")
    calls = []
    assert tree_cache.cached(key, lambda: calls.append(1) or [1, 2]) == [1, 2]
    assert tree_cache.cached(key, lambda: calls.append(1) or [3]) == [1, 2]
    assert len(calls) == 1
    assert [p.name for p in tmp_path.iterdir()] == [f"{key}.pkl"]  # no temporary left


def test_an_unwritable_directory_costs_the_cache_not_the_fit(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(tree_cache.CACHE_ENV, str(blocker / "cache"))  # under a file
    assert tree_cache.cached("k", lambda: 7) == 7
