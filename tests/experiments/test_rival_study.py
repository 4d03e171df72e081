"""Studies 34–36's `rival` from a finished run: the folds where `vol_target` wins on validation
(or the agent's edge t falls short) act as `vol_target`, the others as the agent, and its DSR
counts the rival's trials."""

import json
import shutil

import numpy as np
import pytest

from experiments.rival_study import main, pooled_edges, rival_summary
from experiments.train_evidence import EVIDENCE_FILE
from rl_trader.errors import InputError
from rl_trader.evaluation.metrics import edge_t, sharpe_of


def _with_rival(src, dst, vol_target_val):
    """A copy of the run whose folds' `vol_target_val_sharpe` are `vol_target_val`."""
    shutil.copytree(src, dst)
    summary = json.loads((dst / "summary.json").read_text())
    for f, v in zip(summary["folds"], vol_target_val, strict=True):
        f["vol_target_val_sharpe"] = v
    (dst / "summary.json").write_text(json.dumps(summary))
    return summary


def test_each_fold_acts_as_the_winner_on_validation(gate_run, tmp_path):
    summary = json.loads((gate_run / "summary.json").read_text())
    assert all(isinstance(f["vol_target_val_sharpe"], float) for f in summary["folds"])
    ppy = summary["periods_per_year"]
    tests = [np.load(gate_run / f["returns_file"]) for f in summary["folds"]]
    never = _with_rival(gate_run, tmp_path / "ar1_strong-run0",
                        [f["val_sharpe"] for f in summary["folds"]])  # a tie keeps the agent
    rival, switched = rival_summary(tmp_path / "ar1_strong-run0", never)
    assert switched == []
    assert rival["stitched_test_sharpe"] == pytest.approx(summary["stitched_test_sharpe"])
    # the rival's validation Sharpe is one more trial a fold
    assert rival["headline"]["n_trials"] == summary["headline"]["n_trials"] + 2
    second = _with_rival(gate_run, tmp_path / "b" / "ar1_strong-run0",
                         [-1e9, summary["folds"][1]["val_sharpe"] + 1.0])
    rival, switched = rival_summary(tmp_path / "b" / "ar1_strong-run0", second)
    assert switched == [1]
    want = np.concatenate([tests[0]["agent"], tests[1]["vol_target"]])
    assert rival["stitched_test_sharpe"] == pytest.approx(sharpe_of(want, ppy))
    assert rival["folds"][1]["test_sharpe"] == pytest.approx(
        summary["folds"][1]["baseline_test_sharpes"]["vol_target"])
    assert rival["folds"][0]["test_sharpe"] == summary["folds"][0]["test_sharpe"]
    out = tmp_path / "rival.json"
    assert main([str(tmp_path / "b" / "ar1_strong-run0"), "--out", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["n_planted"] == 1 and figures["runs"][0]["switched_folds"] == [1]
    assert set(figures["goals"]["rival"]) == set(figures["goals"]["base"])


def test_a_run_without_the_rivals_figure_is_refused(gate_run, tmp_path, capsys):
    summary = _with_rival(gate_run, tmp_path / "old", [0.0, 0.0])
    for f in summary["folds"]:
        del f["vol_target_val_sharpe"]
    (tmp_path / "old" / "summary.json").write_text(json.dumps(summary))
    assert main([str(tmp_path / "old")]) == 2
    assert "no vol_target_val_sharpe" in capsys.readouterr().err


def test_a_run_with_the_option_on_is_refused(gate_run, tmp_path, capsys):
    """Its folds already act as their rival: switching them again would count twice."""
    summary = _with_rival(gate_run, tmp_path / "on", [0.0, 0.0])
    summary["config"]["train"]["rival"] = "vol_target"
    (tmp_path / "on" / "summary.json").write_text(json.dumps(summary))
    assert main([str(tmp_path / "on")]) == 2
    assert "--rival on" in capsys.readouterr().err


def test_study_35s_t_floor_switches_every_fold_without_that_edge(gate_run):
    """`--rival-t T`: a fold whose recorded edge t is below T acts as `vol_target` even where
    the agent won on validation; T = 0 leaves study 34's choice."""
    summary = json.loads((gate_run / "summary.json").read_text())
    edges = [f["vol_target_val_edge_t"] for f in summary["folds"]]
    assert all(isinstance(t, float) for t in edges)
    _, at_zero = rival_summary(gate_run, summary, 0.0)
    _, above_all = rival_summary(gate_run, summary, max(edges) + 1.0)
    assert above_all == [0, 1] and set(at_zero) <= {0, 1}
    _, between = rival_summary(gate_run, summary, min(edges) + 1e-9)
    assert between == sorted(set(at_zero) | {edges.index(min(edges))})


def test_study_36s_pooled_t_joins_the_validation_blocks_so_far(gate_run, tmp_path):
    """`--pooled`: fold k's t is `edge_t` over folds 0 … k's `val_returns.npz` joined in order,
    so fold 0's is its own block's and fold 1's weighs both blocks; a run without the files
    (before study 36) is refused."""
    summary = json.loads((gate_run / "summary.json").read_text())
    folds = summary["folds"]
    edges = pooled_edges(gate_run, folds)
    assert edges[0] == folds[0]["vol_target_val_edge_t"]
    blocks = [np.load(gate_run / f["val_returns_file"]) for f in folds]
    assert edges[1] == edge_t(np.concatenate([b["agent"] for b in blocks]),
                              np.concatenate([b["vol_target"] for b in blocks]))
    _, at_zero = rival_summary(gate_run, summary, 0.0, pooled=True)
    _, above_all = rival_summary(gate_run, summary, max(edges) + 1.0, pooled=True)
    assert above_all == [0, 1]
    _, between = rival_summary(gate_run, summary, min(edges) + 1e-9, pooled=True)
    assert between == sorted(set(at_zero) | {edges.index(min(edges))})
    old = _with_rival(gate_run, tmp_path / "old", [f["vol_target_val_sharpe"] for f in folds])
    for f in old["folds"]:
        del f["val_returns_file"]
    (tmp_path / "old" / "summary.json").write_text(json.dumps(old))
    with pytest.raises(InputError, match="before study 36"):
        rival_summary(tmp_path / "old", old, 1.0, pooled=True)


def test_study_37s_train_evidence_keeps_the_agent_where_either_t_reaches_t(gate_run, tmp_path):
    """`--train`: the agent needs the validation t or the gbm forecast's train t
    (`train_evidence.json`) to reach T; a run without the file is refused."""
    summary = json.loads((gate_run / "summary.json").read_text())
    run = tmp_path / "ar1_strong-run0"
    shutil.copytree(gate_run, run)
    edges = [f["vol_target_val_edge_t"] for f in summary["folds"]]
    with pytest.raises(InputError, match="no train evidence"):
        rival_summary(run, summary, 1.0, train=True)
    high = max(*edges, 0.0) + 1.0  # above every fold's validation t
    (run / EVIDENCE_FILE).write_text(json.dumps({"folds": [
        {"fold": 0, "gbm_train_edge_t": high + 1.0}, {"fold": 1, "gbm_train_edge_t": None}]}))
    _, base = rival_summary(run, summary, 0.0)
    _, without = rival_summary(run, summary, high)
    rival, with_train = rival_summary(run, summary, high, train=True)
    assert without == [0, 1] and with_train == sorted(set(base) | {1})
    assert [f["rival_train_edge_t"] for f in rival["folds"]] == [high + 1.0, None]
