"""rl_trader.evaluation.record: the typed run record and its JSON."""

import json

import pytest

from rl_trader.errors import InputError
from rl_trader.evaluation.record import (
    ABSENT,
    FoldEntry,
    Headline,
    Performance,
    RunSummary,
    from_json,
    to_json,
)
from rl_trader.runtime.rundir import write_json

# The order of a scored run's keys: summary.json's bytes follow it (tests/cli/test_train.py
# checks a real run's file against it).
RUN_KEYS = ["folds", "stitched_test_sharpe", "stitched_buy_and_hold_test_sharpe",
            "geo_mean_test_sharpe", "stitched", "stitched_random",
            "stitched_random_test_sharpe_band", "headline", "scored_folds", "trials", "config",
            "data_sha256", "data_source", "data_pool", "n_bars", "periods_per_year",
            "feature_names", "device", "fingerprint", "stopped"]
FOLD_KEYS = ["fold", "best_epoch", "ensemble_seeds", "best_setting", "val_sharpe",
             "test_sharpe", "buy_and_hold_test_sharpe", "checkpoint_dir", "test_start",
             "test_end", "market_vsn_weights", "portfolio_vsn_weights", "baseline_test_sharpes",
             "gbm_choice", "random_test_sharpe_mean", "random_test_sharpe_std", "metrics",
             "prior", "epochs", "returns_file", "tree_forecast", "trust"]


def perf(sharpe: float) -> Performance:
    return Performance(sharpe=sharpe, sortino=1.0, max_drawdown=-0.1, calmar=0.5, cagr=0.05,
                       volatility=0.1, turnover=2.0, hit_rate=0.5, exposure=0.9, n_trades=12.0)


def summary() -> RunSummary:
    """A small summary: one scored fold, one stopped before its first checkpoint."""
    scored = FoldEntry(fold=0, best_epoch=2, val_sharpe=0.4, test_sharpe=0.3,
                       test_start=10, test_end=20, metrics={"agent": perf(0.3)},
                       epochs=[{"epoch": 0, "val_sharpe": 0.4}])
    stopped = FoldEntry(fold=1, best_epoch=None, test_sharpe=None, test_start=20, test_end=30,
                        epochs=[], status="stopped before its first checkpoint")
    return RunSummary(folds=(scored, stopped), stitched_test_sharpe=0.3,
                      stitched={"agent": perf(0.3)}, headline=Headline(
                          stitched_test_sharpe=0.3, dsr=0.1, n_trials=5, spa=None),
                      config={"seed": 0}, stopped=[])


def test_json_round_trip_is_exact_and_leaves_absent_keys_out(tmp_path):
    """to_json → summary.json → from_json → to_json gives the same bytes; a key the record
    does not hold (`ABSENT`) is not written, a None is written as null."""
    s = summary()
    obj = s.to_json()
    assert list(obj) == ["folds", "stitched_test_sharpe", "stitched", "headline", "config",
                         "stopped"]
    assert obj["folds"][1] == {"fold": 1, "best_epoch": None, "test_sharpe": None,
                               "test_start": 20, "test_end": 30, "epochs": [],
                               "status": "stopped before its first checkpoint"}
    assert obj["headline"]["spa"] is None and "pbo" not in obj["headline"]
    write_json(tmp_path / "summary.json", obj)
    text = (tmp_path / "summary.json").read_text()
    back = RunSummary.from_json(json.loads(text))
    assert back == s and back.folds[1].metrics is ABSENT and not back.folds[1].scored
    assert json.dumps(back.to_json(), indent=2) + "\n" == text
    assert back.folds[0].metrics["agent"].sharpe == 0.3 and back.headline.dsr == 0.1


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["headline"].update(dsr="high"), "x.json: headline.dsr is 'high', not a number "
                                                 "or null"),
    (lambda d: d["folds"][0].update(best_epoch=1.5), "folds[0].best_epoch is 1.5, not an "
                                                     "integer or null"),
    (lambda d: d["folds"][0]["metrics"]["agent"].update(alpha=1.0),
     "folds[0].metrics.agent.alpha is not a key this version reads"),
    (lambda d: d.pop("config"), "x.json: config is missing"),
    (lambda d: d.update(folds={}), "folds is {}, not a list"),
    (lambda d: d["folds"][0].update(test_sharpe=True), "folds[0].test_sharpe is True, not a "
                                                       "number or null")])
def test_a_value_of_the_wrong_type_is_refused_in_one_line_naming_its_key(edit, message):
    obj = summary().to_json()
    edit(obj)
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")
                       .replace(".", r"\.")) as err:
        RunSummary.from_json(obj, "x.json")
    assert "\n" not in str(err.value)


def test_an_older_summary_reads_as_it_was_written():
    """Figures an older run lacks are `ABSENT` (falsy), not invented; a fold of a `--rival`
    run (before study 40) keeps the baseline it acted as, which the report names."""
    obj = summary().to_json()
    del obj["headline"]["spa"]
    obj["folds"][0]["acts_as"] = "vol_target"
    back = RunSummary.from_json(obj)
    assert back.folds[0].acts_as == "vol_target" and back.folds[1].acts_as is ABSENT
    assert back.headline.spa is ABSENT and not back.headline.spa
    assert to_json(from_json(Performance, {"sharpe": 1}, "p")) == {"sharpe": 1}


def test_keys_older_summaries_wrote_are_renamed_or_dropped():
    """A fold's `best_seed` (before seed ensembles, 2026-11-30) and the rival's validation
    evidence (before study 40, 2026-12-07) are dropped; the SPA's `p_no_baseline_beats_agent`
    (2026-12-03) reads as `p_some_baseline_beats_agent`."""
    obj = summary().to_json()
    obj["folds"][0] |= {"best_seed": 3, "vol_target_val_sharpe": 0.5,
                        "vol_target_val_edge_t": None, "val_returns_file": "fold_0/v.npz"}
    obj["headline"]["spa"] = {"agent_beats": {"flat": 0.2}, "p_agent_beats_all": 0.2,
                              "p_no_baseline_beats_agent": 0.7, "block_bars": 10, "reps": 99}
    back = RunSummary.from_json(obj)
    assert back.headline.spa.p_some_baseline_beats_agent == 0.7
    assert to_json(back.folds[0]) == to_json(summary().folds[0])
