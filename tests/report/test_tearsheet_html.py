"""The tear sheet's positions section: with a prior, the prior and the residual apart."""

import numpy as np

from rl_trader.report.plots import FoldReturns, has_prior, stitch
from rl_trader.report.tearsheet_html import positions


def figure(fn, *args):
    """The report's figure maker, drawing for real (a PNG as base64)."""
    return fn(*args)


def fold(k: int, prior: np.ndarray | None) -> FoldReturns:
    n = len(prior) if prior is not None else 4
    return FoldReturns(k, np.arange(k * n, (k + 1) * n), {"agent": np.full(n, 0.001)},
                       position=np.array([0.5, 1.0, 0.25, 0.5])[:n], prior=prior)


def test_the_residual_is_shown_only_where_a_prior_was_held():
    flat = stitch([fold(0, np.zeros(4)), fold(1, np.zeros(4))])
    assert not has_prior(flat)
    html = "".join(positions(flat, 252.0, figure))
    assert "residual" not in html and "agent position" in html
    held = stitch([fold(0, np.full(4, 0.5)), fold(1, np.array([0.5, 0.75, 0.25, 0.5]))])
    assert has_prior(held) and held.prior.shape == (8,)
    html = "".join(positions(held, 252.0, figure))
    # residuals 0, .5, −.25, 0, 0, .25, 0, 0: mean |u| 0.125
    assert "mean |residual|" in html and "0.125" in html
    older = stitch([fold(0, None)])  # a run before the prior was recorded
    assert older.prior is None and "residual" not in "".join(positions(older, 252.0, figure))
