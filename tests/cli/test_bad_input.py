"""Bad input through the command line, end to end (`rl_trader.cli.train.main`, in-process).

One table: every case is refused with exit 2 (bad data, options or run directory) or 1 (an
environment fault), one `error: ...` line on stderr naming what and where, no traceback, and
nothing half-written: the whole test directory — the data files, an earlier complete run, an
interrupted run — is byte-for-byte as before, and the `--run-dir` given does not exist afterwards.

Every case passes the tiny `--preset smoke --folds 2 --epochs 1 --envs 4 ...` options, and training
itself is replaced by a function that fails the test: a case wrongly let through fails at once
instead of training. Only `test_disk_full_after_training_then_resume` really trains (seconds: the
tiny run of `helpers.TINY_ARGS`, whose programs the other tests that train share).
"""

from __future__ import annotations

import errno
import gzip
import io
import json
import lzma
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from rl_trader.cli.train import main
from rl_trader.config import preset
from rl_trader.run import experiment
from tests.helpers import TINY_ARGS

FAST = ["--preset", "smoke", "--folds", "2", "--epochs", "1", "--envs", "4",
        "--steps-per-epoch", "4", "--batch", "8"]
SYNTH = ["--data", "synthetic:ar1:1200:2"]
HEADER = ["Date", "Open", "High", "Low", "Close", "Volume"]


# --- data files ------------------------------------------------------------------------------


def bar_rows(n: int = 30, seed: int = 0) -> list[list[str]]:
    """`n` valid daily bars (business days from 2020-01-01) as CSV cells."""
    rng = np.random.default_rng(seed)
    close = np.round(100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, n))), 4)
    open_ = np.concatenate([[100.0], close[:-1]])
    dates = np.busday_offset("2020-01-01", np.arange(n), roll="forward")
    return [[str(d), f"{o:.4f}", f"{max(o, c) * 1.01:.4f}", f"{min(o, c) * 0.99:.4f}",
             f"{c:.4f}", "1000"] for d, o, c in zip(dates, open_, close, strict=True)]


def csv_bytes(rows: list[list[str]], header: list[str] = HEADER) -> bytes:
    return ("\n".join(",".join(r) for r in [header, *rows]) + "\n").encode()


def edited(edits: dict[tuple[int, str], str], n: int = 30) -> bytes:
    """Valid bars with data row r (1-based), column c set to v for each (r, c): v."""
    rows = bar_rows(n)
    for (row, col), value in edits.items():
        rows[row - 1][HEADER.index(col)] = value
    return csv_bytes(rows)


def zipped(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(name, data)
    return buf.getvalue()


def flip_middle(data: bytes) -> bytes:
    b = bytearray(data)
    b[len(b) // 2] ^= 0xFF
    return bytes(b)


GOOD = csv_bytes(bar_rows())


def data_file(name: str, content: bytes) -> Callable[[Path], list[str]]:
    """argv builder: `--data tmp/name` holding `content`."""
    def build(tmp: Path) -> list[str]:
        (tmp / name).write_bytes(content)
        return ["--data", str(tmp / name)]
    return build


# --- run directories -------------------------------------------------------------------------


def smoke_config(**train) -> dict:
    cfg = preset("smoke").to_dict()
    cfg["data"]["path"] = "synthetic:ar1:1200:2"
    cfg["train"].update(train)
    return cfg


def fake_run(run_dir: Path, complete: bool, config: bytes | None = None) -> Path:
    """A small stand-in for a run directory: complete (summary.json) or interrupted."""
    (run_dir / "fold_0" / "checkpoints" / "0" / "state" / "d").mkdir(parents=True)
    (run_dir / "fold_0" / "checkpoints" / "0" / "state" / "d" / "0123abcd").write_bytes(
        bytes(range(256)) * 4)
    (run_dir / "resume").mkdir()
    (run_dir / "config.json").write_bytes(
        config if config is not None else json.dumps(smoke_config(), indent=2).encode())
    (run_dir / "folds.json").write_text('{"folds": []}\n')
    (run_dir / ".lock").write_text("pid 1")
    if complete:
        (run_dir / "summary.json").write_text('{"folds": [], "stopped": []}\n')
        (run_dir / "report.html").write_text("<html>earlier run</html>\n")
    return run_dir


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under root: file bytes, or None for a directory."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*"))}


