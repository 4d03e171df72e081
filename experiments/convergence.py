"""Release gate: the agent must reach FLOOR × the oracle's test Sharpe on a planted-signal market.

    python -m experiments.convergence [--data synthetic:ar1] [--floor 0.8] [main-job options]

Runs the main job (default preset, 3 folds unless given) on the synthetic market, prints agent /
oracle test Sharpe per fold and the geometric mean of the agent's fold Sharpes, and exits 1 when
any fold is below the floor (2 for bad options, 0 when every fold passes).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from experiments.multi_fold import build_parser, config_from_args, enable_compilation_cache
from rl_trader.errors import InputError


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.prog = "python -m experiments.convergence"
    parser.set_defaults(data="synthetic:ar1")
    parser.add_argument("--floor", type=float, default=0.8,
                        help="minimum agent / oracle test Sharpe in every fold (default 0.8)")
    args = parser.parse_args(argv)
    try:
        if not 0 <= args.floor <= 10:
            raise InputError(f"option --floor={args.floor} is out of range: must be in [0, 10]")
        enable_compilation_cache()
        cfg = config_from_args(args)
        if not (cfg.data.path or "").startswith("synthetic:"):
            raise InputError(f"option --data={cfg.data.path!r}: the gate needs a planted-signal "
                             "market, synthetic:NAME")
        from rl_trader.devices import describe_device
        from rl_trader.experiment import run_experiment
        from rl_trader.prepare import prepare

        prep = prepare(cfg)
        run_dir = Path(args.run_dir or f"runs/{time.strftime('%Y%m%d-%H%M%S')}-convergence")
        print(f"convergence gate on {cfg.data.path}, floor {args.floor}, {describe_device()}",
              flush=True)
        summary = run_experiment(prep, run_dir, overwrite=args.overwrite,
                                 log=lambda line: print(line, flush=True))
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    failed = []
    print("fold  agent   oracle  ratio")
    for f in summary["folds"]:
        ratio = f["test_sharpe"] / f["oracle_test_sharpe"] if f["oracle_test_sharpe"] > 0 else 0.0
        ok = ratio >= args.floor
        failed += [] if ok else [f["fold"]]
        print(f"{f['fold']:>4}  {f['test_sharpe']:+.3f}  {f['oracle_test_sharpe']:+.3f}  "
              f"{ratio:.2f} {'ok' if ok else 'BELOW FLOOR'}")
    geo = summary["geo_mean_test_sharpe"]
    print(f"geometric mean of agent fold Sharpes: {'undefined' if geo is None else f'{geo:.3f}'}"
          f"; stitched agent {summary['stitched_test_sharpe']:+.3f}, oracle "
          f"{summary['stitched_oracle_test_sharpe']:+.3f}")
    if failed:
        print(f"FAIL: folds {failed} below {args.floor} × oracle")
        return 1
    print(f"PASS: every fold ≥ {args.floor} × oracle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
