"""The command line generated from the config dataclasses: every field, defaults, --config."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rl_trader.cli.options import config_from_args, run_parser
from rl_trader.config import (
    SECTIONS,
    SWEEPABLE,
    AgentConfig,
    FeatureConfig,
    RunConfig,
    flag_of,
    preset,
)
from rl_trader.errors import InputError


def parse(*argv: str) -> RunConfig:
    return config_from_args(run_parser("test", "test").parse_args(list(argv)))


def other_value(value, choices=None):
    """A valid value different from `value`, of the same type (another of `choices` if given)."""
    if choices:
        return next(c for c in choices if c != value)
    if isinstance(value, bool):
        return not value
    if isinstance(value, tuple):
        return value[:-1] or (0.5,)
    if isinstance(value, str):
        return value + ".csv"
    if value is None:
        return 7
    if isinstance(value, int):
        return value * 2 or 1  # a default of 0 must change too
    return value / 2 if value else 0.5


def as_argv(flag: str, value) -> list[str]:
    if isinstance(value, bool):
        return [flag if value else "--no-" + flag[2:]]
    if isinstance(value, tuple):
        return [flag, ",".join(str(v) for v in value)]
    return [flag, str(value)]


@pytest.mark.parametrize("section, name", [(s, f.name) for s, cls in SECTIONS.items()
                                           for f in dataclasses.fields(cls)])
def test_every_config_field_is_settable_from_the_command_line(section, name):
    cls = SECTIONS[section]
    field = next(f for f in dataclasses.fields(cls) if f.name == name)
    base = getattr(preset("smoke"), section)
    value = other_value(getattr(base, name), field.metadata["choices"])
    if name == "path":
        value = "synthetic:ar1:1200:1"
    elif name == "backup":
        value = "all"  # "taken" is the generic head's: the model head (default) refuses it
    # the default view (trusted) tilts a prior, and only the model head weighs it
    needs = ("env", "view", "excess") if name in ("prior", "q_head") else None
    extra = [] if needs is None else as_argv(flag_of(next(
        f for f in dataclasses.fields(SECTIONS[needs[0]]) if f.name == needs[1])), needs[2])
    cfg = parse("--preset", "smoke", *extra, *as_argv(flag_of(field), value))
    assert getattr(getattr(cfg, section), name) == value
    if needs is not None:
        cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, view="trusted"))
    untouched = dataclasses.replace(getattr(cfg, section), **{name: getattr(base, name)})
    assert untouched == base  # nothing else changed


def test_help_shows_defaults_choices_and_sweepable(capsys):
    with pytest.raises(SystemExit) as exc:
        run_parser("test", "test").parse_args(["--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--lr X Adam learning rate (default: 0.0001); sweepable" in out
    assert "{tf32,fp32,bf16}" in out and "(default: 0.25,0.5,0.75,1)" in out


def test_sweepable_names_come_from_the_declarations():
    declared = [f.name for f in dataclasses.fields(AgentConfig) if f.metadata["sweep"]]
    assert list(SWEEPABLE) == declared and "learning_rate" in declared and "tau" not in declared


def test_a_saved_config_reruns_exactly_and_options_override_it(tmp_path):
    cfg = parse("--preset", "smoke", "--lr", "0.003", "--magnitudes", "0.5,1", "--seed", "4",
                "--sweep", "gamma=0.5,0.8")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg.to_dict()))
    assert parse("--config", str(path)) == cfg
    again = parse("--config", str(path), "--epochs", "7")
    assert again == dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, epochs=7))


@pytest.mark.parametrize("section, name, now, before, later", [
    ("env", "prior", "vol_target", "flat", ("view",)),  # runs before issue 58 had no prior
    ("env", "view", "trusted", "excess", ())])  # runs before study 40 had no view
def test_a_config_saved_before_a_field_keeps_its_old_behaviour(tmp_path, section, name, now,
                                                               before, later):
    """A config.json written before the field existed (and so before the fields added after
    it, `later`) re-runs as it ran (`before`); a new run, or a saved config holding the field,
    reads today's default (`now`)."""
    cfg = parse("--preset", "smoke")
    assert getattr(getattr(cfg, section), name) == now
    old = cfg.to_dict()
    for field in (name, *later):
        del old[section][field]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(old))
    assert getattr(getattr(parse("--config", str(path)), section), name) == before
    path.write_text(json.dumps(cfg.to_dict()))
    assert getattr(getattr(parse("--config", str(path)), section), name) == now


