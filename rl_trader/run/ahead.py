"""The run's first programs compiled ahead, in a thread, while the run fits its trees.

A run that fits trees (`Prepared.needs_trees`: the tree forecast's column or the trust in the
forecast) spends seconds on the host before its first device call, and compiling the epoch
program is the longest wait after it. The program depends only on the fold data's shapes,
dtypes and placement, all known before the trees: the column's width is fixed by the config
and the trust is one scalar (`Prepared.placeholder_fold_data`). `CompileAhead` builds the
cohort on that placeholder data and lowers and compiles the population's epoch program
(`Population.epoch`) from the shapes of its initial state; JAX keeps the executable in its
in-memory cache, so the run's first epoch, on the real data, calls it without compiling
(and nothing in the result depends on where it was compiled). On one H200 the default
`make train FOLDS=3` took 49.9 s cold with it and 59.6 s without (the trees fit on 2 OpenMP
threads both times, `tree_fits.tree_threads`; 2026-12-07; the fits now run in worker
processes, `tree_fits.FitPool`).

Only where the host's cores wait for an accelerator (`experiment.host_is_idle`): on a CPU
backend the compiler and the fits share the same cores, and the default `make train FOLDS=3`
on a 2-core CPU took longer with it (249.6 s against 235.4 s: the trees 31.4 s instead of
11.7 s, the compile in the thread 23.4 s; 2026-12-07, the fits then in the run's process,
holding its interpreter lock). Compiling the initialisation and epoch programs in two threads
at once gains nothing there either: XLA's CPU compile already uses both cores (12.2 s against
11.8–12.1 s one after the other, docs/history/benchmarks.md).

The initialisation program and the first validation's programs (`validation.validate`) are
made ready in the same thread, beside the epoch's compile: the initialisation is traced first,
alone, under a process-wide JAX setting (`population.threefry_kernels`) that must not change
while another thread traces (the run's own thread fits trees meanwhile and traces nothing; it
waits for `CompileAhead` before building its cohort); then the epoch program is traced on the
shapes and shardings of the initialisation's output, and while XLA compiles it a second thread
compiles the initialisation, calls it on the placeholder data and takes the validation path
once on its output, which compiles that path's programs with the arguments the run's first
epoch will give them. On one H100 the default `make train FOLDS=3` took 36.4 s cold so (at
`d4458c9`, init then traced twice), against 45.8 s when the thread compiled the epoch alone
(with the scoring's baselines made during training, `scoring.BaselinesOnTest`; 2026-12-08).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import jax
import numpy as np

from rl_trader.run.prepare import Prepared, build_cohort
from rl_trader.run.validation import validate
from rl_trader.runtime.compile_watch import unwatched
from rl_trader.runtime.devices import shard_population
from rl_trader.training.population import Cohort, threefry_kernels
from rl_trader.training.train import EpochMetrics


class CompileAhead:
    """Builds the placeholder cohort and compiles `prep`'s initialisation, epoch and first
    validation's programs for `devices` devices in a background thread, from the moment it
    is made (its compilations are left out of the run's compile log,
    `compile_watch.unwatched`)."""

    def __init__(self, prep: Prepared, devices: int | None) -> None:
        pool = ThreadPoolExecutor(1, thread_name_prefix="compile-ahead")
        self._future = pool.submit(_compile_ahead, prep, devices)
        pool.shutdown(wait=False)

    def wait(self) -> str:
        """Block until the thread is done (the run traces nothing of its own meanwhile); one
        line for the run's log. An error in the thread costs only the head start: the run then
        compiles what is missing itself, and meets the error again if it is real."""
        try:
            return (f"the initialisation, training and validation programs: built, traced and "
                    f"compiled in {self._future.result():.1f}s beside the tree fits")
        except Exception as err:  # noqa: BLE001 (reported, and the run compiles it itself)
            return (f"the programs could not all be compiled ahead ({type(err).__name__}: "
                    f"{err}); the run compiles what is missing")


def _compile_ahead(prep: Prepared, devices: int | None) -> float:
    """The thread's work; its seconds. The placeholder cohort's device arrays are dropped when
    it returns, before the run builds its own."""
    t0 = time.perf_counter()
    with unwatched():
        c = build_cohort(prep, devices, placeholder=True)
        init = threefry_kernels(c.pop.init_program.lower)(c.keys, c.data)  # traced alone
        # the epoch lowered on the initial state's shapes and shardings
        epoch = c.pop.epoch.lower(init.out_info, c.data, c.hps)
        with ThreadPoolExecutor(1, thread_name_prefix="compile-ahead-side") as side:
            first = side.submit(_first_validation, prep, c, init, epoch.out_info[1])
            epoch.compile()
            first.result()
    return time.perf_counter() - t0


def _first_validation(prep: Prepared, c: Cohort, init: jax.stages.Lowered,
                      metrics: EpochMetrics) -> None:
    """Compile the initialisation (`init`, lowered), call it on the placeholder data and
    validate its members as an epoch's (`metrics`: the epoch's output shapes, as zeros on the
    population's sharding): the run's first validation then finds its programs compiled."""
    with unwatched():
        runners = init.compile()(c.keys, c.data)
        zeros = shard_population(jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), metrics),
                                 c.mesh)
        validate(prep, c, runners, zeros)
