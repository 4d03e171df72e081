"""The gradient-boosted-trees baseline: fit, choice on validation, no look at the test block."""

import dataclasses
import json
import pickle

import jax
import numpy as np
import pytest

from rl_trader import env
from rl_trader.baselines.gbm import (
    GBM_LEAVES,
    TREES_FILE,
    GbmFit,
    GbmFits,
    TreeForecastChoice,
    candidate_iterations,
    choose_tree_forecast,
    cross_fit_blocks,
    cross_fitted_forecast,
    fit_gbm,
    forecast_trust,
    trust_trees,
    with_tree_forecast,
)
from rl_trader.baselines.ridge import fit_ridge
from rl_trader.baselines.suite import baseline_rollouts
from rl_trader.cli.train import main
from rl_trader.config import GBM_ITERATIONS, RunConfig
from rl_trader.data.fold_data import observe
from rl_trader.data.synthetic import from_spec
from rl_trader.errors import InputError
from rl_trader.run.inference import load_policy, market_data, predict
from rl_trader.run.prepare import TREE_FORECAST_NAME, prepare
from rl_trader.run.run_state import forecast_ic
from tests.helpers import TINY_ARGS, tiny_config


def _planted():
    """Fold 0 of the tiny run with its target replaced by a V shape in the first market
    variable, y = |x₀| less its least-squares fit on every variable (+ a little noise): no
    linear function of the features predicts it (some of them measure volatility, which
    |x₀| is correlated with), a tree does."""
    cfg = tiny_config()
    prep = prepare(cfg)
    f, data = prep.folds[0], prep.fold_data(0)
    x = np.asarray(data.features, np.float64)
    design = np.column_stack([np.ones(len(x)), x])
    v = np.abs(x[:, 0])
    v = v - design @ np.linalg.lstsq(design, v, rcond=None)[0]
    y = v / v.std() + 0.1 * np.random.default_rng(0).normal(size=v.shape)
    data = data.replace(aux_target=jax.numpy.asarray(y, np.float32))
    return cfg, f, data


def test_gbm_finds_a_non_monotone_signal_ridge_cannot_and_chooses_on_validation():
    cfg, f, data = _planted()
    val_len = int(f.val[1] - f.val[0])
    fit = fit_gbm(data, val_len, cfg)
    counts = candidate_iterations(cfg)  # the smoke preset's: up to 100 trees
    assert counts == (25, 50, 100) and candidate_iterations(RunConfig()) == GBM_ITERATIONS
    assert fit.val_sharpe.shape == (len(GBM_LEAVES), len(counts))
    assert np.isfinite(fit.val_sharpe).all()
    best = np.unravel_index(np.argmax(fit.val_sharpe), fit.val_sharpe.shape)  # first on ties
    assert (fit.leaves, fit.iterations) == (GBM_LEAVES[best[0]], counts[best[1]])
    # out of sample, on the test block's bars: the trees see the V, ridge does not
    bars = np.arange(int(data.test[0]), int(data.test[1]))
    y = np.asarray(data.aux_target)[bars]
    assert forecast_ic(np.asarray(fit.forecast.y_hat)[bars], y) > 0.5
    ridge = fit_ridge(data, val_len, cfg)
    ridge_hat = np.asarray(data.features)[bars] @ np.asarray(ridge.beta) + float(ridge.intercept)
    assert abs(forecast_ic(ridge_hat, y)) < 0.2
    # traded through the env as a baseline: its positions follow clip(ŷ / s, −1, 1) of the
    # decision bar, and it reports ŷ as its forecast
    test_len = int(f.test[1] - f.test[0])
    runs = baseline_rollouts(data, data.test[0], test_len, cfg,
                             jax.random.split(jax.random.key(0), 2), val_len, gbm=fit.forecast)
    decided = np.arange(int(data.test[0]) - 1, int(data.test[0]) - 1 + test_len)
    np.testing.assert_allclose(runs["gbm"].forecast, np.asarray(fit.forecast.y_hat)[decided],
                               rtol=1e-6)
    pos = np.asarray(runs["gbm"].position)
    assert np.abs(pos).max() <= 1.0 and len(np.unique(np.round(pos, 4))) > 2  # sized, not signs


