"""The selection rule: first maximum wins, NaN never wins, the same on the host and under jit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl_trader.evaluation.selection import best_of, improves

NAN = float("nan")


@pytest.mark.parametrize("scores, expected", [
    ([0.1, 0.5, 0.2], 1),
    ([0.5, 0.5, 0.2], 0),  # ties: the first
    ([NAN, 0.3, 0.4], 2),  # NaN never wins
    ([0.3, NAN, 0.4], 2),
    ([NAN, NAN], 0),  # nothing wins: the first stands
    ([-1.0, -0.5, -2.0], 1),
])
def test_best_of_is_the_first_maximum_and_nan_never_wins(scores, expected):
    assert best_of(list(range(len(scores))), scores) == expected


def test_the_rule_is_the_same_traced_in_a_scan():
    """A running best over epochs under jit (as the in-program trainer keeps it) picks what
    `best_of` picks on the host."""
    scores = np.array([NAN, 0.2, 0.7, NAN, 0.7, 0.1], np.float32)

    @jax.jit
    def running_best(s):
        def step(carry, x):
            best, i_best, i = carry
            better = improves(x, best)
            return (jnp.where(better, x, best), jnp.where(better, i, i_best), i + 1), None

        (_, i_best, _), _ = jax.lax.scan(step, (jnp.float32(-jnp.inf), 0, 0), s)
        return i_best

    assert int(running_best(scores)) == best_of(list(range(len(scores))), scores) == 2

