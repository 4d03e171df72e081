"""Two designs' gate runs paired: differences, the planted markets' mean ± SE, the residual."""

import json
import math

import pytest

from experiments.paired_gate import compare, gate_runs, main
from rl_trader.errors import InputError


def write_run(root, name: str, sharpe: float, vol_target: float = 0.5,
              prior: dict | None = None) -> None:
    d = root / name
    d.mkdir(parents=True)
    fold = {"fold": 0, **({"prior": prior} if prior else {})}
    d.joinpath("summary.json").write_text(json.dumps({
        "folds": [fold], "stitched_test_sharpe": sharpe,
        "stitched": {"vol_target": {"sharpe": vol_target}}, "config": {}}))


def test_pairs_planted_summary_and_the_residual(tmp_path, capsys):
    base, design = tmp_path / "base", tmp_path / "design"
    prior = {"prior": "vol_target", "prior_mean": 0.6, "mean_abs_residual": 0.1,
             "turnover_added": 12.0}
    for name, b, d in [("cubic-run1", 1.0, 0.5), ("step-run1", 1.0, 1.2),
                       ("garch_up-run1", 0.1, 0.6), ("random_walk-run1", -0.2, 0.1)]:
        write_run(base, name, b)
        write_run(design, name, d, prior=prior)
    write_run(design, "cubic-run2", 2.0)  # no partner: left out
    (design / "notes").mkdir()  # not a gate run: ignored
    figures = compare(gate_runs(base), gate_runs(design))
    assert [(p["market"], p["run"]) for p in figures["pairs"]] == [
        ("cubic", 1), ("step", 1), ("random_walk", 1), ("garch_up", 1)]  # the family's order
    assert figures["pairs"][0]["diff"] == pytest.approx(-0.5)
    assert figures["pairs"][0]["prior"] == {k: prior[k] for k in
                                            ("prior_mean", "mean_abs_residual",
                                             "turnover_added")}
    planted = figures["planted"]  # neither the null nor the no-direction market
    assert planted["n"] == 2 and planted["mean"] == pytest.approx(-0.15)
    assert planted["se"] == pytest.approx(math.sqrt(((0.35**2) * 2) / 1) / math.sqrt(2))
    assert (planted["above"], planted["below"]) == (1, 1)
    out = tmp_path / "paired.json"
    assert main([str(base), str(design), "--out", str(out)]) == 0
    assert "planted pairs: design − base -0.150" in capsys.readouterr().out
    assert json.loads(out.read_text())["planted"]["n"] == 2


def test_a_directory_without_gate_runs_is_refused(tmp_path, capsys):
    with pytest.raises(InputError, match="no finished gate run"):
        gate_runs(tmp_path)
    assert main([str(tmp_path), str(tmp_path)]) == 2
    assert "error:" in capsys.readouterr().err
