"""`rl-trader COMMAND`: dispatch, help, one-line refusals, and the package installing it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rl_trader.cli.main import COMMANDS, main

ROOT = Path(__file__).resolve().parents[2]


def test_help_lists_every_command_on_one_line(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name, (_, text) in COMMANDS.items():
        assert any(line.split() == [name, *text.split()] for line in out.splitlines()), name


def test_help_imports_no_command():
    """`python -m rl_trader.cli --help` works from the repository root, uninstalled, and
    stays quick: neither JAX nor any experiments module is imported."""
    code = ("import runpy, sys\n"
            "sys.argv = ['cli', '--help']\n"
            "try:\n    runpy.run_module('rl_trader.cli', run_name='__main__')\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'experiments')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.startswith("usage: python -m rl_trader.cli COMMAND")
    assert out.splitlines()[-1] == "[]"


@pytest.mark.parametrize("argv, needle", [([], "no command given"),
                                          (["trian"], "unknown command 'trian'"),
                                          (["--bogus"], "unknown command '--bogus'")])
def test_missing_or_unknown_command_exits_2_with_one_line(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "rl-trader --help" in err and err.count("\n") == 1


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_shows_its_help_under_its_own_name(name, capsys):
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: rl-trader {name} ")


def test_python_m_experiments_multi_fold_keeps_its_own_name(capsys):
    """The design card's entry point is the train command under its own name."""
    out = subprocess.run([sys.executable, "-m", "experiments.multi_fold", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.startswith("usage: python -m experiments.multi_fold ")


def test_a_commands_bad_option_names_the_command(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", "--bogus"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "--bogus" in err and "rl-trader train --help" in err and err.count("\n") == 1


def test_the_package_installs_the_script_and_experiments():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11+")
    setuptools = pytest.importorskip("setuptools")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"] == {"rl-trader": "rl_trader.cli.main:main"}
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = setuptools.find_packages(str(ROOT), include=include)
    assert {"rl_trader", "rl_trader.data", "experiments"} <= set(packages)
    for name in COMMANDS:
        assert (ROOT / "rl_trader" / "cli" / f"{name}.py").is_file(), name
