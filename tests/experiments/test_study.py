"""The learner-study summary: split-half ratio by epoch budget and the collapse ratio."""

import json

import numpy as np

from experiments.study import main, study_rows
from experiments.sweep import split_half_ratio
from rl_trader.evaluation.metrics import sharpe


def _fake_sweep(run, rng):
    """A finished sweep's files: 2 folds × 1 setting, 6 epochs of 200 validation bars whose
    drift rises for 3 epochs, then falls (a collapse)."""
    run.mkdir()
    drift = np.array([1, 2, 3, 1, 0, -1])[:, None, None] * 4e-4
    val = drift + rng.normal(0.0, 0.01, (6, 2, 200))
    np.savez(run / "validation_returns.npz", val_returns=val, fold=[0, 1], setting=[0, 0])
    np.save(run / "oracle_val_returns.npy", 2e-3 + rng.normal(0.0, 0.01, (2, 200)))
    curves = [[float(sharpe(r, 252.0)) for r in val[:, g]] for g in range(2)]
    (run / "summary.json").write_text(json.dumps(
        {"periods_per_year": 252.0, "config": {"data": {"path": "synthetic:ar1:500:1"},
                                               "seed": 0},
         "settings": [{}],
         "folds": [{"fold": g, "epochs": [{"val_sharpe": v, "forecast_ic": 0.01 * e + g}
                                          for e, v in enumerate(curves[g])]}
                   for g in range(2)]}))
    return val


def test_rows_cut_the_epochs_and_measure_collapse(tmp_path):
    run = tmp_path / "sweep"
    val = _fake_sweep(run, np.random.default_rng(0))
    oracle = np.load(run / "oracle_val_returns.npy")
    rows = study_rows(run, [3, 6, 9], 252.0)
    assert [(r["fold"], r["setting"]) for r in rows] == [(0, 0), (1, 0)]
    for g, row in enumerate(rows):
        assert row["split@3"] == split_half_ratio(val[:3, g], oracle[g], 252.0)
        assert row["split@6"] == split_half_ratio(val[:, g], oracle[g], 252.0)
        assert "split@9" not in row  # a budget longer than the run is not invented
        curve = [float(sharpe(r, 252.0)) for r in val[:, g]]
        assert row["last_over_best"] == curve[-1] / max(curve) < 0.5
        # sharpe@E by hand: the epoch best on one half of the bars, scored on the other
        a, b = slice(0, 100), slice(100, 200)
        pick = [int(np.argmax([sharpe(r[h], 252.0) for r in val[:3, g]])) for h in (a, b)]
        want = (sharpe(val[pick[0], g, b], 252.0) + sharpe(val[pick[1], g, a], 252.0)) / 2
        np.testing.assert_allclose(row["sharpe@3"], want)
        np.testing.assert_allclose(row["oracle"], (sharpe(oracle[g, a], 252.0)
                                                   + sharpe(oracle[g, b], 252.0)) / 2)
        assert row["buy_hold"] is None  # an older sweep without buy-and-hold returns
        assert row["ridge"] is None and row["ridge_ic"] is None
        # the forecast's IC at the epoch best on validation among the first 9 (all 6)
        np.testing.assert_allclose(row["ic"], 0.01 * int(np.argmax(curve)) + g)
    np.save(run / "buy_hold_val_returns.npy", oracle[::-1])
    np.save(run / "ridge_val_returns.npy", oracle)
    np.save(run / "ridge_val_ic.npy", np.array([0.05, 0.07]))
    rows = study_rows(run, [3], 252.0)
    np.testing.assert_allclose([r["buy_hold"] for r in rows], [rows[1]["oracle"],
                                                               rows[0]["oracle"]])
    np.testing.assert_allclose([r["ridge"] for r in rows], [r["oracle"] for r in rows])
    assert [r["ridge_ic"] for r in rows] == [0.05, 0.07]
    # with E = 3 only the first 3 epochs are candidates
    curve = [float(sharpe(r, 252.0)) for r in val[:3, 0]]
    np.testing.assert_allclose(rows[0]["ic"], 0.01 * int(np.argmax(curve)))


def test_main_prints_means_and_refuses_a_directory_that_is_no_sweep(tmp_path, capsys):
    _fake_sweep(tmp_path / "a", np.random.default_rng(1))
    out = tmp_path / "study.json"
    assert main([str(tmp_path / "a"), "--cuts", "3,6", "--out", str(out)]) == 0
    means = json.loads(out.read_text())["means"]
    assert set(means) == {"split@3", "split@6", "last_over_best", "sharpe@3", "sharpe@6",
                          "oracle", "buy_hold", "ridge", "ic", "ridge_ic"}
    assert "mean over ensembles" in capsys.readouterr().out
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "summary.json").write_text(json.dumps({"periods_per_year": 252.0}))
    assert main([str(tmp_path / "b")]) == 2
    assert "not a run summary" in capsys.readouterr().err  # read before any sweep file


def test_against_pairs_the_gap_by_instrument_seed_and_fold(tmp_path, capsys):
    """--against: Δ gap = (sharpe@E − buy_hold) − the reference's, paired per fold, by hand."""
    rng = np.random.default_rng(2)
    for name in ("ref", "cand"):
        _fake_sweep(tmp_path / name, rng)
        np.save(tmp_path / name / "buy_hold_val_returns.npy", 1e-3 + rng.normal(0, 0.01, (2, 200)))
    out = tmp_path / "paired.json"
    assert main([str(tmp_path / "cand"), "--cuts", "6", "--against", str(tmp_path / "ref"),
                 "--out", str(out)]) == 0
    cand, ref = (study_rows(tmp_path / n, [6], 252.0) for n in ("cand", "ref"))
    d = np.array([(c["sharpe@6"] - c["buy_hold"]) - (r["sharpe@6"] - r["buy_hold"])
                  for c, r in zip(cand, ref, strict=True)])
    paired = json.loads(out.read_text())["paired_gap"]
    np.testing.assert_allclose([paired["mean"], paired["se"]],
                               [d.mean(), d.std(ddof=1) / np.sqrt(2)])
    assert paired["n"] == 2 and paired["better"] == int((d > 0).sum())
    assert "paired Δ gap@6" in capsys.readouterr().out
    # the forecasts' IC paired against the reference, and against ridge's when it is there
    np.save(tmp_path / "cand" / "ridge_val_ic.npy", np.array([0.5, 0.25]))
    assert main([str(tmp_path / "cand"), "--cuts", "6", "--against", str(tmp_path / "ref"),
                 "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    d_ic = np.array([c["ic"] - r["ic"] for c, r in zip(cand, ref, strict=True)])
    np.testing.assert_allclose(got["paired_ic"]["mean"], d_ic.mean())
    np.testing.assert_allclose(got["ic_minus_ridge_ic"]["mean"],
                               np.mean([cand[0]["ic"] - 0.5, cand[1]["ic"] - 0.25]))
    assert "paired ic − ridge_ic" in capsys.readouterr().out
    # A reference of another instrument has no pair: refused in one line.
    summary = tmp_path / "ref" / "summary.json"
    summary.write_text(summary.read_text().replace("ar1:500:1", "ar1:500:2"))
    assert main([str(tmp_path / "cand"), "--cuts", "6", "--against", str(tmp_path / "ref")]) == 2
    assert "no reference ensemble for cand" in capsys.readouterr().err
