"""The Q-heads by name: `make_head(cfg)` is the one place that reads `NetConfig.q_head`.

Every head is a `learner.Head` (its network, exploration, gradient step, greedy choice and
description), so the training run, the policy and `predict` treat them alike. A head added to
`config.Q_HEADS` without an entry here fails `tests/agent/test_heads.py`.
"""

from __future__ import annotations

from collections.abc import Callable

from rl_trader.agent import generic_head, model_head
from rl_trader.agent.learner import Head
from rl_trader.config import RunConfig

HEADS: dict[str, Callable[[RunConfig], Head]] = {"generic": generic_head.make,
                                                  "model": model_head.make}


def make_head(cfg: RunConfig) -> Head:
    """The Q-head `cfg.net.q_head` names, built for `cfg`."""
    return HEADS[cfg.net.q_head](cfg)