def test_gbm_reads_only_train_and_validation_and_is_deterministic():
    """The test block moved, the fit made on the background thread (as an accelerator run
    makes it while training) or when asked for: the same choice and forecasts."""
    cfg, f, data = _planted()
    val_len = int(f.val[1] - f.val[0])
    a = slice(int(f.test[0]), None)
    rng = np.random.default_rng(1)
    moved = data.replace(
        prices=env.Prices(open=data.prices.open.at[a].multiply(1.3),
                          close=data.prices.close.at[a].multiply(0.7)),
        aux_target=data.aux_target.at[a].set(rng.normal(size=data.aux_target[a].shape)))
    background = GbmFits([moved, data], val_len, cfg, background=True)
    fit, later = fit_gbm(data, val_len, cfg), GbmFits([moved], val_len, cfg, background=False)
    for other in (background.result(0), background.result(1), later.result(0)):
        assert (other.leaves, other.iterations) == (fit.leaves, fit.iterations)
        np.testing.assert_array_equal(other.val_sharpe, fit.val_sharpe)
        np.testing.assert_array_equal(np.asarray(other.forecast.y_hat),
                                      np.asarray(fit.forecast.y_hat))  # features unchanged
        assert float(other.forecast.scale) == float(fit.forecast.scale)



def test_the_cross_fitted_forecast_never_comes_from_trees_fit_on_its_bar():
    """A train block's values do not move when the targets of the block and its purge gaps
    change (its trees never fit those rows), while the other blocks' do; outside the train
    segment the values are the baseline's own; the column is normalised on train and reaches
    the network as the last market variable."""
    cfg, f, data = _planted()
    val_len = int(f.val[1] - f.val[0])
    fit = fit_gbm(data, val_len, cfg)
    y_hat = cross_fitted_forecast(data, fit, f.gap)
    a, b = f.train
    outside = np.r_[0:a, b:len(y_hat)]
    np.testing.assert_allclose(y_hat[outside], np.asarray(fit.forecast.y_hat)[outside],
                               rtol=1e-5, atol=1e-7)
    y = np.asarray(data.aux_target)
    assert forecast_ic(y_hat[a:b - 1], y[a:b - 1]) > 0.3  # out of fold, still the V
    blocks = cross_fit_blocks(data)
    assert blocks[0][0] == a and blocks[-1][1] == b and len(blocks) == 5
    lo, hi = blocks[2]
    hidden = slice(lo - f.gap, hi + f.gap)
    noise = np.random.default_rng(2).normal(size=hi - lo + 2 * f.gap)
    moved = data.replace(aux_target=data.aux_target.at[hidden].set(noise))
    again = cross_fitted_forecast(moved, fit, f.gap)
    np.testing.assert_array_equal(again[lo:hi], y_hat[lo:hi])
    assert not np.allclose(again[a:lo], y_hat[a:lo])
    np.testing.assert_array_equal(again[outside], y_hat[outside])  # `fit` is given

    with_trees, _ = with_tree_forecast(data, fit, f.gap, cfg.features.clip,
                                       TreeForecastChoice(True, 0.05, 0.04))
    column = np.asarray(with_trees.tree_forecast)
    assert column.shape == (len(y_hat), 1)
    assert abs(column[a:b].mean()) < 1e-4 and abs(column[a:b].std() - 1) < 1e-3
    obs = observe(with_trees, jax.numpy.int32(b + 5), jax.numpy.zeros(len(env.PORTFOLIO_NAMES)),
                  cfg.features)
    width = data.features.shape[1] + 1
    assert obs.market.shape == (width,) and obs.window.shape == (cfg.features.lookback, width)
    assert float(obs.market[-1]) == float(column[b + 5, 0])


def _fake_fit(val_sharpe) -> GbmFit:
    return GbmFit(forecast=None, leaves=4, iterations=25,
                  val_sharpe=np.asarray(val_sharpe, np.float64), val_returns=np.zeros((0, 0)))


