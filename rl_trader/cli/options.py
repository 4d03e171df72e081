"""Command-line options generated from the config dataclasses (`config.option` fields).

Every field of every `RunConfig` section is an option, with its flag, type, help, default (the
`default` preset's) and choices taken from its declaration. `--preset` picks the base
configuration, `--config FILE` a saved `config.json` instead (so a run's own config re-runs it
exactly); options given on the command line override either. A bad option is answered with one
line on stderr and exit status 2 (no usage block).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from pathlib import Path
from typing import Any, NoReturn

from rl_trader.config import (
    PRESETS,
    SECTIONS,
    SWEEPABLE,
    RunConfig,
    config_from_dict,
    flag_of,
    preset,
)
from rl_trader.errors import InputError


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: `error: <message> (see --help)` and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def _scalar(hint: Any) -> Any:
    """The scalar type of an annotation: `int | None` → int; `tuple[float, ...]` → tuple."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is tuple:
        return tuple
    return _scalar(args[0]) if args else hint


def _floats(text: str) -> tuple[float, ...]:
    """'0.25,0.5' → (0.25, 0.5)."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") \
            from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def _fmt_default(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(f"{v:g}" for v in value)
    return "inferred" if value is None else str(value)


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """One option per config field, grouped by section; defaults shown are the `default`
    preset's. Parsed values default to None (not given)."""
    base = preset("default")
    for section, cls in SECTIONS.items():
        group = parser.add_argument_group(f"{section} ({cls.__name__})")
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            kind = _scalar(hints[f.name])
            default = getattr(getattr(base, section), f.name)
            text = f"{f.metadata['help']} (default: {_fmt_default(default)})"
            if f.metadata["sweep"]:
                text += "; sweepable"
            kw: dict[str, Any] = {"default": None, "help": text, "dest": f"{section}.{f.name}"}
            if kind is bool:
                kw["action"] = argparse.BooleanOptionalAction
            else:
                kw["type"] = _floats if kind is tuple else kind
                kw["metavar"] = {int: "N", float: "X", str: "S", tuple: "X,X,..."}[kind]
                if f.metadata["choices"]:
                    kw["choices"] = f.metadata["choices"]
                    del kw["metavar"]
            group.add_argument(flag_of(f), **kw)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The base configuration (--preset / --config), the seed and the sweep."""
    parser.add_argument("--preset", choices=PRESETS, default=None,
                        help="base configuration: smoke (tiny, seconds on a CPU) or default "
                             "(the real one; used when neither --preset nor --config is given)")
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="base configuration from a saved config.json (a run's own "
                             "config.json re-runs it exactly); options given override it")
    parser.add_argument("--seed", type=int, default=None, metavar="S",
                        help="PRNG seed (default 0)")
    parser.add_argument("--sweep", action="append", default=[], metavar="NAME=V1,V2",
                        help=f"sweep a hyper-parameter ({', '.join(SWEEPABLE)}) over values, "
                             "trained together; repeatable (grid); every setting is a trial")


def parse_sweep(items: list[str]) -> tuple[tuple[str, tuple[float, ...]], ...]:
    """`NAME=V1,V2` items → ((name, (v1, v2)), ...)."""
    axes = []
    for item in items:
        name, _, values = item.partition("=")
        try:
            vals = tuple(float(v) for v in values.split(",") if v.strip())
        except ValueError:
            raise InputError(f"option --sweep {item!r}: expected NAME=V1,V2,...") from None
        if not name.strip() or not vals:
            raise InputError(f"option --sweep {item!r}: expected NAME=V1,V2,...")
        axes.append((name.strip(), vals))
    return tuple(axes)


def load_config_file(path: str | Path, option: str = "--config") -> RunConfig:
    """A saved config.json as a `RunConfig`; InputError naming the file for anything wrong."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"option {option}: '{path}' is not a file")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise InputError(f"option {option}: '{path}' is not valid JSON ({err})") from None
    if not isinstance(saved, dict):
        raise InputError(f"option {option}: '{path}' holds an invalid configuration: not a "
                         "JSON object")
    try:
        return config_from_dict(saved).validate()
    except InputError as err:
        raise InputError(f"option {option}: '{path}' holds an invalid configuration: "
                         f"{err}") from None


def given(args: argparse.Namespace) -> dict[str, Any]:
    """The config options given on the command line, as {'section.field': value}."""
    return {k: v for k, v in vars(args).items() if "." in k and v is not None}


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The base configuration (--config file, else --preset, else `default`) with every option
    given on the command line applied; validated. The same on every backend."""
    if args.config and args.preset:
        raise InputError("options --config and --preset exclude each other: the saved "
                         "configuration is the base")
    cfg = load_config_file(args.config) if args.config else preset(args.preset or "default")
    sections = {name: getattr(cfg, name) for name in SECTIONS}
    for key, value in given(args).items():
        section, name = key.split(".")
        sections[section] = dataclasses.replace(sections[section], **{name: value})
    seed = cfg.seed if args.seed is None else args.seed
    sweep = parse_sweep(args.sweep) if args.sweep else cfg.sweep
    return dataclasses.replace(cfg, seed=seed, sweep=sweep, **sections).validate()


def run_parser(prog: str, description: str) -> Parser:
    """A parser with every config option plus --preset/--config/--seed/--sweep."""
    parser = Parser(prog=prog, description=description)
    add_run_options(parser)
    add_config_options(parser)
    return parser



def add_run_and_bars(parser: argparse.ArgumentParser, bars_help: str) -> None:
    """RUN_DIR and BARS_FILE, positional (the form `--help` shows first) or as `--run-dir` and
    `--data`, the names `train` uses; `run_and_bars` resolves them."""
    parser.add_argument("run_dir", nargs="?", metavar="RUN_DIR", help="a finished run directory")
    parser.add_argument("bars", nargs="?", metavar="BARS_FILE", help=bars_help)
    parser.add_argument("--run-dir", dest="run_dir_option", metavar="RUN_DIR", default=None,
                        help="the run directory, instead of the positional RUN_DIR")
    parser.add_argument("--data", dest="bars_option", metavar="BARS_FILE", default=None,
                        help="the bar file, instead of the positional BARS_FILE")


def run_and_bars(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[str, str]:
    """(run directory, bar file) from either form of `add_run_and_bars`; each given once, or
    the parser's one-line error (exit status 2)."""
    out = []
    for what, positional, flag, option in (("run directory", args.run_dir, "--run-dir",
                                            args.run_dir_option),
                                           ("bar file", args.bars, "--data", args.bars_option)):
        metavar = "RUN_DIR" if flag == "--run-dir" else "BARS_FILE"
        if positional is not None and option is not None:
            parser.error(f"the {what} is given twice: as {metavar} and as {flag} (give one)")
        if positional is None and option is None:
            parser.error(f"the {what} is missing: give {metavar} or {flag} {metavar}")
        out.append(positional if option is None else option)
    return out[0], out[1]