def interrupted(config: bytes) -> Callable[[Path], list[str]]:
    """argv builder: `--resume` on an interrupted run whose config.json holds `config`."""
    def build(tmp: Path) -> list[str]:
        fake_run(tmp / "interrupted", complete=False, config=config)
        return ["--resume", "--run-dir", str(tmp / "interrupted")]
    return build


def json_config(**train) -> bytes:
    return json.dumps(smoke_config(**train)).encode()


def with_data_path(path: object) -> bytes:
    cfg = smoke_config()
    cfg["data"]["path"] = path
    return json.dumps(cfg).encode()


def disk_full_at(name: str) -> Callable[[pytest.MonkeyPatch], None]:
    """Make writing `name` (config.json, folds.json, ...) fail as on a full disk."""
    def patch(monkeypatch: pytest.MonkeyPatch) -> None:
        real = experiment.write_json

        def write_json(path: Path, obj: dict) -> None:
            if path.name == name:
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
            real(path, obj)

        monkeypatch.setattr(experiment, "write_json", write_json)
    return patch


# --- the table -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    argv: Callable[[Path], list[str]]  # built in the test directory (earlier run already there)
    code: int
    needles: tuple[str, ...]  # in the error line; "{tmp}" is the test directory
    fast: bool = True  # prepend FAST and `--run-dir {tmp}/r`
    patch: Callable[[pytest.MonkeyPatch], None] | None = None


def opts(*argv: str) -> Callable[[Path], list[str]]:
    return lambda tmp: list(argv)


def at(rel: str, *argv: str) -> Callable[[Path], list[str]]:
    """argv with `{tmp}` in the items replaced by the test directory."""
    return lambda tmp: [a.replace("{tmp}", str(tmp)) for a in (*argv, "--run-dir", str(tmp / rel))]