def test_the_validation_mode_uses_the_trees_only_where_they_beat_ridge_on_validation():
    """`choose_tree_forecast`: the column iff the best gbm validation Sharpe beats ridge's
    best (a tie is ridge's, NaN counts as −∞); an unused column is zeros."""
    fit = _fake_fit([[0.01, np.nan], [0.05, 0.02]])
    for ridge, used in (([0.01, np.nan, 0.04], True), ([0.06, 0.0], False), ([0.05], False),
                        ([np.nan, np.nan], True)):
        choice = choose_tree_forecast(fit, np.asarray(ridge))
        assert choice.used is used and choice.gbm_val_sharpe == 0.05
        assert choice.ridge_val_sharpe == np.max(np.nan_to_num(ridge, nan=-np.inf))
        assert ("used" if used else "zero") in choice.describe()
    cfg, f, data = _planted()
    unused = TreeForecastChoice(False, 0.05, 0.06)
    zero, same = with_tree_forecast(data, fit, f.gap, cfg.features.clip, unused)
    column = np.asarray(zero.tree_forecast)
    assert column.shape == (data.features.shape[0], 1) and not column.any() and same == unused


def _with_trees(mode: str):
    cfg = tiny_config()
    return prepare(dataclasses.replace(
        cfg, features=dataclasses.replace(cfg.features, tree_forecast=mode)))


def test_each_folds_data_carries_the_column_its_validation_choice_names():
    """The wiring of `--tree-forecast validation` (`Prepared.fold_data`): each fold's choice
    compares that fold's own gbm and ridge validation Sharpes, and the fold's arrays hold the
    trees' cross-fitted column (`with_tree_forecast` of the fold's fit) where it is used and
    zeros where it is not; the tiny market has one fold of each."""
    plain, chosen = _with_trees("off"), _with_trees("validation")
    assert chosen.market_names == plain.market_names + (TREE_FORECAST_NAME,)
    used = []
    for k in range(len(chosen.folds)):
        data = chosen.fold_data(k)
        choice = chosen.tree_forecast_choices[k]
        base = plain.fold_data(k)
        ridge = np.asarray(fit_ridge(base, plain.val_steps, plain.cfg).val_sharpe)
        assert choice.gbm_val_sharpe == np.max(chosen.gbm_fits[k].val_sharpe)
        assert np.isclose(choice.ridge_val_sharpe, np.nanmax(ridge))
        assert choice.used == (choice.gbm_val_sharpe > choice.ridge_val_sharpe)
        np.testing.assert_array_equal(np.asarray(data.features), np.asarray(base.features))
        used_anyway = TreeForecastChoice(True, choice.gbm_val_sharpe, choice.ridge_val_sharpe)
        always = np.asarray(with_tree_forecast(base, chosen.gbm_fits[k], chosen.folds[k].gap,
                                               chosen.cfg.features.clip,
                                               used_anyway)[0].tree_forecast)
        column = np.asarray(data.tree_forecast)
        assert always.std() > 0.5
        if choice.used:
            np.testing.assert_array_equal(column, always)
        else:
            assert column.shape == always.shape and not column.any()
        used.append(choice.used)
    assert sorted(used) == [False, True]