@pytest.mark.parametrize("argv, needle", [
    (["--preset", "smoke", "--config", "x.json"], "exclude each other"),
    (["--config", "missing.json"], "is not a file"),
])
def test_config_file_errors_name_the_option(argv, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=needle):
        parse(*argv)


def test_the_model_head_refuses_what_it_cannot_do():
    assert parse("--q-head", "model").agent.backup is None  # it backs up every position
    assert parse("--q-head", "model", "--backup", "all").net.q_head == "model"
    with pytest.raises(InputError, match="option --backup='taken'.*with --q-head model"):
        parse("--q-head", "model", "--backup", "taken")
    assert parse("--lookback", "1").features.lookback == 1  # bar-level inputs


@pytest.mark.parametrize("section, name, old, value", [
    ("agent", "sizing", "q", "forecast"), ("agent", "aux_noise", None, 0.0),
    ("net", "linear_path", False, True), ("features", "portfolio_inputs", "all", "no_returns"),
    ("agent", "bootstrap_block", 0, 32), ("agent", "dropout", 0.0, 0.2),
    ("net", "embedding", "none", "ple"), ("train", "forecast_patience", 0, 2),
    ("train", "forecast_shrink", "off", "validation"),
    ("agent", "continuation_weight", 1.0, 0.0),
    ("net", "continuation", "afterstate", "state"),
    ("train", "skill_shrink", "off", "validation"),
    ("net", "variables", "pwl", "grn"), ("net", "variables", "pwl", "linear"),
    ("train", "fallback", "off", "vol_target"), ("net", "td_to_encoder", False, True),
    ("agent", "weight_decay_on", "kernels", "all"), ("train", "eval_params", "online", "target"),
    ("train", "eval_params", "online", "average")])
def test_removed_options_in_a_saved_config(section, name, old, value):
    """The options issues 27, 37 and 59 removed: a saved config holding the value every run had
    loads as today's config; another value is refused in one line naming the field, its
    study and docs/findings.md."""
    from rl_trader.config import config_from_dict

    saved = RunConfig().to_dict()
    saved[section][name] = old
    assert config_from_dict(saved) == RunConfig()
    saved[section][name] = value
    with pytest.raises(InputError, match=f"{section}.{name}={value!r}, an option removed on "
                       r"2026-12-0\d \(its results: stud") as err:
        config_from_dict(saved)
    assert "\n" not in str(err.value) and "docs/findings.md" in str(err.value)


def test_a_saved_dsr_reward_is_refused_and_its_eta_is_irrelevant_without_it():
    """`--reward dsr` and `--dsr-eta` left with issue 37: a saved config with another reward
    loads whatever its η (the DSR alone read it); a saved dsr reward is refused in one line."""
    from rl_trader.config import config_from_dict

    saved = RunConfig().to_dict()
    for eta in (0.01, 0.2):
        saved["env"]["dsr_eta"] = eta
        assert config_from_dict(saved) == RunConfig()
    saved["env"]["reward"] = "dsr"
    with pytest.raises(InputError, match="env.reward='dsr', an option removed on 2026-12-03 "
                       r"\(its results: study 3 .*env.reward in log, mean_variance") as err:
        config_from_dict(saved)
    assert "\n" not in str(err.value)
    with pytest.raises(SystemExit):
        parse("--reward", "dsr")


def test_a_config_saved_before_kernel_only_decay_is_refused():
    """Runs saved before `weight_decay_on` existed (and before `q_head`, added after it)
    decayed every parameter, which today's code no longer does: such a config is refused in
    one line, as one saying "all" is; today's configs, without either removed field, load."""
    from rl_trader.config import config_from_dict

    saved = RunConfig().to_dict()
    assert "weight_decay_on" not in saved["agent"] and config_from_dict(saved) == RunConfig()
    del saved["net"]["q_head"]  # as a file saved before both fields
    with pytest.raises(InputError, match=r"configuration predates agent.weight_decay_on \(its "
                       r"runs read 'all'\), an option removed on 2026-12-07 \(its results: "
                       "study 7 ") as err:
        config_from_dict(saved)
    assert "\n" not in str(err.value)
    saved["net"] = None  # a hand-edited file: refused in one line, not a TypeError
    with pytest.raises(InputError, match="^saved configuration [^\n]*$"):
        config_from_dict(saved)


