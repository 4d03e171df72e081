"""Greedy rollouts (seed ensembles, returns independent of the reward) and the baselines."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from rl_trader import env
from rl_trader.agent import model_head
from rl_trader.agent.heads import make_head
from rl_trader.agent.policy import greedy_decide
from rl_trader.baselines.oracle import oracle_rollout
from rl_trader.baselines.ridge import RIDGE_ALPHAS, fit_ridge, ridge_solve
from rl_trader.baselines.rules import VOL_WINDOW, random_decide, trailing_vol, vol_target_positions
from rl_trader.baselines.suite import baseline_rollouts
from rl_trader.config import REWARDS
from rl_trader.data.fold_data import observe
from rl_trader.evaluation.metrics import sharpe
from rl_trader.evaluation.rollout import decision_targets, rollout
from rl_trader.run.prepare import prepare
from rl_trader.run.run_state import forecast_ic
from rl_trader.training.population import stack
from tests.helpers import init_params, tiny_config


def decision_at_validation(cfg):
    """(data, network, env state, portfolio features, observation) of fold 0's first
    validation decision under `cfg`."""
    prep = prepare(cfg)
    data = prep.fold_data(0)
    net = make_head(cfg).network
    start = int(prep.folds[0].val[0])
    state = env.reset(start, start + 10)
    port = env.portfolio_features(state, data.prices)
    return data, net, state, port, observe(data, state.t, port, cfg.features)


def test_ensemble_position_is_the_mean_of_its_members_targets():
    cfg = tiny_config(generic=True)
    data, net, state, port, obs = decision_at_validation(cfg)
    members = [init_params(net, obs, seed=s) for s in (0, 3, 4)]
    key = jax.random.key(0)

    @jax.jit
    def greedy(stacked):
        return greedy_decide(stacked, data, cfg)(key, state, port)

    def decide(params):
        target, aux = greedy(stack(params))
        return (float(target), np.asarray(aux.market_weights), np.asarray(aux.portfolio_weights),
                float(aux.q))

    alone = [decide([p]) for p in members]
    assert len({a[0] for a in alone}) > 1  # the members disagree, so the mean is a test
    target, w_m, w_p, q = decide(members)
    forecasts = [float(jax.jit(net.apply)(p, obs).aux) for p in members]
    _, aux = greedy(stack(members))
    np.testing.assert_allclose(float(aux.forecast), np.mean(forecasts), rtol=1e-5)
    np.testing.assert_allclose(target, np.mean([a[0] for a in alone]), rtol=1e-6)
    np.testing.assert_allclose(w_m, np.mean([a[1] for a in alone], 0), rtol=1e-5)
    np.testing.assert_allclose(w_p, np.mean([a[2] for a in alone], 0), rtol=1e-5)
    np.testing.assert_allclose(q, np.mean([a[3] for a in alone]), rtol=1e-5)
    assert decide([members[0]] * 2)[0] == alone[0][0]  # identical members: one agent's target


def test_greedy_q_is_the_bdq_value_of_the_greedy_action():
    """Q(s, â) = Q_dir(â_dir) when flat, else the mean of the two branches' greedy values."""
    cfg = tiny_config(generic=True)
    data, net, state, port, obs = decision_at_validation(cfg)
    apply = jax.jit(net.apply)
    greedy = jax.jit(lambda p: greedy_decide(p, data, cfg)(jax.random.key(0), state, port))
    for seed in range(4):
        params = init_params(net, obs, seed=seed)
        out = apply(params, obs)
        d, m = int(np.argmax(out.q_direction)), int(np.argmax(out.q_magnitude))
        want = (out.q_direction[d] if d == env.FLAT
                else 0.5 * (out.q_direction[d] + out.q_magnitude[m]))
        _, aux = greedy(stack([params]))
        np.testing.assert_allclose(float(aux.q), float(want), rtol=1e-5, atol=1e-6)


