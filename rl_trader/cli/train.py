"""The main job: walk-forward training and out-of-sample scoring.

    rl-trader train [--data PATH] [--folds K] [--epochs E] [--seed S]
                                     [--preset smoke|default] [--run-dir DIR] [overrides]

Exit codes: 0 done, 2 bad input or options, 1 anything else.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from rl_trader.cli.options import config_from_args, load_config_file, run_parser
from rl_trader.config import RunConfig
from rl_trader.errors import InputError
from rl_trader.runtime.compile_cache import enable_compilation_cache

PROG = "rl-trader train"  # in help and errors; `python -m experiments.multi_fold` passes its own


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    """Every config option (generated from the config dataclasses) plus the run's own; `prog`
    is the command shown in help and errors."""
    p = run_parser(
        prog,
        "Train the branching VSN/GRN deep-Q agent over walk-forward folds; select each fold's "
        "best epoch on validation Sharpe and score it once on test.")
    run = p.add_argument_group("run")
    run.add_argument("--run-dir", metavar="DIR", default=None,
                     help="output directory (default runs/<time>-<preset>); never reused silently")
    run.add_argument("--overwrite", action="store_true",
                     help="replace an existing, non-empty --run-dir")
    run.add_argument("--resume", action="store_true",
                     help="continue the interrupted run in --run-dir from its last completed "
                          "epoch, with its saved configuration (give no other options)")
    run.add_argument("--devices", type=int, default=None, metavar="N",
                     help="spread the population over the first N local devices (default: all)")
    run.add_argument("--coordinator", metavar="HOST:PORT", default=None,
                     help="multi-process run: address of process 0's coordinator (with "
                          "--num-processes and --process-id); every process runs the same "
                          "command")
    run.add_argument("--num-processes", type=int, default=None, metavar="N")
    run.add_argument("--process-id", type=int, default=None, metavar="I")
    run.add_argument("--distributed", action="store_true",
                     help="multi-process run configured by the cluster scheduler or JAX's "
                          "environment variables (jax.distributed.initialize with no arguments)")
    run.add_argument("--no-report", action="store_true",
                     help="write no report.html (a run's: `make report RUN_DIR=DIR` writes it "
                          "later; a sweep writes none)")
    run.add_argument("--debug-nans", action="store_true",
                     help="turn on JAX's NaN checking (slow; stops at the first NaN produced)")
    return p



RESUME_KEEPS = {"run_dir", "resume", "debug_nans", "no_report", "devices", "coordinator",
                "num_processes", "process_id", "distributed"}


def resume_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> RunConfig:
    """The saved configuration of the run to resume; refuses any other option given."""
    defaults = vars(parser.parse_args([]))
    given = sorted(k for k, v in vars(args).items() if k not in RESUME_KEEPS and v != defaults[k])
    if given:
        names = ", ".join(_flag_name(parser, k) for k in given)
        raise InputError(f"option --resume continues with the saved configuration: do not pass "
                         f"{names}")
    if not args.run_dir:
        raise InputError("option --resume needs --run-dir (the run to continue)")
    saved = Path(args.run_dir) / "config.json"
    if not saved.is_file():
        raise InputError(f"option --resume: '{args.run_dir}' holds no run (no config.json)")
    if (Path(args.run_dir) / "summary.json").exists():
        raise InputError(f"option --resume: the run in '{args.run_dir}' is already complete")
    return load_config_file(saved, "--resume")


def _flag_name(parser: argparse.ArgumentParser, dest: str) -> str:
    """The command-line flag of an argparse destination (e.g. 'agent.batch_size' → --batch)."""
    return next(a.option_strings[0] for a in parser._actions if a.dest == dest)


def discard_unstarted(run_dir: Path, existed: bool) -> None:
    """After a failed start, leave `run_dir` as it was: a run that failed before its fold
    layout was written (no folds.json, so nothing to resume) is removed, or emptied when the
    directory existed (empty) before. Never while another process holds the directory."""
    from rl_trader.runtime.rundir import RunLock

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


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    try:
        from rl_trader.runtime.devices import initialize_distributed

        initialize_distributed(args.coordinator, args.num_processes, args.process_id,
                               auto=args.distributed)
        enable_compilation_cache()
        cfg = resume_config(parser, args) if args.resume else config_from_args(args)
        import jax

        from rl_trader.report.writer import print_table
        from rl_trader.run.experiment import run_experiment
        from rl_trader.run.prepare import prepare
        from rl_trader.runtime.devices import describe_device

        jax.config.update("jax_debug_nans", bool(args.debug_nans))
        prep = prepare(cfg, fit_trees=False)  # the run fits the trees (a timed stage)
        name = "config" if args.config else args.preset or "default"
        run_dir = Path(args.run_dir or f"runs/{time.strftime('%Y%m%d-%H%M%S')}-{name}")
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
                                     devices=args.devices, write_html=not args.no_report)
        except BaseException:
            if fresh:
                discard_unstarted(run_dir, existed)
            raise
        if jax.process_index() == 0:  # the process that scored and wrote the summary
            print_table(summary)
            print(f"done in {time.time() - t0:.1f}s; summary: {run_dir / 'summary.json'}")
        for line in summary.stopped:
            print(f"error: {line}", file=sys.stderr)
        return 1 if summary.stopped else 0
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
