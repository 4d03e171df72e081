"""The peers, measured on the same market, fills and costs as rl_trader (benchmark-only).

    sb3_dqn(n_env_steps, cfg, prep)   stable-baselines3 DQN (what FinRL users run) on a gymnasium
                                      wrapper around rl_trader's own env arithmetic, fold 0's
                                      train segment;
    per_step_loop(n_steps, cfg, prep) rl_trader's agent driven one jitted step per Python
                                      iteration (what a straightforward port would do);
    fused_epoch(n_steps, cfg, prep)   the same work as ONE jitted `lax.scan` program;
    gym_env_only(n_steps, cfg, prep)  the wrapper alone under random actions (no learner).

Each returns a plain dict of measured figures: wall seconds, env steps, updates, rates,
parameter count, versions, device. Compile / warm-up time is always measured apart and left
out of the rates.

The wrapper (`TradingGymEnv`) is honest about the env: its observation is exactly what the
Q-network sees, flattened (market row [F] + look-back window [L·F] + portfolio [P], from
`market.observe` and `env.portfolio_features`); the action `i ∈ [0, 3·M)` is
(direction = i // M, magnitude = i % M) → `env.target_fraction`; a step is `env.step` (fill at
the next open, costs from `env.trade_cost`). One function `(state, action) → (new_state, obs,
reward, terminated, truncated)` is jitted once and called per step; its outputs are turned
into numpy. Episodes start at a uniform bar of the train segment and truncate after
`episode_bars` (as `train.make_train` resets its envs). The reward is the log growth ×
`reward_scale` (default `cfg.agent.reward_scale`, the scale rl_trader's learner sees).

The env's jitted step runs on the CPU by default (`env_device="cpu"`): one scalar env step is
latency-bound, and the host is where SB3 wants the numbers, so this is the generous choice for
the peer. Needs `stable-baselines3` and `gymnasium` (not project dependencies): importing this
module raises ImportError without them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import platform
import time

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from rl_trader import env as tenv
from rl_trader.agent.learner import HParams
from rl_trader.config import FeatureConfig, RunConfig
from rl_trader.data.fold_data import FoldData, market_width, observe
from rl_trader.training.train import jit_single, make_train

# --------------------------------------------------------------------------- shared helpers


def _device(platform_: str | None = None) -> str:
    d = jax.devices(platform_)[0] if platform_ else jax.devices()[0]
    return f"{d.platform}: {d.device_kind}"


def _jax_versions() -> dict:
    import flax
    import jaxlib
    import optax

    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "flax": flax.__version__,
            "optax": optax.__version__, "numpy": np.__version__,
            "python": platform.python_version()}


def rl_trader_param_count(cfg: RunConfig, prep, seed: int = 0) -> int:
    """Parameters of rl_trader's Q-network for `cfg` (from `make_train(...).init`)."""
    trainer = make_train(cfg)
    from rl_trader.data.fold_data import zero_obs

    dummy = zero_obs(len(prep.market_names), cfg.features)
    params = jax.eval_shape(trainer.network.init, jax.random.PRNGKey(seed), dummy)
    return int(sum(math.prod(x.shape) for x in jax.tree.leaves(params)))


def obs_size(cfg: RunConfig, n_features: int) -> int:
    """F + L·F + P: the flattened observation the Q-network sees."""
    return n_features + cfg.features.lookback * n_features + len(tenv.PORTFOLIO_NAMES)


def mlp_param_count(d_in: int, width: int, n_actions: int, depth: int = 2) -> int:
    """Parameters of an MLP d_in → width (×depth) → n_actions, with biases."""
    sizes = [d_in] + [width] * depth + [n_actions]
    return sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:], strict=True))


def matching_width(target: int, d_in: int, n_actions: int, depth: int = 2) -> int:
    """The hidden width H of a depth-`depth` MLP whose parameter count is closest to `target`."""
    return min(range(1, 8193),
               key=lambda h: abs(mlp_param_count(d_in, h, n_actions, depth) - target))


# --------------------------------------------------------------------------- the gym wrapper


def flat_obs(data: FoldData, state: tenv.EnvState, fcfg: FeatureConfig) -> jax.Array:
    """[F + L·F + P] float32: market row, look-back window (row-major), portfolio features."""
    o = observe(data, state.t, tenv.portfolio_features(state, data.prices), fcfg)
    return jnp.concatenate([o.market, o.window.reshape(-1), o.portfolio]).astype(jnp.float32)


