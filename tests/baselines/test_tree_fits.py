"""The trees' fits as jobs: a worker's fit is the same bits as this process's, cached by the
run's process; a job already cached is not sent to a worker; dead workers cost only the
speed-up; scikit-learn's thread count changes no bit."""

import pickle
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool

import numpy as np
import pytest

from rl_trader.baselines import tree_cache, tree_fits
from rl_trader.baselines.gbm import block_jobs, staged_jobs
from rl_trader.baselines.tree_fits import (
    TREE_THREADS,
    FitJob,
    FitPool,
    fit_workers,
    tree_threads,
)
from rl_trader.run.prepare import prepare
from rl_trader.runtime.workers import spawn_pool
from tests.helpers import tiny_config


@pytest.fixture(scope="module")
def jobs():
    cfg = tiny_config()
    prep = prepare(cfg, fit_trees=False)
    data = prep._arrays(0)
    return staged_jobs(data, cfg) + block_jobs(data, 4, 10, int(prep.folds[0].gap))


def test_workers_make_the_same_bits_and_the_run_caches_them(jobs, tmp_path, monkeypatch):
    """Two spawned workers make every job bit for bit as this process does; the results are
    cached as they are asked for, and a second pool finds them all cached (no worker)."""
    monkeypatch.setenv(tree_cache.CACHE_ENV, "off")
    here = [job.run() for job in jobs]
    monkeypatch.setenv(tree_cache.CACHE_ENV, str(tmp_path))
    with FitPool(2) as pool:
        pool.submit(jobs)
        assert pool._pool is not None and set(pool._futures) == {job.key for job in jobs}
        there = [pool.result(job) for job in jobs]
    x = jobs[0].args[0]
    for a, b in zip(here, there, strict=True):
        if isinstance(a, tuple):  # a staged fit: its forecasts, and its trees' (the pickles
            # themselves differ: they hold the thread count they were made on)
            np.testing.assert_array_equal(a[0], b[0])
            a, b = (pickle.loads(f[1]).predict(x) for f in (a, b))
        np.testing.assert_array_equal(a, b)
    assert all(tree_cache.has(job.key) for job in jobs)
    with FitPool(2) as again:
        again.submit(jobs)
        assert again._pool is None and not again._futures


def test_without_workers_a_job_is_made_when_asked(jobs, tmp_path, monkeypatch):
    """Fewer than two workers: submit starts nothing; result makes the fit here and caches it."""
    monkeypatch.setenv(tree_cache.CACHE_ENV, str(tmp_path))
    made = []
    monkeypatch.setattr(FitJob, "run", lambda self: made.append(self.key) or 7)
    with FitPool(1) as pool:
        pool.submit(jobs[:2])
        assert pool._pool is None
        assert pool.result(jobs[0]) == 7 and made == [jobs[0].key]
    assert tree_cache.load(jobs[0].key) == 7


def test_dead_workers_cost_only_the_speed_up(jobs, tmp_path, monkeypatch):
    """A job whose worker died (`BrokenProcessPool`) is made here, and cached."""
    monkeypatch.setenv(tree_cache.CACHE_ENV, str(tmp_path))
    pool, job = FitPool(2), jobs[-1]
    broken: Future = Future()
    broken.set_exception(BrokenProcessPool("a worker died"))
    pool._futures[job.key] = broken
    np.testing.assert_array_equal(pool.result(job), job.run())
    assert tree_cache.has(job.key) and not pool._futures


def test_workers_are_the_cores_less_the_spare_within_the_thread_share(monkeypatch):
    monkeypatch.setattr(tree_fits, "host_cores", lambda: 16)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert fit_workers() == 16 and fit_workers(spare_cores=2) == 14
    monkeypatch.setenv("OMP_NUM_THREADS", "4")  # one process of four side by side
    assert fit_workers(spare_cores=2) == 4
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert fit_workers() == 1


