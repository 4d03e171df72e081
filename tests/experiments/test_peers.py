"""The benchmark peers (experiments.peers): the gym wrapper is rl_trader's env, number for number.

Skipped where stable-baselines3 / gymnasium are not installed (they are benchmark-only).
"""


import numpy as np
import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("stable_baselines3")

import jax.numpy as jnp  # noqa: E402

from experiments import peers  # noqa: E402
from rl_trader import env  # noqa: E402
from rl_trader.data.fold_data import observe  # noqa: E402
from rl_trader.run.prepare import prepare  # noqa: E402
from tests.helpers import tiny_config  # noqa: E402

CFG = tiny_config(n_envs=2)


@pytest.fixture(scope="module")
def prep():
    return prepare(CFG)


@pytest.fixture(scope="module")
def data(prep):
    return prep.fold_data(0)


def _direct(data, t0, actions, cfg):
    """Rewards, flags and observations from rl_trader.env.step called directly (eagerly)."""
    n_mag = len(cfg.env.magnitudes)
    end = int(data.train[1])
    state = env.reset(jnp.int32(t0), jnp.int32(min(t0 + cfg.env.episode_bars, end - 1)))
    rewards, flags, obs = [], [], []
    for a in actions:
        target = env.target_fraction(jnp.int32(a // n_mag), jnp.int32(a % n_mag), cfg.env)
        state, out = env.step(state, target, data.prices, cfg.env)
        rewards.append(float(out.reward))
        flags.append((bool(out.terminated), bool(out.truncated)))
        o = observe(data, state.t, env.portfolio_features(state, data.prices), cfg.features)
        obs.append(np.concatenate([np.asarray(o.market), np.asarray(o.window).ravel(),
                                   np.asarray(o.portfolio)]))
    return np.array(rewards), flags, np.array(obs)


@pytest.mark.parametrize("scale", [None, 1.0])
def test_wrapper_reward_is_env_step_reward(data, scale):
    gym_env = peers.TradingGymEnv(CFG, data, reward_scale=scale)
    want_scale = CFG.agent.reward_scale if scale is None else scale
    rng = np.random.default_rng(0)
    n = CFG.env.episode_bars  # one whole episode: the last step must truncate
    actions = rng.integers(0, gym_env.action_space.n, n)
    t0 = int(data.train[0]) + 7
    obs0, _ = gym_env.reset(seed=0, options={"t0": t0})
    got, flags, obs = [], [], []
    for a in actions:
        o, r, term, trunc, _ = gym_env.step(a)
        got.append(r)
        flags.append((term, trunc))
        obs.append(o)
    rewards, want_flags, want_obs = _direct(data, t0, actions, CFG)
    assert np.all(np.isfinite(got)) and np.any(np.asarray(got) != 0)
    np.testing.assert_allclose(got, rewards * want_scale, rtol=1e-5, atol=1e-7)
    assert flags == want_flags and flags[-1] == (False, True)
    np.testing.assert_allclose(np.array(obs), want_obs, rtol=1e-6, atol=1e-6)


def test_obs_shape_and_action_space(data):
    gym_env = peers.TradingGymEnv(CFG, data)
    n_feat = int(data.features.shape[1])
    size = n_feat + CFG.features.lookback * n_feat + len(env.PORTFOLIO_NAMES)
    obs, info = gym_env.reset(seed=1)
    assert obs.shape == (size,) == gym_env.observation_space.shape
    assert obs.dtype == np.float32
    assert gym_env.action_space.n == 3 * len(CFG.env.magnitudes)
    assert int(data.train[0]) <= info["t"] < int(data.train[1]) - 1
    assert gym_env.decode(len(CFG.env.magnitudes) + 2) == (1, 2)


def test_matching_width_within_ten_percent():
    for target, d_in, n_act in ((65_101, 698, 12), (15_779, 194, 12)):
        h = peers.matching_width(target, d_in, n_act)
        assert abs(peers.mlp_param_count(d_in, h, n_act) - target) <= 0.1 * target


def test_sb3_dqn_runs_one_update_per_step_after_learning_starts(prep):
    r = peers.sb3_dqn(160, CFG, prep, learning_starts=100, buffer_size=500, batch_size=16)
    assert r["updates"] == r["updates_expected"] == 60
    assert abs(r["param_count"] - r["rl_trader_param_count"]) <= 0.1 * r["rl_trader_param_count"]
    assert r["env_steps_per_s"] > 0 and r["updates_per_s"] > 0


def test_per_step_loop_and_fused_epoch_do_the_same_updates(prep):
    n = 6
    loop = peers.per_step_loop(n, CFG, prep)
    fused = peers.fused_epoch(n, CFG, prep)
    assert loop["updates"] == fused["updates"] == n * CFG.train.updates_per_step
    assert loop["env_steps"] == fused["env_steps"] == n * CFG.train.n_envs
    assert loop["param_count"] == fused["param_count"] == peers.rl_trader_param_count(CFG, prep)
