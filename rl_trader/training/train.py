"""The training run as pure functions: `make_train(config)` → `Trainer`.

The functions are pure and un-jitted: `jit_single` jits them for one member,
`population.Population` jits their `vmap` over many.

`Trainer.init(key, fold)` creates **every** piece of per-fold state in one place (`Runner`): the
learner, the parallel envs, the replay and the PRNG key; nothing survives from another fold.
`Trainer.epoch(runner, fold, hp)` is one jitted program: `lax.scan` over env steps, each doing
a vmapped env step of all parallel envs, a replay write, `updates_per_step` gradient updates and
the target EMA. The host sees the state only between epochs: it rolls each epoch's
ensembles out on validation (`Trainer.evaluate`) and keeps the best (`run.experiment`).
`hp` are the learner's hyper-parameters (`learner.HParams`; `HParams.from_config(cfg.agent)`
outside a population sweep).

A gradient update samples n-step windows from the replay, observes each window's first pre-step
state (with input noise) and hands the batch to the Q-head (`agent.heads.make_head`), which
backs up the taken actions or every position through the env's own step and applies one
optimiser step with the target EMA (`learner.Head.update`).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from rl_trader import env
from rl_trader.agent import learner, replay
from rl_trader.agent.heads import make_head
from rl_trader.agent.policy import greedy_decide
from rl_trader.config import RunConfig
from rl_trader.data.fold_data import (
    FoldData,
    Obs,
    bar_context,
    market_width,
    observe_batch,
    zero_obs,
)
from rl_trader.evaluation.rollout import Rollout, rollout


def add_noise(key: jax.Array, obs: Obs, std: jax.Array) -> Obs:
    """Gaussian noise of `std` on the market row and window (regularises against memorising
    the train path); the portfolio group is left exact."""
    k_m, k_w = jax.random.split(key)
    return obs.replace(market=obs.market + std * jax.random.normal(k_m, obs.market.shape),
                       window=obs.window + std * jax.random.normal(k_w, obs.window.shape))


batch_portfolio = jax.vmap(env.portfolio_features, in_axes=(0, None))


@struct.dataclass
class Runner:
    """All state of one fold's training run."""

    learner: learner.TrainState
    envs: env.EnvState  # leaves [N]
    replay: replay.Replay
    key: jax.Array
    env_steps: jax.Array  # int32: env steps per env since the prefill (drives ε, counts epochs)


@struct.dataclass
class EpochMetrics:
    loss: jax.Array
    td_abs: jax.Array
    aux_loss: jax.Array
    q_mean: jax.Array
    grad_norm: jax.Array
    epsilon: jax.Array
    reward: jax.Array  # mean scaled reward of the behaviour policy


class Trainer(NamedTuple):
    init: callable  # (key, fold) -> Runner
    epoch: callable  # (runner, fold, hp) -> (runner, EpochMetrics)
    evaluate: callable  # (params [S, ...] of an ensemble, fold, start, length, key) -> Rollout
    network: nn.Module  # the Q-head's network (`learner.Head.network`)


def reset_envs(key: jax.Array, fold: FoldData, n: int, cfg: RunConfig) -> env.EnvState:
    """`n` fresh episodes, each in training range i (`fold.episodes`: one per instrument) with
    probability ∝ its starting bars, at a uniform bar t0 ∈ [start_i, end_i − 1)."""
    start, end = fold.episodes[:, 0], fold.episodes[:, 1]
    span = (end - 1 - start).astype(jnp.float32)
    i = jax.random.categorical(jax.random.fold_in(key, 1), jnp.log(span), shape=(n,))
    t0 = jax.random.randint(key, (n,), start[i], end[i] - 1)
    return jax.vmap(env.reset)(t0, env.episode_stop(t0, end[i], cfg.env))


def env_step(runner: Runner, fold: FoldData, epsilon: jax.Array | None, head: learner.Head,
             cfg: RunConfig) -> tuple[Runner, replay.Step]:
    """One step of every env: the head's ε-greedy actions (`Head.explore`), or uniform random
    ones (the same as at ε = 1, without evaluating the network) when `epsilon` is None; ended
    episodes restart at once."""
    key, k_act, k_reset = jax.random.split(runner.key, 3)
    envs = runner.envs
    port = batch_portfolio(envs, fold.prices)
    ctx = bar_context(fold, envs.t, cfg.env)
    if epsilon is None:
        direction, magnitude = learner.random_actions(k_act, envs.t.shape[0], env.N_DIRECTIONS,
                                                      len(env.action_sizes(cfg.env)))
    else:
        obs = observe_batch(fold, envs.t, port, cfg.features)
        out = head.network.apply(runner.learner.params, obs)
        direction, magnitude = head.explore(k_act, out, port[:, 0], ctx, epsilon)
    target = env.target_fraction(direction, magnitude, cfg.env, ctx.prior)
    new, out = jax.vmap(env.step, in_axes=(0, 0, None, None))(envs, target, fold.prices, cfg.env)
    done = out.terminated | out.truncated
    step = replay.Step(state_tm1=envs, direction=direction, magnitude=magnitude,
                       reward=out.reward * cfg.agent.reward_scale,
                       portfolio_t=batch_portfolio(new, fold.prices), terminated=out.terminated,
                       last=done)
    fresh = reset_envs(k_reset, fold, done.shape[0], cfg)
    new = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, new)
    return runner.replace(envs=new, key=key, env_steps=runner.env_steps + 1,
                          replay=replay.add(runner.replay, step)), step


