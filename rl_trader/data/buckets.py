"""Shape buckets: lengths rounded up so that data of another length reuses compiled programs.

An XLA program is compiled for its array shapes. The bar count of a file and the lengths of its
segments would make every new file compile every program again; instead the bar axis is padded
to `bucket(T)` bars (edge copies of the last bar, `fold_data.pad_bars`) and rollouts run a
bucketed number of steps (`Prepared.val_steps`, `test_steps`), their results cut to the true
length on the host (`trim`) or masked inside a program (`metrics.sharpe(..., valid=n)`).
Buckets are m·2^k with m ∈ {4, …, 8}, so padding adds less than 25 %: 5,000 → 5,120,
7,983 → 8,192, 1,234 → 1,280.
"""

from __future__ import annotations

import jax
import numpy as np


def bucket(n: int) -> int:
    """The smallest m·2^k ≥ n with 4 ≤ m ≤ 8 (n itself when n ≤ 8)."""
    if n <= 8:
        return n
    step = 2 ** ((n - 1).bit_length() - 3)  # n / step ∈ (4, 8]
    return -(-n // step) * step


def trim(tree, n: int, axis: int):
    """Every leaf of `tree` (host arrays) cut to its first `n` entries along `axis`."""
    index = (slice(None),) * axis + (slice(0, n),)
    return jax.tree.map(lambda x: np.asarray(x)[index], tree)