def test_a_pool_that_breaks_at_submit_is_given_up(jobs, tmp_path, monkeypatch):
    """Workers that die before a submit: the pool is given up, and every fit is made here."""
    monkeypatch.setenv(tree_cache.CACHE_ENV, str(tmp_path))

    class Broken:
        def submit(self, *args):
            raise BrokenProcessPool("a worker died")

        def shutdown(self, **kwargs):
            pass

    pool = FitPool(2)
    pool._pool = Broken()
    pool.submit(jobs[:2])
    assert pool._pool is None and not pool._futures
    pool.submit(jobs[2:4])  # no workers from now on
    assert pool._pool is None
    np.testing.assert_array_equal(pool.result(jobs[-1]), jobs[-1].run())


def test_with_trees_through_workers_is_the_same_as_here(monkeypatch):
    """`with_trees` with two workers (every fold's fits, then each fold's tree-forecast
    blocks) gives the same trees, columns, trusts and choices as with none."""
    from rl_trader.run import prepare as prepare_module

    monkeypatch.setenv(tree_cache.CACHE_ENV, "off")
    lazy = prepare(tiny_config(), fit_trees=False)
    here = prepare_module.with_trees(lazy).trees
    monkeypatch.setattr(prepare_module, "fit_workers", lambda spare_cores=0: 2)
    spawned = []
    monkeypatch.setattr(tree_fits, "spawn_pool", lambda *a: spawned.append(a) or spawn_pool(*a))
    there = prepare_module.with_trees(lazy).trees
    assert spawned  # the fits were made in workers
    assert all(t.trust is not None and t.choice is not None for t in here)  # every kind of fit
    for a, b in zip(here, there, strict=True):
        np.testing.assert_array_equal(a.fit.forecast.y_hat, b.fit.forecast.y_hat)
        assert (a.fit.leaves, a.fit.iterations, a.choice, a.trust) == (
            b.fit.leaves, b.fit.iterations, b.choice, b.trust)
        np.testing.assert_array_equal(a.column, b.column)


def test_a_fit_error_is_raised_not_hidden(tmp_path, monkeypatch):
    """A job that fails in a worker raises its error at `result`."""
    monkeypatch.setenv(tree_cache.CACHE_ENV, str(tmp_path))
    x, y = np.zeros((4, 2)), np.zeros(4)
    bad = [FitJob(f"bad{i}", tree_fits.block_fit, (x, y, np.ones(4, bool), 0, 5, 0, 2))
           for i in range(2)]  # 0 leaves: refused by scikit-learn
    with FitPool(2) as pool:
        pool.submit(bad)
        with pytest.raises(ValueError, match="max_leaf_nodes"):
            pool.result(bad[0])
    assert not tree_cache.has("bad0")


def test_trees_fit_on_tree_threads_and_their_count_changes_no_bit():
    """Inside `tree_threads` scikit-learn's OpenMP runs TREE_THREADS threads in this thread
    (and the limit is lifted after), or fewer where fewer are set; a fit on one thread or on
    TREE_THREADS is the same."""
    from sklearn.ensemble import HistGradientBoostingRegressor
    from threadpoolctl import threadpool_info, threadpool_limits

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(3000, 12)), rng.normal(size=3000)

    def fit_predict():
        return HistGradientBoostingRegressor(max_iter=30, max_leaf_nodes=8,
                                             random_state=0).fit(x, y).predict(x)

    def openmp_threads():
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "openmp"}

    with threadpool_limits(limits=1, user_api="openmp"):
        one = fit_predict()
        assert openmp_threads() == {1}
        with tree_threads():  # fewer set already: kept
            assert openmp_threads() == {1}
    with threadpool_limits(limits=TREE_THREADS + 2, user_api="openmp"):
        with tree_threads():
            assert openmp_threads() == {TREE_THREADS}
            np.testing.assert_array_equal(fit_predict(), one)
        assert openmp_threads() == {TREE_THREADS + 2}
