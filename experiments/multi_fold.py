"""The main job: walk-forward training and out-of-sample scoring.

    python -m experiments.multi_fold [--data PATH] [--folds K] [--epochs E] [--seed S]
                                     [--preset smoke|default] [--run-dir DIR] [overrides]

Exit codes: 0 done, 2 bad input or options, 1 anything else.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
import types
import typing
from pathlib import Path

from rl_trader.config import PRESETS, SWEEPABLE, RunConfig, config_from_dict, preset
from rl_trader.errors import InputError

# option → (config section, field, type, help)
OVERRIDES = {
    "--lr": ("agent", "learning_rate", float, "Adam learning rate"),
    "--tau": ("agent", "tau", float, "target EMA weight on the online params, in (0, 1]"),
    "--gamma": ("agent", "gamma", float, "discount per bar, in [0, 1)"),
    "--n-step": ("agent", "n_step", int, "n-step return length"),
    "--weight-decay": ("agent", "weight_decay", float, "decoupled weight decay (AdamW)"),
    "--obs-noise": ("agent", "obs_noise", float, "noise std on normalised market inputs"),
    "--aux-weight": ("agent", "aux_weight", float, "weight of the next-bar-return loss"),
    "--eps-end": ("agent", "eps_end", float, "final ε of the ε-greedy exploration"),
    "--eps-decay": ("agent", "eps_decay_fraction", float,
                    "fraction of the training env steps over which ε decays to --eps-end"),
    "--batch": ("agent", "batch_size", int, "gradient batch size"),
    "--backup": ("agent", "backup", str, "TD backups: taken (n-step) or all positions (1-step)"),
    "--commission-bps": ("env", "commission_bps", float, "commission, bps of traded notional"),
    "--slippage-bps": ("env", "slippage_bps", float, "slippage, bps of traded notional"),
    "--envs": ("train", "n_envs", int, "parallel training envs"),
    "--seeds": ("train", "seeds", int, "seeds per fold (and setting), trained together; "
                "their ensemble (mean greedy position) is the fold's policy"),
    "--eval-params": ("train", "eval_params", str,
                      "greedy policy from the online or the target (EMA) params"),
    "--steps-per-epoch": ("train", "steps_per_epoch", int, "env steps per env per epoch"),
    "--lookback": ("features", "lookback", int, "look-back window in bars"),
    "--precision": ("net", "precision", str,
                    "matmul precision: tf32 (backend default), fp32 (exact) or bf16; "
                    "params stay float32"),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m experiments.multi_fold",
        description="Train the branching VSN/GRN deep-Q agent over walk-forward folds; select "
                    "each fold's best epoch on validation Sharpe and score it once on test.")
    p.add_argument("--data", metavar="PATH", default=None,
                   help="OHLCV file (CSV, CSV.gz or Parquet); default: embedded S&P 500 daily")
    p.add_argument("--folds", type=int, default=None, metavar="K",
                   help="number of walk-forward folds (default 3)")
    p.add_argument("--epochs", type=int, default=None, metavar="E",
                   help="epochs per fold (default: the preset's; 5 for default)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="PRNG seed (default 0)")
    p.add_argument("--preset", choices=PRESETS, default="default",
                   help="smoke: tiny, for a quick check; default: the real configuration")
    p.add_argument("--run-dir", metavar="DIR", default=None,
                   help="output directory (default runs/<time>-<preset>); never reused silently")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing, non-empty --run-dir")
    p.add_argument("--resume", action="store_true",
                   help="continue the interrupted run in --run-dir from its last completed "
                        "epoch, with its saved configuration (give no other options)")
    p.add_argument("--devices", type=int, default=None, metavar="N",
                   help="spread the population over the first N local devices (default: all)")
    p.add_argument("--coordinator", metavar="HOST:PORT", default=None,
                   help="multi-process run: address of process 0's coordinator (with "
                        "--num-processes and --process-id); every process runs the same command")
    p.add_argument("--num-processes", type=int, default=None, metavar="N")
    p.add_argument("--process-id", type=int, default=None, metavar="I")
    p.add_argument("--distributed", action="store_true",
                   help="multi-process run configured by the cluster scheduler or JAX's "
                        "environment variables (jax.distributed.initialize with no arguments)")
    p.add_argument("--debug-nans", action="store_true",
                   help="turn on JAX's NaN checking (slow; stops at the first NaN produced)")
    for opt, (_, _, typ, text) in OVERRIDES.items():
        p.add_argument(opt, type=typ, default=None, help=text)
    p.add_argument("--sweep", action="append", default=[], metavar="NAME=V1,V2",
                   help=f"sweep a hyper-parameter ({', '.join(SWEEPABLE)}) "
                        "over values, trained together; repeatable (grid). Selection per fold "
                        "is on validation across epochs, seeds and settings")
    return p


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


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The preset, with every option given on the command line applied."""
    cfg = preset(args.preset)
    sections = {name: getattr(cfg, name)
                for name in ("agent", "env", "train", "features", "net")}
    for opt, (section, fld, _, _) in OVERRIDES.items():
        value = getattr(args, opt.lstrip("-").replace("-", "_"))
        if value is not None:
            sections[section] = dataclasses.replace(sections[section], **{fld: value})
    if args.epochs is not None:
        sections["train"] = dataclasses.replace(sections["train"], epochs=args.epochs)
    folds = cfg.folds if args.folds is None else dataclasses.replace(cfg.folds,
                                                                     n_folds=args.folds)
    data = dataclasses.replace(cfg.data, path=args.data)
    return dataclasses.replace(cfg, seed=args.seed, folds=folds, data=data,
                               sweep=parse_sweep(args.sweep), **sections).validate()