def _gz_truncated() -> bytes:
    gz = gzip.compress(csv_bytes(bar_rows(200)))
    return gz[: len(gz) // 2]


CASES = [
    # --- data files: unreadable ---
    Case("binary_garbage", data_file("garbage.csv", bytes(range(256)) * 8), 2,
         ("data file '{tmp}/garbage.csv'", "binary data")),
    Case("binary_not_utf8", data_file("latin.csv", bytes(range(128, 256)) * 8), 2,
         ("data file '{tmp}/latin.csv'", "cannot read as CSV", "UnicodeDecodeError")),
    Case("corrupt_parquet", data_file("bars.parquet", b"PAR1" + bytes(range(200)) + b"PAR1"), 2,
         ("data file '{tmp}/bars.parquet'", "cannot read as Parquet")),
    Case("truncated_gzip", data_file("bars.csv.gz", _gz_truncated()), 2,
         ("data file '{tmp}/bars.csv.gz'", "cannot read as CSV", "EOFError")),
    Case("corrupt_xz", data_file("bars.csv.xz", flip_middle(lzma.compress(GOOD))), 2,
         ("data file '{tmp}/bars.csv.xz'", "cannot read as CSV", "LZMAError")),
    Case("corrupt_zip", data_file("bars.zip", flip_middle(zipped("bars.csv", GOOD))), 2,
         ("data file '{tmp}/bars.zip'", "cannot read as CSV", "BadZipFile")),
    Case("directory", lambda tmp: (tmp / "adir").mkdir() or ["--data", str(tmp / "adir")], 2,
         ("data file '{tmp}/adir'", "is a directory")),
    Case("missing_path", opts("--data", "/nonexistent/bars.csv"), 2,
         ("data file '/nonexistent/bars.csv'", "no such file")),
    Case("empty_file", data_file("empty.csv", b""), 2,
         ("data file '{tmp}/empty.csv'", "file is empty (0 bytes)")),
    Case("header_only", data_file("header.csv", csv_bytes([])), 2,
         ("data file '{tmp}/header.csv'", "no data rows")),
    Case("missing_column", data_file("five.csv", csv_bytes([r[:5] for r in bar_rows()],
                                                           HEADER[:5])), 2,
         ("data file '{tmp}/five.csv'", "missing required column(s) Volume")),
    # --- data files: bad values (row and column named) ---
    Case("currency_sign", data_file("usd.csv", edited({(4, "Close"): '"$1,234.50"'})), 2,
         ("data file '{tmp}/usd.csv', row 4, column 'Close'", "non-numeric value '$1,234.50'")),
    Case("nan_cell", data_file("nan.csv", edited({(5, "Volume"): "NaN"})), 2,
         ("data file '{tmp}/nan.csv', row 5, column 'Volume'", "missing value 'NaN'")),
    Case("high_below_low", data_file("hilo.csv", edited({(6, "High"): "1.0"})), 2,
         ("data file '{tmp}/hilo.csv', row 6, column 'High'", "High 1.0 < Low")),
    Case("constant_price", data_file("flat.csv", csv_bytes(
        [[r[0], "10", "10", "10", "10", "5"] for r in bar_rows()])), 2,
         ("data file '{tmp}/flat.csv', column 'Close'", "close price is constant")),
    Case("unsorted_dates", data_file("unsorted.csv", edited({(8, "Date"): "2019-12-31"})), 2,
         ("data file '{tmp}/unsorted.csv', row 8, column 'Date'", "dates must increase")),
    Case("duplicate_dates", data_file("dup.csv", edited({(9, "Date"): bar_rows()[7][0]})), 2,
         ("data file '{tmp}/dup.csv', row 9, column 'Date'", "duplicate date", "same as row 8")),
    Case("date_out_of_range", data_file("y2999.csv", edited({(1, "Date"): "2999-01-01"})), 2,
         ("data file '{tmp}/y2999.csv', row 1, column 'Date'", "'2999-01-01' is out of range")),
    Case("too_few_bars_for_folds", lambda tmp: data_file("small.csv", csv_bytes(bar_rows(300)))(
        tmp) + ["--folds", "3"], 2, ("3 folds need at least", "(option --folds)")),
    # --- options: out of range (the option and its allowed range named) ---
    Case("lr_0", opts("--lr", "0"), 2, ("option --lr=0.0", "in (0, 1]")),
    Case("lr_nan", opts("--lr", "nan"), 2, ("option --lr=nan", "in (0, 1]")),
    Case("gamma_1", opts("--gamma", "1"), 2, ("option --gamma=1.0", "in [0, 1)")),
    Case("tau_0", opts("--tau", "0"), 2, ("option --tau=0.0", "in (0, 1]")),
    Case("n_step_0", opts("--n-step", "0"), 2, ("option --n-step=0", "[1, 64]")),
    Case("batch_negative", opts("--batch", "-1"), 2, ("option --batch=-1", "[1, 65536]")),
    Case("seeds_0", opts("--seeds", "0"), 2, ("option --seeds=0", "[1, 4096]")),
    Case("commission_negative", opts("--commission-bps", "-1"), 2,
         ("option --commission-bps=-1.0", "in [0, 1000]")),
    Case("epochs_0", opts("--epochs", "0"), 2, ("option --epochs=0", "[1, 10000]")),
    Case("seed_negative", opts("--seed", "-1"), 2, ("option --seed=-1", "[0, 2**31 - 2)")),
    Case("seed_too_big", opts("--seed", str(2**31 - 2)), 2,
         (f"option --seed={2**31 - 2}", "[0, 2**31 - 2)")),
    Case("sweep_unknown_name", opts(*SYNTH, "--sweep", "tau=0.1,0.2"), 2,
         ("option --sweep tau: cannot be swept", "sweepable are learning_rate")),
    Case("sweep_malformed_value", opts(*SYNTH, "--sweep", "learning_rate=1e-3;2e-3"), 2,
         ("option --sweep 'learning_rate=1e-3;2e-3'", "expected NAME=V1,V2")),
    Case("sweep_no_values", opts(*SYNTH, "--sweep", "gamma"), 2,
         ("option --sweep 'gamma'", "expected NAME=V1,V2")),
    Case("synthetic_unknown", opts("--data", "synthetic:unknown"), 2,
         ("synthetic market 'unknown' is unknown", "must be one of")),
    Case("synthetic_bad_count", opts("--data", "synthetic:ar1:many"), 2,
         ("option --data='synthetic:ar1:many'", "must be integers")),
    # --- run directories ---
    Case("existing_run_dir", at("earlier", *FAST, *SYNTH), 2,
         ("run directory '{tmp}/earlier' already exists and is not empty", "--overwrite"),
         fast=False),
    Case("run_dir_is_a_file", at("afile", *FAST, *SYNTH), 2,
         ("run directory '{tmp}/afile' already exists", "--overwrite"), fast=False),
    Case("resume_no_run", at("r", "--resume"), 2,
         ("option --resume: '{tmp}/r' holds no run (no config.json)",), fast=False),
    Case("resume_empty_dir", at("emptydir", "--resume"), 2,
         ("option --resume: '{tmp}/emptydir' holds no run",), fast=False),
    Case("resume_without_run_dir", opts("--resume"), 2, ("option --resume needs --run-dir",),
         fast=False),
    Case("resume_with_options", at("earlier", "--resume", *FAST), 2,
         ("option --resume continues with the saved configuration", "do not pass --batch",
          "--steps-per-epoch"), fast=False),
    Case("resume_complete_run", at("earlier", "--resume"), 2,
         ("option --resume: the run in '{tmp}/earlier' is already complete",), fast=False),
    Case("resume_truncated_config", interrupted(json_config()[:40]), 2,
         ("option --resume: '{tmp}/interrupted/config.json' is not valid JSON",), fast=False),
    Case("resume_binary_config", interrupted(b"\xff\xfe\x00\x93garbage"), 2,
         ("option --resume: '{tmp}/interrupted/config.json' is not valid JSON",), fast=False),
    Case("resume_config_not_an_object", interrupted(b"[1, 2]"), 2,
         ("'{tmp}/interrupted/config.json' holds an invalid configuration",), fast=False),
    Case("resume_config_wrong_type", interrupted(json_config(epochs="3")), 2,
         ("'{tmp}/interrupted/config.json' holds an invalid configuration",
          "train.epochs='3'"), fast=False),
    Case("resume_config_path_not_text", interrupted(with_data_path(5)), 2,
         ("'{tmp}/interrupted/config.json' holds an invalid configuration", "data.path=5"),
         fast=False),
    Case("resume_config_out_of_range", interrupted(json_config(epochs=0)), 2,
         ("'{tmp}/interrupted/config.json' holds an invalid configuration",
          "option --epochs=0"), fast=False),
    # --- environment faults: exit 1, the path named ---
    Case("run_dir_parent_is_a_file", at("afile/run", *FAST, *SYNTH), 1,
         ("Not a directory '{tmp}/afile/run'", "environment fault"), fast=False),
    Case("disk_full_writing_config", opts(*SYNTH), 1,
         ("No space left on device '{tmp}/r/config.json'", "environment fault"),
         patch=disk_full_at("config.json")),
    Case("disk_full_writing_folds", opts(*SYNTH), 1,
         ("No space left on device '{tmp}/r/folds.json'", "environment fault"),
         patch=disk_full_at("folds.json")),
    Case("disk_full_in_an_empty_run_dir", at("emptydir", *FAST, *SYNTH), 1,
         ("No space left on device '{tmp}/emptydir/config.json'",), fast=False,
         patch=disk_full_at("config.json")),
    Case("sweep_value_out_of_range", opts(*SYNTH, "--sweep", "gamma=0.5,1.5"), 2,
         ("--sweep", "gamma")),
    Case("aux_weight_inf", opts(*SYNTH, "--aux-weight", "inf"), 2, ("aux",)),
    Case("lr_nan", opts(*SYNTH, "--lr", "nan"), 2, ("--lr",)),
]

ARGPARSE_CASES = [
    (["--folds", "x"], "argument --folds: invalid int value: 'x'"),
    (["--lr", "fast"], "argument --lr: invalid float value: 'fast'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--preset", "huge"], "argument --preset: invalid choice: 'huge'"),
    (["--tree-forecast", "on"], "argument --tree-forecast: invalid choice: 'on'"),
    (["--backup", "some"], "argument --backup: invalid choice: 'some'"),
    (["--magnitudes", "0.5,x"], "argument --magnitudes: expected comma-separated numbers"),
]


