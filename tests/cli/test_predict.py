"""rl_trader.cli.predict's console table: what a network that reads no portfolio shows."""

from __future__ import annotations

import pytest

from rl_trader.cli.predict import print_prediction


def prediction(portfolio_weights: dict[str, float]) -> dict:
    member = {"member": 0, "direction": "long", "fraction": 0.5,
              "q_position": {"+0": 0.1, "+0.5": 0.2}, "aux_next_log_return": 1e-4,
              "next_return_second_moment": 1e-4}
    return {"fold": 2, "epoch": 3, "last_date": "2018-12-31", "last_bar": 5030,
            "members": [member], "position_held": 0.0,
            "target": {"direction": "long", "magnitude": 0.5, "fraction": 0.5},
            "prior": {"kind": "flat", "fraction": 0.0, "residual": 0.5},
            "market_vsn_weights": {"ret_1": 0.7, "vol_20": 0.3},
            "portfolio_vsn_weights": portfolio_weights}


@pytest.mark.parametrize("weights, shown, hidden", [
    ({"position": 0.0, "drawdown": 0.0}, "not read", "portfolio: position"),
    ({"position": 0.6, "drawdown": 0.4}, "portfolio: position", "not read")])
def test_portfolio_weights_or_not_read(capsys, weights, shown, hidden):
    """All-zero portfolio weights (the model head has no portfolio VSN) read "not read", not a
    column of zeros; a network with the VSN shows its weights."""
    print_prediction(prediction(weights))
    out = capsys.readouterr().out
    assert shown in out and hidden not in out


def test_the_target_is_told_as_prior_plus_residual(capsys):
    """`--prior vol_target`: the target is printed as the prior plus the agent's residual;
    under flat the prior is not mentioned."""
    print_prediction(prediction({"position": 0.0}))
    assert "prior" not in capsys.readouterr().out
    print_prediction({**prediction({"position": 0.0}),
                      "prior": {"kind": "vol_target", "fraction": 0.8, "residual": -0.3}})
    out = " ".join(capsys.readouterr().out.split())
    assert "fraction +0.500 = prior +0.800 (vol_target) + residual -0.300" in out