def test_td_to_encoder_was_read_by_the_model_head_alone():
    """`--td-to-encoder` (study 18) switched the model head's gradient path: a generic-head
    config holding either value loads, a model-head one only with the value every run had."""
    from rl_trader.config import config_from_dict

    saved = RunConfig().to_dict()
    saved["net"]["q_head"], saved["net"]["td_to_encoder"] = "generic", True
    assert config_from_dict(saved).net.q_head == "generic"


def test_a_saved_tree_forecast_in_every_fold_is_refused():
    """`--tree-forecast on` left after study 19: a saved "on" (or the old switch's true) is
    refused in one line naming the study and the modes that remain."""
    from rl_trader.config import config_from_dict

    saved = RunConfig().to_dict()
    for old in ("on", True):
        saved["features"]["tree_forecast"] = old
        with pytest.raises(InputError, match="features.tree_forecast='on', an option removed on "
                           r"2026-12-07 \(its results: study 19 .*off, validation$"):
            config_from_dict(saved)


def test_a_saved_state_continuation_is_refused_for_the_model_head_only():
    """`--continuation` left after study 28 (the state form C(x, p, a)): a saved model head
    holding it is refused; a saved generic head, which has no continuation, loads whatever
    the field held."""
    from rl_trader.config import config_from_dict

    saved = RunConfig().to_dict()
    saved["net"] |= {"q_head": "model", "continuation": "state"}
    with pytest.raises(InputError, match="net.continuation='state'.*study 28"):
        config_from_dict(saved)
    saved["net"] |= {"q_head": "generic"}
    assert config_from_dict(saved).net.q_head == "generic"


def test_a_saved_boolean_tree_forecast_reads_as_its_mode():
    """`--tree-forecast` was a switch until 2026-12-02: a saved false is "off" (a true, "on",
    is refused: above)."""
    from rl_trader.config import config_from_dict

    saved = RunConfig().to_dict()
    saved["features"]["tree_forecast"] = False
    assert config_from_dict(saved).features.tree_forecast == "off"
    assert parse("--tree-forecast", "validation").features.tree_forecast == "validation"
    with pytest.raises(InputError, match="option --tree-forecast='yes' is out of range"):
        RunConfig(features=FeatureConfig(tree_forecast="yes")).validate()


def test_bad_option_is_one_line_with_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        run_parser("prog", "test").parse_args(["--lookback", "many"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: argument --lookback")


@pytest.mark.parametrize("module", ["predict", "backtest"])
@pytest.mark.parametrize("argv, needle", [
    (["RUN", "BARS", "--run-dir", "RUN"], "run directory is given twice"),
    (["RUN", "--data", "BARS", "--data", "B2"], None),  # argparse: the last --data wins
    (["RUN", "BARS", "--data", "BARS"], "bar file is given twice"),
    (["--data", "BARS"], "run directory is missing: give RUN_DIR or --run-dir RUN_DIR"),
    (["RUN"], "bar file is missing: give BARS_FILE or --data BARS_FILE"),
])
def test_predict_and_backtest_take_one_form_of_each_input(module, argv, needle, capsys):
    """Positional RUN_DIR BARS_FILE or --run-dir/--data (issue 28), a clash or a gap refused in
    one line with exit status 2; `--help` shows the positional form first."""
    import importlib

    from rl_trader.cli.options import run_and_bars

    mod = importlib.import_module(f"rl_trader.cli.{module}")
    parser = mod.build_parser("rl-trader " + module)
    extra = ["--out", "o"] if module == "backtest" else []
    args = parser.parse_args(argv + extra)
    if needle is None:
        assert run_and_bars(parser, args) == ("RUN", "B2")
        return
    with pytest.raises(SystemExit) as exc:
        run_and_bars(parser, args)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle in err and err.count("\n") == 1
    usage = parser.format_usage().splitlines()
    assert usage[0].startswith(f"usage: rl-trader {module} RUN_DIR BARS_FILE")
    assert "--run-dir RUN_DIR --data BARS_FILE" in usage[1]