def test_a_run_with_the_tree_forecast_weighs_it_and_acts_on_new_bars(tmp_path, capsys):
    """`--tree-forecast validation` end to end: one more market variable in the VSN's
    weights, each fold's choice logged and in the summary, the gbm baseline scored as without
    it; acting on new bars with a saved fold (`inference`) rebuilds the column the run had on
    its validation and test bars (the saved trees, where used; zeros where not), and a run
    whose trees are gone is refused in one line."""
    run = tmp_path / "run"
    assert main([*TINY_ARGS, "--epochs", "1", "--no-report", "--data", "synthetic:ar1:1200:1",
                 "--tree-forecast", "validation", "--run-dir", str(run)]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["feature_names"][-1] == TREE_FORECAST_NAME
    out = capsys.readouterr().out
    for fold in summary["folds"]:
        weights = fold["market_vsn_weights"]
        assert list(weights)[-1] == TREE_FORECAST_NAME and len(weights) == 22
        assert np.isclose(sum(weights.values()), 1.0, atol=1e-4)
        assert np.isfinite(fold["baseline_test_sharpes"]["gbm"])
        choice = TreeForecastChoice(**fold["tree_forecast"])
        assert choice.used == (choice.gbm_val_sharpe > choice.ridge_val_sharpe)
        assert f"fold {fold['fold']}: the tree forecast column: {choice.describe()}" in out
    prep, bars = _with_trees("validation"), from_spec("synthetic:ar1:1200:1").bars
    for k, fold in enumerate(summary["folds"]):
        policy = load_policy(run, fold=fold["fold"])
        assert (policy.trees is not None) == fold["tree_forecast"]["used"]
        mine = np.asarray(market_data(policy, bars).tree_forecast)[:len(bars)]
        theirs = np.asarray(prep.fold_data(k).tree_forecast)[:len(bars)]
        after_train = slice(prep.folds[k].train[1], len(bars))
        np.testing.assert_allclose(mine[after_train], theirs[after_train], atol=1e-5)
        assert list(predict(policy, bars)["market_vsn_weights"])[-1] == TREE_FORECAST_NAME
    used = next(f["fold"] for f in summary["folds"] if f["tree_forecast"]["used"])
    path = run / f"fold_{used}" / TREES_FILE
    saved = pickle.loads(path.read_bytes())  # the regressor stored pickled inside
    x = np.asarray(prep.fold_data(0).features, np.float64)
    y_hat = load_policy(run, fold=used).trees[0].predict(x)
    path.write_bytes(pickle.dumps({**saved, "model": pickle.loads(saved["model"])}))
    np.testing.assert_array_equal(load_policy(run, fold=used).trees[0].predict(x), y_hat)  # older
    path.write_bytes(pickle.dumps({**saved, "sklearn": "0.1"}))
    with pytest.raises(InputError, match="trees saved by scikit-learn 0.1"):
        load_policy(run, fold=used)
    path.unlink()
    with pytest.raises(InputError, match=f"{TREES_FILE}: not found"):
        load_policy(run, fold=used)


def test_the_forecasts_trust_is_its_cross_fitted_t_shrunk_by_james_stein():
    """`forecast_trust`: on the planted V the cross-fitted trees' within-block t is large and
    w near 1; on a target of pure noise (the same features) the in-sample forecast still
    correlates with it (trees fit noise), but the cross-fitted one does not: t stays small and
    the trust is w = max(0, 1 − 1/t²), 0 for t ≤ 1. The trees are the grid's middle
    (`trust_trees`), never the baseline's validation choice: the trust reads no validation
    bar (a validation block of noise changes nothing)."""
    cfg, f, data = _planted()
    assert trust_trees(cfg) == (8, 50)  # the smoke preset's grid: 4/8/16 leaves, 25/50/100
    signal = forecast_trust(data, f.gap, cfg)
    assert signal.t > 5 and signal.w == pytest.approx(1 - 1 / signal.t**2) and signal.w > 0.95
    a, b = (int(v) for v in np.asarray(data.train))
    assert signal.bars == b - a - 1
    v0, v1 = (int(v) for v in np.asarray(data.val))
    spoiled = np.asarray(data.aux_target).copy()
    spoiled[v0:] = np.random.default_rng(5).normal(size=len(spoiled) - v0)
    spoiled = data.replace(aux_target=jax.numpy.asarray(spoiled, np.float32))
    assert forecast_trust(spoiled, f.gap, cfg) == signal
    # a stream the market's own draws (seed 1) do not share: those would be its returns
    noise = np.random.default_rng(2**31 - 1).normal(size=data.aux_target.shape).astype(np.float32)
    data = data.replace(aux_target=jax.numpy.asarray(noise))
    fit = fit_gbm(data, int(v1 - v0), cfg)
    trust = forecast_trust(data, f.gap, cfg)
    in_sample = np.corrcoef(np.asarray(fit.forecast.y_hat)[a:b - 1],
                            noise[a:b - 1])[0, 1] * np.sqrt(trust.bars)
    assert in_sample > 3 and abs(trust.t) < 2
    assert trust.w == (max(0.0, 1 - 1 / trust.t**2) if trust.t > 1 else 0.0)
