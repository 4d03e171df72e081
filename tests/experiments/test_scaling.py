"""The scaling harness: layouts, population composition, and a real two-layout run."""

import json
import os

import pytest

from experiments import scaling


def test_layouts_and_populations_are_parsed_as_documented():
    assert scaling.parse_layout("4") == (1, 4)
    assert scaling.parse_layout("4x1") == (4, 1)
    with pytest.raises(SystemExit, match="is not D or NxD"):
        scaling.parse_layout("four")
    args = scaling.job_args(256, 4, 16, 500, 2, ["--preset", "smoke"])
    sweep = args[args.index("--sweep") + 1]
    assert sweep.startswith("learning_rate=") and len(sweep.split(",")) == 4  # 256 = 4·16·4
    assert "--sweep" not in scaling.job_args(64, 4, 16, 500, 2, [])
    with pytest.raises(SystemExit, match="not a multiple"):
        scaling.job_args(100, 4, 16, 500, 2, [])


def test_speedups_are_against_one_device_at_the_same_population():
    runs = [{"layout": "1", "devices": 1, "population": 8, "train_program_s": 4.0, "epoch_s": 6.0},
            {"layout": "2", "devices": 2, "population": 8, "train_program_s": 2.0, "epoch_s": 4.0},
            {"layout": "2", "devices": 2, "population": 16, "train_program_s": 1.0,
             "epoch_s": 1.0},  # no one-device run of 16: no speed-up
            {"layout": "2x1", "devices": 2, "population": 8, "returncode": 1}]  # failed
    assert scaling.speedups(runs) == [{"layout": "2", "population": 8, "train_program": 2.0,
                                       "whole_epoch": 1.5}]


def test_a_tiny_run_on_four_devices_writes_its_figures(tmp_path, monkeypatch):
    """One real job through the harness (speed-ups from figures are the test above's): the
    configuration and the four devices of tests/runtime/test_devices.py's four-device run,
    with the session's compilation cache (`--jax-cache`), so whichever runs second loads the
    programs the other compiled."""
    from rl_trader.cli.options import config_from_args, run_parser
    from tests.runtime.test_devices import ARGS

    extra = "--preset smoke --data synthetic:ar1:1200:3 --envs 4 --batch 8"
    def config(args):  # the run's configuration (--no-report is the command's own option)
        return config_from_args(run_parser("t", "").parse_args(
            [a for a in args if a != "--no-report"]))

    assert config(scaling.job_args(6, 2, 3, 8, 2, extra.split())) == config(ARGS)
    monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", "")
                       + " --xla_force_host_platform_device_count=4")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    out = tmp_path / "scaling.json"
    assert scaling.main(["--sizes", "6", "--layouts", "4", "--folds", "2", "--seeds", "3",
                         "--steps", "8", "--epochs", "2", "--args", extra,
                         "--jax-cache", os.environ.get("RL_TRADER_JAX_CACHE", "off"),
                         "--work", str(tmp_path / "work"), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    [run] = result["runs"]
    assert (run["layout"], run["devices"], run["members"]) == ("4", 4, 6)
    assert 0 < run["train_program_s"] <= run["epoch_s"]
    assert {"train_program", "validation", "checkpoints", "resume_state"} <= set(run["stages"])
    assert result["speedups"] == []  # no one-device run to compare with
    assert not list((tmp_path / "work").iterdir())  # each run directory removed once read
