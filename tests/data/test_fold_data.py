"""A fold's device arrays: padding to the shape bucket changes no result."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from rl_trader import env
from rl_trader.agent.heads import make_head
from rl_trader.agent.policy import greedy_decide
from rl_trader.baselines.ridge import fit_ridge
from rl_trader.baselines.suite import baseline_rollouts
from rl_trader.data.buckets import trim
from rl_trader.data.fold_data import (
    FoldData,
    Obs,
    bar_context,
    market_width,
    observe,
    prior_position,
)
from rl_trader.evaluation.rollout import rollout
from rl_trader.run.prepare import prepare
from tests.helpers import init_params, tiny_config


def _unpadded(data: FoldData, n: int) -> FoldData:
    """The same fold cut back to its n real bars (what it was before shape buckets)."""
    cut = lambda x: x[:n]  # noqa: E731
    return dataclasses.replace(data, features=cut(data.features), aux_target=cut(data.aux_target),
                               return_scale=cut(data.return_scale), drift=cut(data.drift),
                               vol_ratio=cut(data.vol_ratio),
                               tree_forecast=cut(data.tree_forecast),
                               prices=env.Prices(open=cut(data.prices.open),
                                                 close=cut(data.prices.close)))


def test_padding_changes_no_rollout_up_to_the_last_bar():
    cfg = tiny_config()
    prep = prepare(cfg)
    n, k = len(prep.bars), len(prep.folds) - 1
    padded = prep.fold_data(k)
    assert padded.features.shape[0] == 1280 > n == 1200  # bucket(1,200)
    plain = _unpadded(padded, n)
    start, length = int(prep.folds[k].test[0]), prep.test_len
    assert start + length == n  # the last test block ends at the last bar: the edge case
    net = make_head(cfg).network
    f = market_width(padded)
    dummy = Obs(market=np.zeros(f, np.float32), window=np.zeros((cfg.features.lookback, f),
                                                                  np.float32),
                portfolio=np.zeros(len(env.PORTFOLIO_NAMES), np.float32))
    params = jax.tree.map(lambda x: x[None], init_params(net, dummy))
    key = jax.random.PRNGKey(0)
    a = rollout(greedy_decide(params, padded, cfg), padded, start, length, cfg, key)
    b = rollout(greedy_decide(params, plain, cfg), plain, start, length, cfg, key)
    for name in ("returns", "position", "cost", "q"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    # more steps (the bucket's), cut back: the same as exactly `length` steps
    steps = prep.test_steps
    assert steps > length
    c = trim(rollout(greedy_decide(params, padded, cfg), padded, start, steps, cfg, key), length,
             axis=0)
    for name in ("returns", "position", "cost", "q", "market_weights"):
        np.testing.assert_array_equal(getattr(c, name), getattr(a, name), err_msg=name)
    keys = jax.random.split(key, 2)
    long = trim(baseline_rollouts(padded, start, steps, cfg, keys, prep.val_steps), length,
                axis=0)
    base_a = baseline_rollouts(padded, start, length, cfg, keys, prep.val_len)
    base_b = baseline_rollouts(plain, start, length, cfg, keys, prep.val_len)
    for name in base_a:  # ridge's sums run over more (zero-weight) rows: float32 rounding
        tol = 1e-6 if name == "ridge" else 0.0
        np.testing.assert_allclose(base_a[name].returns, base_b[name].returns, rtol=0, atol=tol,
                                   err_msg=name)
        want = np.asarray(base_a[name].returns)
        got = long[name].returns[:, :length] if name == "random" else long[name].returns
        np.testing.assert_allclose(got, want, rtol=0, atol=tol, err_msg=name)
    ridge_a, ridge_b = fit_ridge(padded, prep.val_steps, cfg), fit_ridge(plain, prep.val_len, cfg)
    # two nearly collinear features (0 and 12) trade 2e-4 of their weights in float32
    np.testing.assert_allclose(ridge_a.beta, ridge_b.beta, rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(ridge_a.val_sharpe, ridge_b.val_sharpe, rtol=1e-3, atol=1e-6)
    assert ridge_a.alpha == ridge_b.alpha  # the same penalty chosen


def test_observe_passes_the_portfolio_features_as_they_are():
    """Every portfolio feature reaches the network unchanged; the window ends at the market
    row."""
    cfg = tiny_config()
    data = prepare(cfg).fold_data(0)
    port = np.arange(1.0, 1.0 + len(env.PORTFOLIO_NAMES), dtype=np.float32)
    bar = int(data.train[0]) + cfg.features.lookback
    full = observe(data, bar, port, cfg.features)
    np.testing.assert_array_equal(np.asarray(full.portfolio), port)
    np.testing.assert_array_equal(np.asarray(full.window[-1]), np.asarray(full.market))


def test_the_prior_is_vol_targets_position_scaled_by_k():
    """`prior_position`: min(1, k·σ*/σ̂) under --prior vol_target (k = 1: the `vol_target`
    baseline's own position), 0 under flat; the context's π_{t−1} is the bar before's."""
    prep = prepare(tiny_config())
    data = prep.fold_data(0)
    bars = jnp.arange(30, 60)
    ratio = np.asarray(data.vol_ratio[bars])
    for k in (1.0, 0.5):
        cfg = dataclasses.replace(prep.cfg.env, prior="vol_target", prior_scale=k)
        np.testing.assert_allclose(prior_position(data, bars, cfg), np.minimum(1.0, k * ratio))
        ctx = bar_context(data, bars, cfg)
        np.testing.assert_allclose(ctx.prior_tm1[1:], ctx.prior[:-1])
    assert not np.any(prior_position(data, bars, dataclasses.replace(prep.cfg.env,
                                                                     prior="flat")))
    assert 0 < ratio.min() < 1 < ratio.max()
