"""The forecast probe: the model network's forecasts fit alone, beside ridge, gbm and σ̂²."""

import json

import numpy as np

from experiments.forecast_probe import CHECKPOINTS, main


def test_the_probe_records_both_forecasts_ics_and_refuses_gate_draws(tmp_path, capsys):
    out = tmp_path / "probe.json"
    assert main(["--preset", "smoke", "--folds", "2", "--data", "synthetic:vol_regime:1200:1",
                 "--noise", "0,1.5", "--updates", "20", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert len(result["folds"]) == 2 and result["noise"] == [0.0, 1.5]
    for fold in result["folds"]:
        for key in ("network_ic", "network_second_ic"):
            assert sorted(fold[key]) == ["0.0", "1.5"]
            assert all(len(v) == CHECKPOINTS and np.isfinite(v).all() for v in fold[key].values())
        assert -1 <= fold["vol_second_ic"] <= 1
        assert fold["network_second_ic"] != fold["network_ic"]  # m̂₂ against y², not μ̂
    assert "second moment: trailing vol²" in capsys.readouterr().out
    assert main(["--data", "synthetic:vol_regime:1200:1001", "--out", str(out)]) == 2
