"""The sizing-ceiling diagnostic: rounding to the magnitude grid, costs, and its ordering."""

import json

import numpy as np

from experiments.sizing_ceiling import ceiling, main, net_returns, rounded
from rl_trader.config import EnvConfig


def test_rounded_keeps_the_sign_and_snaps_to_the_grid():
    p = np.array([0.0, 0.1, -0.13, 0.3, -0.62, 0.9, -1.0])
    np.testing.assert_allclose(rounded(p, (0.25, 0.5, 0.75, 1.0)),
                               [0.0, 0.0, -0.25, 0.25, -0.5, 1.0, -1.0])


def test_net_returns_by_hand():
    # p held over the next bar; 1 bp a unit traded: trades |0.5−0|, |−1−0.5|, |0−(−1)| are
    # charged on the bar they are held over (the last position is never held).
    p = np.array([0.5, -1.0, 0.0, 0.0])
    r = np.array([9.0, 0.02, -0.01, 0.03])
    one_bp = EnvConfig(commission_bps=0.5, slippage_bps=0.5)
    np.testing.assert_allclose(net_returns(p, r, one_bp),
                               [0.5 * 0.02 - 0.5e-4, 0.01 - 1.5e-4, 0.0 - 1e-4])


def test_sizing_by_the_forecast_beats_its_sign_on_ar1():
    row = ceiling("ar1_strong", 0, 2000, EnvConfig())
    assert row["prop"] > row["sign"] > 0


def test_main_writes_the_means(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main(["--draws", "1", "--bars", "600", "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert set(got["sharpe"]) == {"ar1_weak", "ar1", "ar1_strong", "vol_regime"}
    assert "mv 0.3" in capsys.readouterr().out