def make_env_fns(cfg: RunConfig, reward_scale: float):
    """Jitted `reset(data, t0, stop) → (state, obs)` and
    `step(data, state, action) → (new_state, obs, reward, terminated, truncated)`."""
    # the peers' DQN acts on positions: no prior, whatever the run's configuration
    ecfg = dataclasses.replace(cfg.env, prior="flat")
    n_mag = len(ecfg.magnitudes)

    def reset(data, t0, stop):
        state = tenv.reset(t0, stop)
        return state, flat_obs(data, state, cfg.features)

    def step(data, state, action):
        target = tenv.target_fraction(action // n_mag, action % n_mag, ecfg)
        new, out = tenv.step(state, target, data.prices, ecfg)
        return (new, flat_obs(data, new, cfg.features), out.reward * reward_scale,
                out.terminated, out.truncated)

    return jax.jit(reset), jax.jit(step)


class TradingGymEnv(gym.Env):
    """rl_trader's env on one fold's train segment as a `gymnasium.Env` (see module doc)."""

    metadata = {"render_modes": []}

    def __init__(self, cfg: RunConfig, data: FoldData, reward_scale: float | None = None,
                 env_device: str | None = "cpu"):
        super().__init__()
        self.cfg = cfg
        self.reward_scale = cfg.agent.reward_scale if reward_scale is None else reward_scale
        dev = jax.devices(env_device)[0] if env_device else jax.devices()[0]
        self.device = f"{dev.platform}: {dev.device_kind}"
        self.data = jax.device_put(data, dev)
        self.start, self.end = (int(x) for x in np.asarray(data.train))
        self.n_magnitudes = len(cfg.env.magnitudes)
        n_feat = market_width(data)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_size(cfg, n_feat),),
                                                np.float32)
        self.action_space = gym.spaces.Discrete(tenv.N_DIRECTIONS * self.n_magnitudes)
        self._reset_fn, self._step_fn = make_env_fns(cfg, self.reward_scale)
        self._state = None

    def decode(self, action: int) -> tuple[int, int]:
        """Action index → (direction, magnitude index)."""
        return int(action) // self.n_magnitudes, int(action) % self.n_magnitudes

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        t0 = int((options or {}).get("t0", self.np_random.integers(self.start, self.end - 1)))
        stop = min(t0 + self.cfg.env.episode_bars, self.end - 1)
        self._state, obs = self._reset_fn(self.data, np.int32(t0), np.int32(stop))
        return np.asarray(obs), {"t": t0}

    def step(self, action):
        self._state, obs, reward, terminated, truncated = self._step_fn(
            self.data, self._state, np.int32(action))
        return (np.asarray(obs), float(reward), bool(terminated), bool(truncated), {})

    def compile_s(self) -> float:
        """Compile (and run once) the jitted reset and step; returns the seconds it took."""
        t = time.perf_counter()
        self.reset(seed=0)
        self.step(0)
        self._state = None
        return time.perf_counter() - t


# --------------------------------------------------------------------------- SB3 DQN


def _torch_versions(device: str) -> dict:
    import stable_baselines3
    import torch

    out = {"torch": torch.__version__, "stable_baselines3": stable_baselines3.__version__,
           "gymnasium": gym.__version__}
    if device == "cuda":
        out["cuda_device"] = torch.cuda.get_device_name(0)
        out["torch_cuda"] = torch.version.cuda
    return out


