"""The make targets the README and the Makefile's header name expand to valid commands.

Each documented `make TARGET VAR=…` is expanded by `make -n` (a dry run: nothing is built or
run; `PYTHON` set, so no virtual environment is made), and every `python -m experiments.X …`
line it prints is parsed by that module's own parser, with the checks the module makes before
it starts (the main job's configuration, the gate's options), so a recipe that passes an empty
or stale option fails here instead of in a user's shell.
"""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# `make TARGET VAR=value VAR="two words" …` inside backticks or on a line of its own
MAKE_CALL = re.compile(r"(?:^|`)\s*(make [a-z][a-z_-]*(?: [A-Z_]+=(?:\"[^\"]*\"|[^\s`\"]+))*)",
                       re.MULTILINE)


def documented_calls() -> list[str]:
    """Every `make …` invocation shown in README.md and in the Makefile's header comment."""
    header = []
    for line in (ROOT / "Makefile").read_text().splitlines():
        if not line.startswith("#"):
            break
        header.append(line.lstrip("# "))
    texts = [(ROOT / "README.md").read_text(), "\n".join(header)]
    return sorted({m.group(1) for text in texts for m in MAKE_CALL.finditer(text)})


def test_the_documents_name_the_main_targets():
    calls = documented_calls()
    for target in ("train", "test", "convergence", "runs", "report", "bench"):
        assert any(c.split()[1] == target for c in calls), target


def _parser_of(module: str) -> argparse.ArgumentParser:
    if module == "multi_fold":  # the design card's name of `rl-trader train`
        return importlib.import_module("rl_trader.cli.train").build_parser()
    mod = importlib.import_module(f"experiments.{module}")
    return (mod.build_gate_parser if module == "convergence" else mod.build_parser)()


def check_command(argv: list[str]) -> str:
    """Parse one recipe line as its program would; the experiments module or `rl-trader`
    command it runs (or the program's name)."""
    if "-m" not in argv:
        return Path(argv[0]).name
    module = argv[argv.index("-m") + 1]
    rest = argv[argv.index("-m") + 2:]
    if module == "rl_trader.cli":  # `rl-trader COMMAND`: the command's own parser
        name, rest = rest[0], rest[1:]
        importlib.import_module(f"rl_trader.cli.{name}").build_parser().parse_args(rest)
        return name
    if not module.startswith("experiments."):  # pytest, ruff: tools of their own
        return module
    name = module.removeprefix("experiments.")
    parser = _parser_of(name)
    args = parser.parse_args(rest)  # argparse exits 2 on an invalid line
    if name == "multi_fold":
        from rl_trader.cli.options import config_from_args

        config_from_args(args)
    elif name == "convergence":
        from experiments.convergence import check_options

        check_options(args, parser.parse_args([]))
    return name


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("call", documented_calls())
def test_a_documented_make_call_expands_to_a_valid_command(call):
    words = shlex.split(call)
    out = subprocess.run([*words, "-n", "-s", f"PYTHON={sys.executable}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.replace("\\\n", " ").splitlines() if ln.strip()]
    assert lines, f"{call}: make printed no command"
    ran = []
    for line in lines:
        argv = shlex.split(line)
        argv = argv[argv.index("JAX_PLATFORMS=cpu") + 1:] if "JAX_PLATFORMS=cpu" in argv else argv
        try:
            ran.append(check_command(argv))
        except SystemExit as exc:
            pytest.fail(f"{call}: `{line}` is refused by its parser (exit {exc.code})")
    target = words[1]
    expected = {"train": "multi_fold", "test": "pytest", "convergence": "convergence",
                "runs": "runs", "report": "report", "bench": "benchmark"}.get(target)
    if expected:
        assert expected in ran, (call, ran)


def test_convergence_with_no_preset_runs_the_default_preset():
    """The header's `make convergence RUNS=5` passes no empty --preset (issue 28)."""
    out = subprocess.run(["make", "-n", "-s", "convergence", "RUNS=3",
                          f"PYTHON={sys.executable}"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert "--preset" not in out and "--runs 3" in out
    out = subprocess.run(["make", "-n", "-s", "convergence", "PRESET=smoke",
                          f"PYTHON={sys.executable}"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert "--preset smoke" in out
