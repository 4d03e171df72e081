"""The runs under a directory side by side: one row per run, read from its `summary.json`.

Nothing is recomputed: the Sharpes (annualised, stitched over the test blocks), the DSR, the
PBO and the SPA p (`headline.spa.p_agent_beats_all`) are the run's own; `skill` is the run's
verdict (`evaluation.verdict.skill_verdict`: the DSR, a backtest's PSR, reaches 0.95 and the
SPA p is below 0.05). A directory with a `summary.json` is a run: `done`, `stopped` (the NaN
guard stopped a fold), `backtest` or `sweep` (those commands' output). One without it but with
a `config.json` or a `resume/` state is `incomplete` (interrupted, or still running); one whose
`summary.json` cannot be read is `corrupt`, with the reason in `note`. Anything else is
skipped. `time` is when `summary.json` was written (an incomplete run: its last saved epoch).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rl_trader.config import PRESETS, config_from_dict, preset
from rl_trader.data.loader import EMBEDDED  # the data source of a run on the embedded data
from rl_trader.errors import InputError
from rl_trader.evaluation.record import ABSENT, Headline, RunSummary
from rl_trader.evaluation.verdict import skill_verdict

COLUMNS = ("run", "status", "time", "data", "preset", "epochs", "folds", "agent",
           "buy_and_hold", "random", "vol_target", "ridge", "gbm", "dsr", "pbo", "spa", "skill",
           "note")
NUMBERS = ("agent", "buy_and_hold", "random", "vol_target", "ridge", "gbm", "dsr", "pbo", "spa")
PROBABILITIES = ("dsr", "pbo", "spa")  # spa: the SPA p for "the agent beats every baseline"
SORT_KEYS = tuple(c for c in COLUMNS if c != "note")


class Corrupt(ValueError):
    """A summary.json that does not hold what a run writes."""


def run_rows(runs_dir: str | Path) -> list[dict[str, Any]]:
    """One row (keys `COLUMNS`) per run directory directly under `runs_dir`, in name order;
    InputError when `runs_dir` is not a directory."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        why = "is not a directory" if runs_dir.exists() else "does not exist"
        raise InputError(f"runs directory '{runs_dir}' {why}")
    rows = []
    for d in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        if (d / "summary.json").exists():
            rows.append(_finished_row(d))
        elif (d / "config.json").exists() or (d / "resume").is_dir():
            rows.append(_incomplete_row(d))
    return rows


def sort_rows(rows: list[dict[str, Any]], key: str = "time",
              reverse: bool = False) -> list[dict[str, Any]]:
    """`rows` ordered by column `key` (a `SORT_KEYS` name); rows without a value go last."""
    present = [r for r in rows if r[key] is not None]
    absent = [r for r in rows if r[key] is None]
    return sorted(present, key=lambda r: r[key], reverse=reverse) + absent