def enable_compilation_cache() -> str | None:
    """Turn on JAX's persistent compilation cache (RL_TRADER_JAX_CACHE=off disables it)."""
    path = os.environ.get("RL_TRADER_JAX_CACHE",
                          str(Path.home() / ".cache" / "rl_trader" / "jax"))
    if path == "off":
        return None
    import jax

    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # cache every program
    return path


RESUME_KEEPS = {"run_dir", "resume", "debug_nans", "devices", "coordinator", "num_processes",
                "process_id", "distributed"}


def resume_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> RunConfig:
    """The saved configuration of the run to resume; refuses any other option given."""
    defaults = vars(parser.parse_args([]))
    given = sorted(k for k, v in vars(args).items() if k not in RESUME_KEEPS and v != defaults[k])
    if given:
        names = ", ".join("--" + k.replace("_", "-") for k in given)
        raise InputError(f"option --resume continues with the saved configuration: do not pass "
                         f"{names}")
    if not args.run_dir:
        raise InputError("option --resume needs --run-dir (the run to continue)")
    saved = Path(args.run_dir) / "config.json"
    if not saved.is_file():
        raise InputError(f"option --resume: '{args.run_dir}' holds no run (no config.json)")
    if (Path(args.run_dir) / "summary.json").exists():
        raise InputError(f"option --resume: the run in '{args.run_dir}' is already complete")
    try:
        saved_dict = json.loads(saved.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise InputError(f"option --resume: '{saved}' is not valid JSON ({err})") from None
    try:  # a damaged or hand-edited config.json: refused here, not as a traceback later
        cfg = config_from_dict(saved_dict)
        wrong = _wrong_type(cfg)
        if wrong:
            raise InputError(f"wrong type: {wrong}")
        return cfg.validate()
    except InputError as err:
        raise InputError(f"option --resume: '{saved}' holds an invalid configuration: "
                         f"{err}") from None


def _wrong_type(obj: object, prefix: str = "") -> str | None:
    """The first field of a config dataclass whose value does not match its annotation (e.g.
    `"epochs": "3"` in a hand-edited config.json), as 'train.epochs=...'; None if all match."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value, name = getattr(obj, f.name), prefix + f.name
        if dataclasses.is_dataclass(value):
            wrong = _wrong_type(value, name + ".")
            if wrong:
                return wrong
        elif not _is_a(value, hints[f.name]):
            return f"{name}={value!r} (expected {hints[f.name]})"
    return None


def _is_a(value: object, hint: object) -> bool:
    """isinstance for the annotations the configs use (unions, tuple[X, ...], int, float, str;
    an int counts as a float, a bool as neither)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_is_a(value, a) for a in args)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_is_a(v, args[0]) for v in value)
        return len(value) == len(args) and all(
            _is_a(v, a) for v, a in zip(value, args, strict=True))
    if isinstance(value, bool):
        return hint is bool
    if hint is float:
        return isinstance(value, int | float)
    return isinstance(value, hint)


def discard_unstarted(run_dir: Path, existed: bool) -> None:
    """After a failed start, leave `run_dir` as it was: a run that failed before its fold
    layout was written (no folds.json, so nothing to resume) is removed, or emptied when the
    directory existed (empty) before. Never while another process holds the directory."""
    from rl_trader.rundir import RunLock

    if not run_dir.is_dir() or (run_dir / "folds.json").exists():
        return
    try:
        with RunLock(run_dir):
            for child in run_dir.iterdir() if existed else [run_dir]:
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                elif child.name != ".lock":
                    child.unlink()
            if existed:
                (run_dir / ".lock").unlink()
    except (InputError, OSError):
        pass  # best effort: the error being reported matters more


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        from rl_trader.devices import initialize_distributed

        initialize_distributed(args.coordinator, args.num_processes, args.process_id,
                               auto=args.distributed)
        enable_compilation_cache()
        cfg = resume_config(parser, args) if args.resume else config_from_args(args)
        import jax

        from rl_trader.devices import describe_device
        from rl_trader.experiment import prepare, run_experiment
        from rl_trader.report import print_table

        jax.config.update("jax_debug_nans", bool(args.debug_nans))
        prep = prepare(cfg)
        run_dir = Path(args.run_dir or f"runs/{time.strftime('%Y%m%d-%H%M%S')}-{args.preset}")
        print(f"rl_trader: {len(prep.bars)} bars from {prep.bars.source}; "
              f"{len(prep.folds)} folds; training on {describe_device()}; run dir {run_dir}",
              flush=True)
        t0 = time.time()
        # a run directory this run creates (or fills) is cleaned up if the run fails to start
        existed = run_dir.exists()
        fresh = jax.process_index() == 0 and not args.resume and (
            not existed or run_dir.is_dir() and not any(run_dir.iterdir()))
        try:
            summary = run_experiment(prep, run_dir, overwrite=args.overwrite, resume=args.resume,
                                     log=lambda line: print(line, flush=True),
                                     devices=args.devices)
        except BaseException:
            if fresh:
                discard_unstarted(run_dir, existed)
            raise
        if "folds" in summary:  # process 0 of a multi-process run, or a single process
            print_table(summary)
            print(f"done in {time.time() - t0:.1f}s; summary: {run_dir / 'summary.json'}")
        for line in summary["stopped"]:
            print(f"error: {line}", file=sys.stderr)
        return 1 if summary["stopped"] else 0
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # environment faults: permissions, disk full, ...
        where = f" '{err.filename}'" if err.filename else ""
        print(f"error: {err.strerror or err}{where} (environment fault; earlier runs are "
              "untouched; an interrupted run continues with --resume)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