def sb3_dqn(n_env_steps: int, cfg: RunConfig, prep, seed: int = 0,
            learning_starts: int = 1000, buffer_size: int = 100_000, batch_size: int = 256,
            env_device: str | None = "cpu", net_depth: int = 2) -> dict:
    """stable-baselines3 DQN on fold 0's train segment: one update per env step after
    `learning_starts`; an MLP Q-network of about rl_trader's parameter count.

    Matched to rl_trader's learner where SB3 has the option: gamma, n-step, learning rate,
    Polyak target (tau, every update), gradient-norm clip, ε schedule (over n_env_steps), the
    Huber loss (SB3's default). Times `model.learn` only (construction and the env's jit
    compile excluded and reported apart).
    """
    import torch
    from stable_baselines3 import DQN

    device = "cuda" if torch.cuda.is_available() else "cpu"
    acfg = cfg.agent
    data = prep.fold_data(0)
    t = time.perf_counter()
    gym_env = TradingGymEnv(cfg, data, env_device=env_device)
    env_compile_s = gym_env.compile_s()
    n_actions = int(gym_env.action_space.n)
    d_in = int(gym_env.observation_space.shape[0])
    target = rl_trader_param_count(cfg, prep, seed)
    width = matching_width(target, d_in, n_actions, net_depth)
    kwargs = dict(learning_rate=acfg.learning_rate, buffer_size=buffer_size,
                  learning_starts=learning_starts, batch_size=batch_size, tau=acfg.tau,
                  gamma=acfg.gamma, train_freq=1, gradient_steps=1, n_steps=acfg.n_step,
                  target_update_interval=1, exploration_fraction=acfg.eps_decay_fraction,
                  exploration_initial_eps=acfg.eps_start, exploration_final_eps=acfg.eps_end,
                  max_grad_norm=acfg.max_grad_norm)
    model = DQN("MlpPolicy", gym_env, policy_kwargs=dict(net_arch=[width] * net_depth),
                seed=seed, device=device, verbose=0, **kwargs)
    n_params = int(sum(p.numel() for p in model.q_net.parameters()))
    construct_s = time.perf_counter() - t

    # Warm the device up (kernels, cuBLAS handles) with a forward/backward that changes nothing.
    t = time.perf_counter()
    x = torch.zeros((batch_size, d_in), device=model.device)
    for _ in range(3):
        model.q_net(x).sum().backward()
        model.q_net.zero_grad(set_to_none=True)
    if device == "cuda":
        torch.cuda.synchronize()
    torch_warmup_s = time.perf_counter() - t

    marks: dict[str, float] = {}

    from stable_baselines3.common.callbacks import BaseCallback

    class Mark(BaseCallback):
        """Time stamp when the first update is about to happen (end of the no-update phase)."""

        def _on_step(self) -> bool:
            if self.num_timesteps == learning_starts:
                marks["learning_starts"] = time.perf_counter()
            return True

    t = time.perf_counter()
    model.learn(total_timesteps=n_env_steps, callback=Mark())
    if device == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - t
    updates = int(model._n_updates)
    train_phase = (time.perf_counter() - marks["learning_starts"]) if "learning_starts" in marks \
        else None
    return {
        "peer": "stable-baselines3 DQN",
        "env_steps": n_env_steps, "updates": updates,
        "updates_expected": max(0, n_env_steps - learning_starts),
        "wall_s": wall, "env_steps_per_s": n_env_steps / wall, "updates_per_s": updates / wall,
        "train_phase_s": train_phase,
        "updates_per_s_train_phase": updates / train_phase if train_phase else None,
        "construct_s": construct_s, "env_compile_s": env_compile_s,
        "torch_warmup_s": torch_warmup_s, "compile_s": env_compile_s + torch_warmup_s,
        "param_count": n_params, "rl_trader_param_count": target,
        "net_arch": [width] * net_depth, "obs_size": d_in, "n_actions": n_actions,
        "batch_size": batch_size, "learning_starts": learning_starts,
        "buffer_size": buffer_size, "sb3_kwargs": kwargs,
        "device": device, "env_device": gym_env.device,
        "torch_threads": torch.get_num_threads(),
        "versions": {**_torch_versions(device), **_jax_versions()},
    }


def gym_env_only(n_steps: int, cfg: RunConfig, prep, seed: int = 0,
                 env_device: str | None = "cpu") -> dict:
    """The wrapper alone: `n_steps` gym steps (random actions, auto-reset), no learner."""
    env = TradingGymEnv(cfg, prep.fold_data(0), env_device=env_device)
    compile_s = env.compile_s()
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, env.action_space.n, n_steps)
    env.reset(seed=seed)
    episodes = 0
    t = time.perf_counter()
    for a in actions:
        _, _, term, trunc, _ = env.step(a)
        if term or trunc:
            env.reset()
            episodes += 1
    wall = time.perf_counter() - t
    return {"peer": "gym wrapper alone (random actions)", "env_steps": n_steps,
            "episodes": episodes, "wall_s": wall, "env_steps_per_s": n_steps / wall,
            "compile_s": compile_s, "env_device": env.device, "versions": _jax_versions()}