def init_runner(key: jax.Array, fold: FoldData, head: learner.Head, cfg: RunConfig) -> Runner:
    """Every piece of one fold's training state, fresh: the network's params (the target equal
    to them), the parallel envs, the replay prefilled by uniform random steps, the PRNG key."""
    k_net, k_env, k_run = jax.random.split(key, 3)
    dummy = zero_obs(market_width(fold), cfg.features)
    params = head.network.init(k_net, dummy)
    envs = reset_envs(k_env, fold, cfg.train.n_envs, cfg)
    example = replay.Step(state_tm1=env.reset(jnp.int32(0), jnp.int32(0)),
                          direction=jnp.int32(0), magnitude=jnp.int32(0),
                          reward=jnp.float32(0), portfolio_t=dummy.portfolio,
                          terminated=jnp.bool_(False), last=jnp.bool_(False))
    runner = Runner(learner=learner.init_train_state(params, cfg.agent), envs=envs,
                    replay=replay.init(example, cfg.agent.replay_capacity, cfg.train.n_envs),
                    key=k_run, env_steps=jnp.int32(0))

    def random_step(r, _):
        r, _ = env_step(r, fold, None, head, cfg)  # uniform random actions
        return r, None

    prefill = max(cfg.train.prefill_steps, cfg.agent.n_step)
    runner, _ = jax.lax.scan(random_step, runner, None, length=prefill)
    return runner.replace(env_steps=jnp.int32(0))


def learn(runner: Runner, fold: FoldData, hp: learner.HParams, head: learner.Head,
          cfg: RunConfig) -> tuple[Runner, learner.LossInfo]:
    """One gradient update: a replay batch, its pre-states observed with input noise, and the
    head's step (`Head.update`) on them and their next-bar targets."""
    acfg = cfg.agent
    key, k_sample, k_noise = jax.random.split(runner.key, 3)
    b = replay.sample(runner.replay, k_sample, acfg.batch_size, acfg.n_step, hp.gamma)
    bar_tm1 = b.state_tm1.t
    port_tm1 = batch_portfolio(b.state_tm1, fold.prices)
    obs_tm1 = add_noise(k_noise, observe_batch(fold, bar_tm1, port_tm1, cfg.features), hp.obs_noise)
    trained, info = head.update(runner.learner, b, obs_tm1, fold.aux_target[bar_tm1], fold, hp)
    return runner.replace(learner=trained, key=key), info


def run_epoch(runner: Runner, fold: FoldData, hp: learner.HParams, head: learner.Head,
              cfg: RunConfig) -> tuple[Runner, EpochMetrics]:
    """One epoch: `steps_per_epoch` env steps of every env, each followed by
    `updates_per_step` gradient updates; the metrics are the epoch's means."""
    total_steps = cfg.train.epochs * cfg.train.steps_per_epoch

    def one(r, _):
        epsilon = learner.epsilon(r.env_steps, total_steps, cfg.agent, hp)
        r, step = env_step(r, fold, epsilon, head, cfg)
        r, infos = jax.lax.scan(lambda r2, _: learn(r2, fold, hp, head, cfg), r, None,
                                length=cfg.train.updates_per_step)
        info = jax.tree.map(lambda x: x.mean(), infos)
        return r, EpochMetrics(loss=info.loss, td_abs=info.td_abs, aux_loss=info.aux_loss,
                               q_mean=info.q_mean, grad_norm=info.grad_norm, epsilon=epsilon,
                               reward=step.reward.mean())

    runner, metrics = jax.lax.scan(one, runner, None, length=cfg.train.steps_per_epoch)
    return runner, jax.tree.map(lambda x: x.mean(), metrics)


def evaluate_ensemble(params, fold: FoldData, start: jax.Array, length: int, key: jax.Array,
                      cfg: RunConfig) -> Rollout:
    """The greedy rollout of an ensemble (`params` [S, ...]) over [start, start + length)."""
    return rollout(greedy_decide(params, fold, cfg), fold, start, length, cfg, key)


def make_train(cfg: RunConfig) -> Trainer:
    """The pure, jittable functions of a training run for one configuration, its Q-head built
    once."""
    head = make_head(cfg)
    return Trainer(init=partial(init_runner, head=head, cfg=cfg),
                   epoch=partial(run_epoch, head=head, cfg=cfg),
                   evaluate=partial(evaluate_ensemble, cfg=cfg),
                   network=head.network)

def jit_single(trainer: Trainer) -> Trainer:
    """The trainer's functions jitted for one member (the population jits their vmaps)."""
    return trainer._replace(init=jax.jit(trainer.init),
                            epoch=jax.jit(trainer.epoch, donate_argnums=0),
                            evaluate=jax.jit(trainer.evaluate, static_argnums=3))
