"""Study 37: evidence before fold k's validation block that its market is predictable, from
finished runs.

    python -m experiments.train_evidence RUN_DIR [RUN_DIR ...]

Per run, its data and folds are prepared again from its saved config (`run.prepare`, the
same bars, features and layout); per scored fold k, the gbm baseline's forecast cross-fitted
on the train segment (`gbm.cross_fitted_forecast`: no train bar's ŷ from trees fit on it,
the fold's leaves and iterations, read from the tree cache where the run fitted them) is
traded over the train bars as the baseline trades its own (`ridge.forecast_position`,
clip(ŷ/s, −1, 1), the env's fills and costs), and `vol_target` over the same bars. The t of
its Sharpe edge over `vol_target` (`metrics.edge_t`) is the fold's train evidence. Writes
RUN_DIR/train_evidence.json (`{"folds": [{"fold", "train_bars", "gbm_train_edge_t",
"gbm_train_sharpe", "vol_target_train_sharpe"}]}`) and prints one line per fold;
`experiments/rival_study.py --train` reads it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from rl_trader.baselines.gbm import cross_fitted_forecast
from rl_trader.baselines.ridge import Forecast, forecast_decide
from rl_trader.baselines.rules import vol_target_decide
from rl_trader.config import RunConfig, config_from_dict
from rl_trader.data.fold_data import FoldData
from rl_trader.errors import InputError
from rl_trader.evaluation.metrics import edge_t, sharpe_of
from rl_trader.evaluation.record import RunSummary
from rl_trader.evaluation.rollout import jit_per_program, rollout
from rl_trader.report.writer import load_summary
from rl_trader.run.prepare import gbm_fit, prepare
from rl_trader.runtime.rundir import write_json

EVIDENCE_FILE = "train_evidence.json"


@jit_per_program(2, 3)
def train_returns(forecast: Forecast, data: FoldData, length: int, cfg: RunConfig
                  ) -> tuple[jax.Array, jax.Array]:
    """Per-bar returns [length] over the fold's train segment, from flat at its first
    decision: `forecast` traded by `forecast_position`, and `vol_target`."""
    start, key = data.train[0], jax.random.PRNGKey(0)
    return (rollout(forecast_decide(forecast, data, cfg), data, start, length, cfg,
                    key).returns,
            rollout(vol_target_decide(data, cfg), data, start, length, cfg, key).returns)


def fold_evidence(run_dir: Path, summary: RunSummary) -> list[dict]:
    """Each scored fold's train evidence (module docstring), in fold order."""
    cfg = config_from_dict(summary.config)
    if cfg.data.path is not None and "," in cfg.data.path:
        raise InputError(f"{run_dir}: a pooled run (--data a,b,…): its train segments are "
                         "several instruments', which this study does not trade")
    prep = prepare(cfg)
    if prep.data_sha256 != summary.data_sha256:
        raise InputError(f"{run_dir}: its data is not the run's (SHA-256 differs)")
    out = []
    for f in summary.folds:
        if not f.scored:
            continue
        k = f.fold
        data = prep.fold_data(k)
        fit = gbm_fit(prep, k)
        y_hat = cross_fitted_forecast(data, fit, prep.folds[k].gap)
        n = int(data.train[1] - data.train[0])
        g, v = (np.asarray(r, np.float64) for r in train_returns(
            Forecast(y_hat=jnp.asarray(y_hat, jnp.float32),
                     scale=fit.forecast.scale), data, n, cfg))
        ppy = prep.periods_per_year
        t = edge_t(g, v)
        out.append({"fold": k, "train_bars": n,
                    "gbm_train_edge_t": t if np.isfinite(t) else None,
                    "gbm_train_sharpe": sharpe_of(g, ppy),
                    "vol_target_train_sharpe": sharpe_of(v, ppy)})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.train_evidence",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    args = p.parse_args(argv)
    try:
        for run_dir in args.run_dirs:
            summary = load_summary(run_dir)
            folds = fold_evidence(run_dir, summary)
            write_json(run_dir / EVIDENCE_FILE, {"folds": folds})
            for f in folds:
                t = f["gbm_train_edge_t"]
                print(f"{run_dir.name:<28} fold {f['fold']}  {f['train_bars']:5d} bars  t "
                      f"{'n/a' if t is None else f'{t:+.2f}'}  gbm {f['gbm_train_sharpe']:+.2f}"
                      f"  vol_target {f['vol_target_train_sharpe']:+.2f}")
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