def test_model_head_ensemble_holds_the_best_position_of_its_mean_q():
    """The model head: each member's Q over the K positions is assembled from its forecasts,
    the env's cost of moving from the held position and its continuation; the ensemble holds
    the argmax of the members' mean Q and reports that Q and the mean forecast μ̂."""
    cfg = tiny_config()  # the default head: model
    assert cfg.net.q_head == "model" and cfg.env.reward == "mean_variance"
    kappa = 100.0 * cfg.env.risk_aversion
    data, net, state, port, obs = decision_at_validation(cfg)
    s = float(data.return_scale[state.t])
    members = [init_params(net, obs, seed=k) for k in range(3)]
    fractions = np.asarray(model_head.position_fractions(cfg.env), np.float64)
    cost_rate = (cfg.env.commission_bps + cfg.env.slippage_bps) * 1e-4
    apply = jax.jit(net.apply)
    qs = []
    for p in members:
        out = apply(p, obs)
        mu, m2 = s * float(out.aux), s * s * float(out.second_moment)
        w = np.asarray(model_head.continuation(out), np.float64)
        q = [100.0 * (a * (mu + 0.5 * m2) - 0.5 * kappa * a * a * m2 - cost_rate * abs(a - 0.0))
             + c
             for a, c in zip(fractions, w, strict=True)]
        qs.append(q)
    mean_q = np.mean(qs, 0)
    target, aux = jax.jit(lambda p: greedy_decide(p, data, cfg)(jax.random.key(0), state, port))(
        stack(members))
    assert float(target) == fractions[int(np.argmax(mean_q))]
    np.testing.assert_allclose(float(aux.q), mean_q.max(), rtol=1e-4)
    np.testing.assert_allclose(float(aux.forecast),
                               np.mean([float(apply(p, obs).aux) for p in members]), rtol=1e-5)

def test_evaluation_returns_do_not_depend_on_the_learning_reward():
    cfg = tiny_config()
    prep = prepare(cfg)
    data = prep.fold_data(0)
    start, key = jnp.int32(prep.folds[0].val[0]), jax.random.key(3)
    runs = {}
    for reward in REWARDS:
        c = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, reward=reward))
        runs[reward] = rollout(random_decide(data, c), data, start, 30, c, key)
    base = np.asarray(runs["log"].returns)
    assert np.abs(base).max() > 0  # the random policy trades, so the returns are a test
    for reward in REWARDS:
        np.testing.assert_array_equal(np.asarray(runs[reward].returns), base)


# ---------------------------------------------------------------- ridge and vol-target baselines

def _fold(cfg, k=0):
    prep = prepare(cfg)
    f = prep.folds[k]
    data = prep.fold_data(k)
    return prep, f, data


def test_ridge_closed_form_matches_lstsq():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3))
    y = x @ np.array([0.5, -1.0, 0.2]) + 0.3 + 0.1 * rng.normal(size=40)
    ones = np.ones(40)
    beta, b = ridge_solve(jnp.asarray(x), jnp.asarray(y), jnp.asarray(ones), jnp.float32(0.0))
    want = np.linalg.lstsq(np.column_stack([ones, x]), y, rcond=None)[0]
    np.testing.assert_allclose([float(b), *np.asarray(beta)], want, rtol=1e-4, atol=1e-5)
    # α > 0 on a subset of rows: the augmented least-squares problem on the centred rows
    w = (np.arange(40) % 3 != 0).astype(float)
    alpha = 7.0
    xs, ys = x[w == 1], y[w == 1]
    xc, yc = xs - xs.mean(0), ys - ys.mean()
    want_beta = np.linalg.lstsq(np.vstack([xc, np.sqrt(alpha) * np.eye(3)]),
                                np.concatenate([yc, np.zeros(3)]), rcond=None)[0]
    beta, b = ridge_solve(jnp.asarray(x), jnp.asarray(y), jnp.asarray(w), jnp.float32(alpha))
    np.testing.assert_allclose(np.asarray(beta), want_beta, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(float(b), ys.mean() - xs.mean(0) @ want_beta, rtol=1e-4)


def test_ridge_recovers_a_planted_signal_and_both_stay_within_one_equity():
    cfg = tiny_config()
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data,
                                                            path="synthetic:ar1_strong:1200:1"))
    _, f, data = _fold(cfg)
    val_len, test_len = f.val[1] - f.val[0], f.test[1] - f.test[0]
    fit = fit_ridge(data, val_len, cfg)
    assert float(fit.val_sharpe.max()) > 0
    runs = baseline_rollouts(data, data.test[0], test_len, cfg, jax.random.split(
        jax.random.key(0), 2), val_len)
    assert float(sharpe(runs["ridge"].returns, 252.0)) > 1.0
    # ridge reports its forecast ŷ_t = x_tᵀβ + b of each decision bar; it predicts the target
    bars = np.arange(int(data.test[0]) - 1, int(data.test[0]) - 1 + test_len)
    np.testing.assert_allclose(runs["ridge"].forecast, np.asarray(data.features)[bars]
                               @ np.asarray(fit.beta) + float(fit.intercept), rtol=1e-4,
                               atol=1e-6)
    # each decision's target is its bar's next close-to-close log return (over one train
    # scale): checked against the prices, an independent definition
    target = decision_targets(data.aux_target, int(data.test[0]), test_len)
    close = np.asarray(data.prices.close, np.float64)
    log_ret = np.log(close[bars + 1] / close[bars])
    unclipped = np.abs(target) < 0.99 * cfg.features.clip
    ratio = target[unclipped] / log_ret[unclipped]
    assert unclipped.mean() > 0.9 and np.std(ratio) < 1e-4 * np.mean(ratio)
    assert forecast_ic(runs["ridge"].forecast, target) > 0.1
    assert np.all(np.asarray(runs["vol_target"].forecast) == 0)  # no forecast
    for name in ("ridge", "vol_target"):
        pos = np.asarray(runs[name].position)
        assert np.abs(pos).max() <= 1.0 and np.abs(pos).max() > 0
    assert np.asarray(runs["vol_target"].position).min() >= 0  # long only


