"""Stage timing adds up per name and survives an exception."""

import time

import pytest

from rl_trader.stopwatch import Stopwatch


def test_stages_add_up_and_an_exception_still_counts():
    clock = Stopwatch()
    for _ in range(2):
        with clock.stage("a"):
            time.sleep(0.01)
    with pytest.raises(RuntimeError), clock.stage("b"):
        raise RuntimeError
    assert clock.seconds["a"] >= 0.02 and "b" in clock.seconds
    assert set(clock.rounded()) == {"a", "b"}
