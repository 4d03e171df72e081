"""Stage timing adds up per name and survives an exception."""

import time

import pytest

from rl_trader.runtime.stopwatch import Stopwatch


def test_stages_add_up_and_an_exception_still_counts():
    clock = Stopwatch()
    for _ in range(2):
        with clock.stage("a"):
            time.sleep(0.01)
    with pytest.raises(RuntimeError), clock.stage("b"):
        raise RuntimeError
    assert clock.seconds["a"] >= 0.02 and "b" in clock.seconds
    assert set(clock.rounded()) == {"a", "b"}


def test_a_lap_holds_only_the_stages_since_the_previous_lap():
    clock = Stopwatch()
    with clock.stage("a"):
        time.sleep(0.01)
    first = clock.lap()
    with clock.stage("b"):
        pass
    second = clock.lap()
    assert set(first) == {"a"} and first["a"] >= 0.01
    assert set(second) == {"b"}
    assert clock.lap() == {}
    assert set(clock.rounded()) == {"a", "b"}  # the totals keep every stage