@pytest.fixture
def tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A test directory with an earlier complete run, an empty dir and a plain file; training
    replaced by a test failure; no persistent compilation cache."""
    fake_run(tmp_path / "earlier", complete=True)
    (tmp_path / "emptydir").mkdir()
    (tmp_path / "afile").write_text("not a directory\n")

    def must_not_train(*args, **kwargs):
        pytest.fail("bad input reached training")

    monkeypatch.setattr(experiment, "_run", must_not_train)
    monkeypatch.setenv("RL_TRADER_JAX_CACHE", "off")
    return tmp_path


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_input_is_one_line_and_changes_nothing(case: Case, tmp: Path,
                                                   monkeypatch: pytest.MonkeyPatch, capsys):
    argv = case.argv(tmp)
    if case.fast:
        argv = [*FAST, "--run-dir", str(tmp / "r"), *argv]
    if case.patch:
        case.patch(monkeypatch)
    before = snapshot(tmp)
    capsys.readouterr()

    code = main(argv)

    err = capsys.readouterr().err.strip()
    assert code == case.code, err
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    for needle in case.needles:
        assert needle.replace("{tmp}", str(tmp)) in err, (needle, err)
    assert not (tmp / "r").exists()
    assert snapshot(tmp) == before  # data, the earlier run and everything else unchanged


@pytest.mark.parametrize("argv, needle", ARGPARSE_CASES, ids=lambda v: str(v))
def test_wrong_option_types_exit_2_with_one_error_line(argv, needle, tmp: Path, capsys):
    before = snapshot(tmp)
    with pytest.raises(SystemExit) as exc:
        main([*FAST, "--run-dir", str(tmp / "r"), *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and needle in errors[0], err
    assert "Traceback" not in err
    assert snapshot(tmp) == before


def test_disk_full_after_training_then_resume(tmp_path: Path, monkeypatch, capsys):
    """summary.json cannot be written (ENOSPC) after training: exit 1 and one line naming the
    file; an earlier run is untouched; the run is resumable and --resume completes it."""
    earlier = fake_run(tmp_path / "earlier", complete=True)
    kept = snapshot(earlier)
    run_dir = tmp_path / "run"
    disk_full_at("summary.json")(monkeypatch)
    capsys.readouterr()

    code = main([*TINY_ARGS, *SYNTH, "--run-dir", str(run_dir)])

    err = capsys.readouterr().err.strip()
    assert code == 1, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"error: No space left on device '{run_dir / 'summary.json'}'" in err
    assert snapshot(earlier) == kept
    assert (run_dir / "config.json").is_file() and not (run_dir / "summary.json").exists()
    assert not list(run_dir.rglob("*.tmp"))

    monkeypatch.undo()  # the disk has room again
    assert main(["--resume", "--run-dir", str(run_dir)]) == 0, capsys.readouterr().err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert len(summary["folds"]) == 2 and not summary["stopped"]
    assert not (run_dir / "resume").exists()
    assert snapshot(earlier) == kept
