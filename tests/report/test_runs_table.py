"""The runs table (`rl-trader runs`): rows read from fabricated run directories, no training."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from rl_trader.cli.runs import main
from rl_trader.config import preset
from rl_trader.errors import InputError
from rl_trader.report.runs_table import COLUMNS, format_table, run_rows, sort_rows

SMOKE = preset("smoke")


def config(cfg=SMOKE, epochs: int = 3, folds: int = 2) -> dict:
    """A saved config.json's content (tuples as JSON lists)."""
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, epochs=epochs),
                              folds=dataclasses.replace(cfg.folds, n_folds=folds))
    return json.loads(json.dumps(cfg.to_dict()))


def summary(agent: float, dsr: float | None, **extra) -> dict:
    """The keys of a run's summary.json that the table reads, with made-up figures."""
    return {"folds": [], "stitched_test_sharpe": agent, "stitched_buy_and_hold_test_sharpe": 0.5,
            "stitched": {"agent": {"sharpe": agent}, "buy_and_hold": {"sharpe": 0.5},
                         "vol_target": {"sharpe": 0.6}, "ridge": {"sharpe": 0.1}},
            "stitched_random": {"sharpe": -0.2},
            "headline": {"stitched_test_sharpe": agent, "dsr": dsr, "pbo": 0.4,
                         "spa": {"agent_beats": {"ridge": 0.03}, "p_agent_beats_all": 0.03,
                                 "p_some_baseline_beats_agent": 0.5, "block_bars": 20,
                                 "reps": 1000}},
            "data_source": "synthetic:ar1:1200:1", "config": config(), "stopped": [], **extra}


def write(run: Path, name: str, content: dict | str, mtime: float) -> None:
    run.mkdir(parents=True, exist_ok=True)
    path = run / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    os.utime(path, (mtime, mtime))


@pytest.fixture
def runs(tmp_path) -> Path:
    t = 1.7e9
    older = config()  # saved before two options left, at the values every run had
    older["net"]["td_to_encoder"], older["train"]["eval_params"] = False, "online"
    write(tmp_path / "b-done", "summary.json", summary(1.2, 0.97, config=older), t + 300)
    default = dataclasses.replace(preset("default"), train=dataclasses.replace(
        preset("default").train, seeds=1))
    no_ridge = summary(-0.3, 0.1, config=config(default, epochs=5, folds=3), stitched={})
    write(tmp_path / "a-default", "summary.json", no_ridge, t + 100)
    write(tmp_path / "c-incomplete", "config.json", config(epochs=3), t)
    for step in ("0", "1", "2.orbax-checkpoint-tmp-17"):  # epoch 2 was being saved
        (tmp_path / "c-incomplete" / "resume" / step).mkdir(parents=True)
    os.utime(tmp_path / "c-incomplete" / "resume" / "1", (t + 200, t + 200))
    write(tmp_path / "d-corrupt", "summary.json", '{"stitched_test_sharpe": 1', t + 400)
    write(tmp_path / "e-wrong", "summary.json", summary(1.0, "high"), t + 500)
    write(tmp_path / "f-stopped", "summary.json",
          summary(0.2, 0.3, stopped=["fold 1 stopped at epoch 1: non-finite loss"]), t + 600)
    write(tmp_path / "g-sweep", "summary.json",
          {"validation_only": True, "folds": [], "config": config()}, t + 700)
    write(tmp_path / "h-not-a-run", "notes.txt", "hello", t)
    (tmp_path / "stray.json").write_text("{}")
    return tmp_path


def test_one_row_per_run_with_the_summary_figures(runs):
    rows = {r["run"]: r for r in run_rows(runs)}
    assert sorted(rows) == ["a-default", "b-done", "c-incomplete", "d-corrupt", "e-wrong",
                            "f-stopped", "g-sweep"]
    assert all(list(r) == list(COLUMNS) for r in rows.values())
    done = rows["b-done"]
    assert done == {**done, "status": "done", "data": "synthetic:ar1:1200:1", "preset": "smoke",
                    "epochs": 3, "folds": 2, "agent": 1.2, "buy_and_hold": 0.5, "random": -0.2,
                    "vol_target": 0.6, "ridge": 0.1, "dsr": 0.97, "pbo": 0.4, "spa": 0.03,
                    "skill": True,
                    "note": None}
    other = rows["a-default"]
    assert (other["preset"], other["epochs"], other["folds"]) == ("default*", 5, 3)
    assert (other["ridge"], other["vol_target"], other["skill"]) == (None, None, False)
    assert rows["f-stopped"]["status"] == "stopped"
    assert "fold 1 stopped at epoch 1" in rows["f-stopped"]["note"]
    assert (rows["g-sweep"]["status"], rows["g-sweep"]["agent"]) == ("sweep", None)


def test_interrupted_and_corrupt_runs_are_listed_not_skipped(runs):
    rows = {r["run"]: r for r in run_rows(runs)}
    inc = rows["c-incomplete"]
    assert (inc["status"], inc["preset"], inc["epochs"], inc["agent"]) == (
        "incomplete", "smoke", 3, None)
    assert inc["data"] == "embedded:sp500"  # the smoke preset's data: path None
    assert inc["note"].startswith("saved after epoch 1 of 0..2")
    assert rows["d-corrupt"]["status"] == rows["e-wrong"]["status"] == "corrupt"
    assert rows["d-corrupt"]["note"].startswith("summary.json: invalid JSON at line 1")
    assert "headline.dsr is 'high', not a number" in rows["e-wrong"]["note"]


def test_sorted_by_time_or_a_column_with_missing_values_last(runs):
    rows = run_rows(runs)
    assert [r["run"] for r in sort_rows(rows)] == [  # c: when its last epoch was saved
        "a-default", "c-incomplete", "b-done", "d-corrupt", "e-wrong", "f-stopped", "g-sweep"]
    assert [r["run"] for r in sort_rows(rows, "agent", reverse=True)][:3] == [
        "b-done", "f-stopped", "a-default"]
    assert [r["run"] for r in sort_rows(rows, "ridge")][-1] == "g-sweep"


def test_table_text_has_a_header_and_one_line_per_run(runs):
    lines = format_table(sort_rows(run_rows(runs))).splitlines()
    assert lines[0].split()[:4] == ["run", "status", "time", "data"]
    assert len(lines) == 8
    done = next(line for line in lines if line.startswith("b-done"))
    assert "+1.200" in done and "0.970" in done and " yes" in done
    assert "n/a" in next(line for line in lines if line.startswith("c-incomplete"))


def test_command_json_parses_to_the_rows(runs, capsys):
    assert main([str(runs), "--json", "--sort", "dsr"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == sort_rows(run_rows(runs), "dsr")


def test_command_prints_the_table(runs, capsys):
    assert main([str(runs)]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("run ")


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_runs_dir_that_is_not_a_directory_exits_2_with_one_line(kind, tmp_path, capsys):
    path = tmp_path / kind
    if kind == "file":
        path.write_text("")
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and err.count("\n") == 1
    with pytest.raises(InputError):
        run_rows(path)


def test_an_unknown_sort_key_exits_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path), "--sort", "sharpe"])
    assert exc.value.code == 2 and "--sort" in capsys.readouterr().err