# --------------------------------------------------------------------------- rl_trader itself


def _with_steps(cfg: RunConfig, steps_per_epoch: int) -> RunConfig:
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train,
                                                              steps_per_epoch=steps_per_epoch))


@functools.lru_cache(maxsize=8)
def _jitted_init(cfg: RunConfig):
    """`Trainer.init` jitted once per config up to the epoch length (which init does not use),
    so `per_step_loop` and `fused_epoch` of one config share its compile."""
    return jax.jit(make_train(cfg).init)


def _compiled_epoch(cfg: RunConfig, prep, seed: int):
    """(compiled epoch(runner, data) with the config's hyper-parameters, runner, fold data,
    compile seconds, param count) for `cfg`."""
    data = prep.fold_data(0)
    trainer = jit_single(make_train(cfg))
    init_cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps_per_epoch=1,
                                                                  epochs=1))
    init = _jitted_init(init_cfg)
    runner = jax.block_until_ready(init(jax.random.PRNGKey(seed), data))
    n_params = int(sum(x.size for x in jax.tree.leaves(runner.learner.params)))
    hp = HParams.from_config(cfg.agent)
    t = time.perf_counter()
    compiled = trainer.epoch.lower(runner, data, hp).compile()

    def epoch(runner, data):
        return compiled(runner, data, hp)

    return epoch, runner, data, time.perf_counter() - t, n_params


def _rl_trader_result(name: str, cfg: RunConfig, n_steps: int, updates: int, wall: float,
                      compile_s: float, warmup_s: float, n_params: int, **extra) -> dict:
    n_envs = cfg.train.n_envs
    return {"peer": name, "n_steps": n_steps, "n_envs": n_envs, "env_steps": n_steps * n_envs,
            "updates": updates, "batch_size": cfg.agent.batch_size, "wall_s": wall,
            "env_steps_per_s": n_steps * n_envs / wall, "updates_per_s": updates / wall,
            "compile_s": compile_s, "warmup_s": warmup_s, "param_count": n_params,
            "device": _device(), "versions": _jax_versions(), **extra}


def per_step_loop(n_steps: int, cfg: RunConfig, prep, seed: int = 0) -> dict:
    """rl_trader's agent, one jitted iteration (env step of all n_envs + `updates_per_step`
    updates + target EMA) per Python iteration, blocking on each iteration's metrics.

    The jitted iteration is `trainer.epoch` of a config with `steps_per_epoch=1`. (Its ε
    schedule spans `epochs` steps instead of the run's; that changes which actions are taken,
    not the work done.)
    """
    cfg1 = _with_steps(cfg, 1)
    compiled, runner, data, compile_s, n_params = _compiled_epoch(cfg1, prep, seed)
    t = time.perf_counter()
    runner, metrics = compiled(runner, data)
    jax.block_until_ready((runner, metrics))
    warmup_s = time.perf_counter() - t
    before = int(runner.learner.step)
    t = time.perf_counter()
    for _ in range(n_steps):
        runner, metrics = compiled(runner, data)
        jax.block_until_ready(metrics)
    jax.block_until_ready(runner)
    wall = time.perf_counter() - t
    return _rl_trader_result("rl_trader per-step Python loop", cfg, n_steps,
                             int(runner.learner.step) - before, wall, compile_s, warmup_s,
                             n_params, iterations=n_steps)


def fused_epoch(n_steps: int, cfg: RunConfig, prep, seed: int = 0) -> dict:
    """The same work as `per_step_loop`, `n_steps` iterations in ONE jitted `lax.scan` call:
    compile ahead of time, one warm-up call, then the timed call."""
    cfg_n = _with_steps(cfg, n_steps)
    compiled, runner, data, compile_s, n_params = _compiled_epoch(cfg_n, prep, seed)
    t = time.perf_counter()
    runner, metrics = jax.block_until_ready(compiled(runner, data))
    warmup_s = time.perf_counter() - t
    before = int(runner.learner.step)
    t = time.perf_counter()
    runner, metrics = jax.block_until_ready(compiled(runner, data))
    wall = time.perf_counter() - t
    return _rl_trader_result("rl_trader fused epoch (one jitted call)", cfg, n_steps,
                             int(runner.learner.step) - before, wall, compile_s, warmup_s,
                             n_params, iterations=1)