def test_ridge_penalty_and_fit_ignore_the_test_block():
    cfg = tiny_config()
    _, f, data = _fold(cfg)
    val_len = f.val[1] - f.val[0]
    a = slice(f.test[0], None)
    rng = np.random.default_rng(1)
    moved = data.replace(
        prices=env.Prices(open=data.prices.open.at[a].multiply(1.3),
                          close=data.prices.close.at[a].multiply(0.7)),
        features=data.features.at[a].set(rng.normal(size=data.features[a].shape)),
        aux_target=data.aux_target.at[a].set(rng.normal(size=data.aux_target[a].shape)))
    fit, fit2 = fit_ridge(data, val_len, cfg), fit_ridge(moved, val_len, cfg)
    assert fit.val_sharpe.shape == (len(RIDGE_ALPHAS),)
    assert len(set(np.asarray(fit.val_sharpe).tolist())) > 1  # the penalty matters
    for x, y in zip(jax.tree.leaves(fit), jax.tree.leaves(fit2), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_vol_target_positions_by_hand_and_causal():
    rng = np.random.default_rng(2)
    n = 30
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n) * np.linspace(1, 3, n)))
    rho = np.diff(np.log(close))  # rho[s - 1] = log(C_s / C_{s−1})
    vol = np.full(n, np.nan)
    for t in range(VOL_WINDOW, n):
        vol[t] = np.std(rho[t - VOL_WINDOW:t], ddof=1)
    np.testing.assert_allclose(np.asarray(trailing_vol(jnp.asarray(close))), vol, rtol=1e-4)
    train = jnp.asarray([0, 26])
    sigma_star = np.median(vol[VOL_WINDOW:26])
    want = np.where(np.isnan(vol), 0.0, np.minimum(1.0, sigma_star / vol))
    got = np.asarray(vol_target_positions(jnp.asarray(close), train))
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert (want[VOL_WINDOW:] < 1).any() and (want[VOL_WINDOW:] == 1).any()
    later = close.copy()
    later[27:] *= np.array([0.5, 2.0, 1.5])  # perturb the future of bar 26
    moved = np.asarray(vol_target_positions(jnp.asarray(later), train))
    np.testing.assert_array_equal(moved[:27], got[:27])
    assert not np.allclose(moved[27:], got[27:])


def test_oracle_holds_the_markets_oracle_position_of_the_decision_bar():
    cfg = tiny_config()
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data,
                                                            path="synthetic:vol_regime:1200:1"))
    prep = prepare(cfg)
    f = prep.folds[1]
    data = prep.fold_data(1)
    start, length = f.test[0], f.test[1] - f.test[0]
    out = oracle_rollout(jax.numpy.asarray(prep.oracle_position, jax.numpy.float32), data,
                         data.test[0], length, cfg)
    # decided at the close of bars start−1 … end−2, each filled at the next open
    np.testing.assert_array_equal(out.position, prep.oracle_position[start - 1:f.test[1] - 1])
    assert set(np.unique(out.position)) == {0.25, 1.0}