def format_table(rows: list[dict[str, Any]]) -> str:
    """The rows as aligned text columns (numbers to 3 decimals, 'n/a' when absent)."""
    cells = [list(COLUMNS)] + [[_cell(r[c], c) for c in COLUMNS] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    right = {i for i, c in enumerate(COLUMNS) if c in NUMBERS or c in ("epochs", "folds")}
    lines = ["  ".join(v.rjust(w) if i in right else v.ljust(w)
                       for i, (v, w) in enumerate(zip(row, widths, strict=True))).rstrip()
             for row in cells]
    return "\n".join(lines)


def _cell(value: Any, column: str) -> str:
    if value is None:
        return "" if column == "note" else "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if column in NUMBERS:
        return f"{value:.3f}" if column in PROBABILITIES else f"{value:+.3f}"
    return str(value)


def _row(d: Path, status: str, **values: Any) -> dict[str, Any]:
    return {**dict.fromkeys(COLUMNS), "run": d.name, "status": status, **values}


def _stamp(path: Path) -> str:
    """The local time `path` was last written, 'YYYY-MM-DD HH:MM:SS'."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(path.stat().st_mtime))


def _finished_row(d: Path) -> dict[str, Any]:
    path = d / "summary.json"
    try:
        s = RunSummary.from_json(json.loads(path.read_text(encoding="utf-8")), "summary.json")
        if s.validation_only:
            return _row(d, "sweep", time=_stamp(path), data=_data(s.config),
                        note="validation only (experiments.sweep): no test figures",
                        **_config_columns(s.config))
        if s.stitched_test_sharpe is ABSENT:
            raise InputError("summary.json: not a run's summary (no stitched_test_sharpe)")
        head = s.headline or Headline(stitched_test_sharpe=s.stitched_test_sharpe)
        stitched, spa = s.stitched or {}, head.spa or None
        return _row(
            d, "backtest" if s.backtest else "stopped" if s.stopped else "done",
            time=_stamp(path), data=s.data_source or None, **_config_columns(s.config),
            agent=s.stitched_test_sharpe, buy_and_hold=_value(s.stitched_buy_and_hold_test_sharpe),
            random=_value(s.stitched_random.sharpe if s.stitched_random else None),
            **{name: _value(stitched[name].sharpe if name in stitched else None)
               for name in ("vol_target", "ridge", "gbm")},
            dsr=_value(head.dsr), pbo=_value(head.pbo),
            spa=spa.p_agent_beats_all if spa else None,
            skill=skill_verdict(head)[0] if s.headline else None,
            note="; ".join(s.stopped or []) or None)
    except json.JSONDecodeError as err:
        why = f"summary.json: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}"
    except (Corrupt, InputError, OSError, UnicodeDecodeError, RecursionError) as err:
        why = str(err)
    return _row(d, "corrupt", time=_stamp(path), note=why)


def _incomplete_row(d: Path) -> dict[str, Any]:
    """An interrupted (or running) run: its configuration and the last epoch saved for
    `--resume` (orbax names that state's directory `resume/<epoch>`)."""
    resume = d / "resume"
    saved = max((int(p.name) for p in resume.iterdir() if p.name.isdigit()),
                default=None) if resume.is_dir() else None
    stamped = d / "config.json" if saved is None else resume / str(saved)
    notes = ["no epoch saved" if saved is None else f"saved after epoch {saved}"]
    try:
        config = json.loads((d / "config.json").read_text(encoding="utf-8"))
        columns = _config_columns(config)
        data = _data(config)
    except (json.JSONDecodeError, Corrupt, OSError, UnicodeDecodeError, RecursionError):
        columns, data = {}, None
        notes.append("config.json unreadable")
    if saved is not None and columns.get("epochs") is not None:
        notes[0] += f" of 0..{columns['epochs'] - 1}"
    notes.append("--resume continues it unless it is still running")
    return _row(d, "incomplete", time=_stamp(stamped) if stamped.exists() else None, data=data,
                note="; ".join(notes), **columns)


def _config_columns(config: Any) -> dict[str, Any]:
    """preset, epochs and folds of a saved configuration (`RunConfig.to_dict`); none if absent."""
    if config is None:
        return {}
    epochs, folds = _at(config, "train", "epochs"), _at(config, "folds", "n_folds")
    return {"preset": _preset_name(config),
            "epochs": epochs if isinstance(epochs, int) else None,
            "folds": folds if isinstance(folds, int) else None}


def _data(config: Any) -> str | None:
    """The data a saved configuration names: its path, or the embedded data."""
    return None if config is None else _text(_at(config, "data", "path")) or EMBEDDED


def _preset_name(config: dict) -> str:
    """The preset a configuration is, its data, seed, epochs and folds aside; else the preset
    whose network it has, with '*' (other options changed); else 'custom'. An older
    configuration is read as today's first (`config_from_dict`: removed fields dropped, fields
    added since given the value its run had)."""
    try:
        config = json.loads(json.dumps(config_from_dict(config).to_dict()))
    except InputError:
        pass  # a configuration this version cannot read: compared as saved
    presets = {name: json.loads(json.dumps(preset(name).to_dict())) for name in PRESETS}
    for name, base in presets.items():
        if all(_without(config, k) == _without(base, k) for k in base if k not in ("data", "seed")):
            return name
    for name, base in presets.items():
        if config.get("net") == base["net"]:
            return name + "*"
    return "custom"


def _without(config: dict, section: str) -> Any:
    """A config section without the field the main options set (train.epochs, folds.n_folds)."""
    value = config.get(section)
    skip = {"train": "epochs", "folds": "n_folds"}.get(section)
    return {k: v for k, v in value.items() if k != skip} if isinstance(value, dict) else value


def _at(obj: Any, *keys: str) -> Any:
    """obj[k1][k2]…, None where a key is absent; Corrupt where a level is not an object."""
    for k in keys:
        if obj is None:
            return None
        if not isinstance(obj, dict):
            raise Corrupt(f"'{k}' is under something that is not an object")
        obj = obj.get(k)
    return obj


def _value(value: Any) -> float | None:
    """A figure of the summary (`from_json` checked its type), None where absent or null."""
    return None if value is None or value is ABSENT else float(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
