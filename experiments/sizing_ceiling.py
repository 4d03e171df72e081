"""What sizing by the forecast is worth on the planted markets, from the true forecast.

    python -m experiments.sizing_ceiling [--draws 20] [--bars 5000] [--out FILE]

For each market and data seed 0 … draws − 1 (tuning seeds, < 1000), positions are set at the
close of bar t from the market's true forecast μ_t = E[r_{t+1} | bars ≤ t] (`signal`) and
held over bar t + 1. Rules (p_t, then rounded to the nearest of the default magnitudes
{0.25, 0.5, 0.75, 1} or to 0 below 0.125, except `sign`):

- `sign`: sign(μ_t), the gate's oracle on the AR(1) markets;
- `prop`: clip(μ_t / s, −1, 1), s = the root mean square of μ: the ridge baseline's rule;
- `mv λ`: clip(μ_t / (λ σ_t²), −1, 1), μ and σ in percent per bar: the per-step optimum of
  the mean-variance reward R − (λ/2)·R² (σ_t the true σ of bar t + 1: on vol_regime a
  look-ahead, so an upper bound).

Per-bar P&L p_t·r_{t+1} − cost(p_t − p_{t−1}), the cost from `env.trade_cost` at the default
commission + slippage (2 bps of traded notional; the env's exact cost model also marks the
position to market between bars, which this ceiling ignores). Prints and writes the
annualised Sharpe (√252), mean over the draws, of each rule: how far an agent that is as good
as the sign oracle stays below ridge, and which λ makes the mean-variance optimum size like
ridge.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from rl_trader import env as tenv
from rl_trader.config import EnvConfig
from rl_trader.data.synthetic import MARKETS, generate
from rl_trader.evaluation.metrics import sharpe_of

MARKET_NAMES = ("ar1_weak", "ar1", "ar1_strong", "vol_regime")
LAMBDAS = (0.1, 0.3, 1.0)
PPY = 252.0


def rounded(p: np.ndarray, grid: tuple[float, ...]) -> np.ndarray:
    """p [T] in [−1, 1] → the sign times the nearest magnitude of `grid`, 0 below grid[0]/2."""
    g = np.asarray(grid)
    a = np.abs(p)
    q = g[np.argmin(np.abs(a[:, None] - g[None]), axis=1)]
    return np.sign(p) * np.where(a < g[0] / 2, 0.0, q)


def net_returns(p: np.ndarray, r: np.ndarray, env: EnvConfig) -> np.ndarray:
    """[T − 1]: p_t · r_{t+1} − `env.trade_cost`(p_t − p_{t−1}) (p_{−1} = 0; the cost of
    trading that fraction of equity), r the simple returns."""
    traded = np.diff(np.concatenate([[0.0], p[:-1]]))
    return p[:-1] * r[1:] - np.asarray(tenv.trade_cost(traded, env), np.float64)


def ceiling(name: str, seed: int, bars: int, env: EnvConfig) -> dict[str, float]:
    """The Sharpe of every rule on one draw of `name`."""
    m = generate(name, bars, seed)
    r = np.concatenate([[0.0], np.diff(m.bars.close) / m.bars.close[:-1]])
    spec = MARKETS[name]
    sigma = np.where(m.hidden_state == 0, spec.sigma, spec.sigma_turbulent or spec.sigma)
    mu_pct, var_pct = 100 * m.signal, (100 * sigma) ** 2
    s = np.sqrt(np.mean(m.signal**2))
    rules = {"sign": np.sign(m.signal),
             "prop": rounded(np.clip(m.signal / s, -1, 1), env.magnitudes)}
    for lam in LAMBDAS:
        rules[f"mv {lam:g}"] = rounded(np.clip(mu_pct / (lam * var_pct), -1, 1), env.magnitudes)
    return {k: sharpe_of(net_returns(p, r, env), PPY) for k, p in rules.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.sizing_ceiling",
                                description=__doc__.split("\n")[0])
    p.add_argument("--draws", type=int, default=20, help="data seeds 0 … N − 1 (default 20)")
    p.add_argument("--bars", type=int, default=5000, help="bars per draw (default 5000)")
    p.add_argument("--out", default=None, help="write the means as JSON here")
    args = p.parse_args(argv)
    if not 1 <= args.draws < 1000 or args.bars < 100:
        p.error("--draws must be in [1, 999] (tuning seeds) and --bars >= 100")
    env = EnvConfig()
    table = {}
    for name in MARKET_NAMES:
        rows = [ceiling(name, seed, args.bars, env) for seed in range(args.draws)]
        table[name] = {k: float(np.mean([row[k] for row in rows])) for k in rows[0]}
        print(f"{name:11s} " + "  ".join(f"{k} {v:+.2f}" for k, v in table[name].items()))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"draws": args.draws, "bars": args.bars, "sharpe": table}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
