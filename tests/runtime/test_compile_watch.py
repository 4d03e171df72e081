"""The compile announcements and the time-left estimate, alone and in a run's log lines."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import pytest

from rl_trader.run import experiment
from rl_trader.run.prepare import prepare
from rl_trader.runtime.compile_watch import CompileLog, format_seconds, time_left, totals, unwatched
from tests.helpers import tiny_config


def test_the_first_call_is_announced_before_and_reported_after():
    lines: list[str] = []
    log = CompileLog(lines.append)
    f = jax.jit(lambda x: jnp.sin(x) * 3.0 + 0.123456)  # a program no other test compiles
    with log.first("toy program"):
        lines.append("call")
        f(jnp.arange(7.0)).block_until_ready()
    assert lines[0].startswith("compiling the toy program") and lines[1] == "call"
    assert re.fullmatch(r"toy program: \d+ program\(s\) compiled in [\d.]+s \(persistent "
                        r"cache (hit|miss: compiled and cached|off|hit for \d+ of \d+)\); "
                        r"first call [\d.]+s", lines[2]), lines[2]
    with log.first("toy program"):  # later calls: silent
        f(jnp.arange(7.0))
    assert len(lines) == 3
    with log.first("cached program"):  # nothing new to compile
        f(jnp.arange(7.0))
    assert lines[-1] == "cached program: already compiled in this process"


def test_totals_count_compilations():
    before = totals()
    jax.jit(lambda x: x * 2.5 - 0.987)(jnp.ones(3)).block_until_ready()
    d = totals().minus(before)
    assert d.programs >= 1 and d.seconds > 0


def test_an_unwatched_thread_compiles_without_being_counted():
    import threading

    before = totals()
    with unwatched():
        jax.jit(lambda x: x * 4.5 - 0.321)(jnp.ones(3)).block_until_ready()
    assert totals().minus(before).programs == 0

    def background():  # another thread: its flag is its own
        with unwatched():
            jax.jit(lambda x: x * 5.5 - 0.654)(jnp.ones(3)).block_until_ready()

    t = threading.Thread(target=background)
    t.start()
    t.join()
    assert totals().minus(before).programs == 0
    jax.jit(lambda x: x * 6.5 - 0.111)(jnp.ones(3)).block_until_ready()  # watched again
    assert totals().minus(before).programs >= 1


@pytest.mark.parametrize("seconds, text", [(0.4, "0s"), (42, "42s"), (185, "3m05s"),
                                           (3725, "1h02m"), (float("nan"), "?")])
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text


def test_time_left_is_the_mean_epoch_times_the_epochs_left():
    assert time_left([10.0, 14.0], 3) == 36.0
    assert time_left([5.0], 0) == 0.0
    assert time_left([], 2) != time_left([], 2)  # unknown: NaN


def test_a_runs_log_announces_compiles_and_estimates_the_time_left(tmp_path):
    """The tiny run's log (issue 28): a line before each stage's first compilation, whether
    the persistent cache served it, and on every epoch line the training time left; one line
    per event (the fold layout is a table), no carriage returns."""
    logged: list[str] = []
    cfg = tiny_config()
    experiment.run_experiment(prepare(cfg), tmp_path / "run", log=logged.append)
    assert "\r" not in "".join(logged)
    assert all("\n" not in ln for ln in logged[1:])
    lines = "\n".join(logged).splitlines()
    first_epoch = next(i for i, ln in enumerate(lines) if ln.startswith("fold 0 epoch 0 "))
    for what in ("initialisation program", "training program", "validation program"):
        before = next(i for i, ln in enumerate(lines) if ln.startswith(f"compiling the {what}"))
        after = next(i for i, ln in enumerate(lines) if ln.startswith(f"{what}: "))
        assert before < after < first_epoch, what
    assert any(ln.startswith("compiling the scoring programs") for ln in lines[first_epoch:])
    epochs = [ln for ln in lines if re.match(r"fold \d epoch \d ", ln)]
    assert len(epochs) == cfg.folds.n_folds * cfg.train.epochs
    left = [re.search(r"training left ~(\S+)$", ln) for ln in epochs]
    assert all(left), epochs
    assert left[-1].group(1) == "0s"  # the last epoch's line: nothing left to train
