"""The training run as pure functions: `make_train(config)` → `Trainer`.

The functions are pure and un-jitted: `jit_single` jits them for one member,
`population.Population` jits their `vmap` over many.

`Trainer.init(key, fold)` creates **every** piece of per-fold state in one place (`Runner`): the
learner, the parallel envs, the replay and the PRNG key; nothing survives from another fold.
`Trainer.epoch(runner, fold, hp)` is one jitted program: `lax.scan` over env steps, each doing
a vmapped env step of all parallel envs, a replay write, `updates_per_step` gradient updates and
the target EMA. The host sees the state only between epochs.
`Trainer.train(key, fold, hp)` runs all epochs with validation and best-epoch selection inside
one program, so folds × seeds can be `vmap`ped.
`hp` are the learner's hyper-parameters (`learner.HParams`; `HParams.from_config(cfg.agent)`
outside a population sweep).

A gradient update samples n-step windows from the replay and, with the generic head, backs up
either the taken actions (`AgentConfig.backup = "taken"`, `learner.update`) or, from each
window's first pre-step state, all K positions through the env's own step (`"all"`,
`learner.full_action_update`); the model head (`NetConfig.q_head = "model"`) always backs up
all K positions and fits its forecasts on the same pre-states (`model_head.model_update`).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from rl_trader import env
from rl_trader.agent import learner, model_head, replay
from rl_trader.agent.networks import ModelQNetwork, Obs, QNetwork, make_network
from rl_trader.agent.policy import greedy_decide
from rl_trader.config import RunConfig
from rl_trader.data.fold_data import FoldData, market_width, observe
from rl_trader.evaluation.metrics import sharpe
from rl_trader.evaluation.rollout import Rollout, rollout
from rl_trader.evaluation.selection import improves


def add_noise(key: jax.Array, obs: Obs, std: jax.Array) -> Obs:
    """Gaussian noise of `std` on the market row and window (regularises against memorising
    the train path); the portfolio group is left exact."""
    k_m, k_w = jax.random.split(key)
    return obs.replace(market=obs.market + std * jax.random.normal(k_m, obs.market.shape),
                       window=obs.window + std * jax.random.normal(k_w, obs.window.shape))


@struct.dataclass
class Runner:
    """All state of one fold's training run."""

    learner: learner.TrainState
    envs: env.EnvState  # leaves [N]
    replay: replay.Replay
    key: jax.Array
    env_steps: jax.Array  # int32: env steps taken per env since init (drives ε)


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
    train: callable  # (key, fold, hp) -> TrainResult
    network: QNetwork | ModelQNetwork


@struct.dataclass
class TrainResult:
    best_params: dict
    best_epoch: jax.Array
    val_sharpe: jax.Array  # [E]
    metrics: EpochMetrics  # leaves [E]


def make_train(cfg: RunConfig, periods_per_year: float, val_steps: int) -> Trainer:
    """Build the pure, jittable functions of a training run for one configuration.
    `val_steps`: the steps of `train`'s validation rollouts (`Prepared.val_steps`, the shape
    bucket of the validation length); their Sharpe counts the fold's validation bars only."""
    acfg, tcfg, lookback = cfg.agent, cfg.train, cfg.features.lookback
    n_mag, model = len(cfg.env.magnitudes), cfg.net.q_head == "model"
    net = make_network(cfg.net, n_mag)
    total_steps = tcfg.epochs * tcfg.steps_per_epoch
    batch_observe = jax.vmap(partial(observe, cfg=cfg.features), in_axes=(None, 0, 0))
    batch_portfolio = jax.vmap(env.portfolio_features, in_axes=(0, None))

    def reset_envs(key: jax.Array, fold: FoldData, n: int) -> env.EnvState:
        """`n` fresh episodes, each in training range i (`fold.episodes`: one per instrument)
        with probability ∝ its starting bars, at a uniform bar t0 ∈ [start_i, end_i − 1)."""
        start, end = fold.episodes[:, 0], fold.episodes[:, 1]
        span = (end - 1 - start).astype(jnp.float32)
        i = jax.random.categorical(jax.random.fold_in(key, 1), jnp.log(span), shape=(n,))
        t0 = jax.random.randint(key, (n,), start[i], end[i] - 1)
        return jax.vmap(env.reset)(t0, env.episode_stop(t0, end[i], cfg.env))

    def env_step(runner: Runner, fold: FoldData,
                 epsilon: jax.Array | None) -> tuple[Runner, replay.Step]:
        """One step of every env: ε-greedy actions (per branch for the generic head, over the
        K positions of the assembled Q for the model head), or uniform random ones (the same
        as at ε = 1, without evaluating the network) when `epsilon` is None."""
        key, k_act, k_reset = jax.random.split(runner.key, 3)
        envs = runner.envs
        if epsilon is None:
            direction, magnitude = learner.random_actions(k_act, envs.t.shape[0], env.N_DIRECTIONS,
                                                        n_mag)
        else:
            port = batch_portfolio(envs, fold.prices)
            heads = net.apply(runner.learner.params, batch_observe(fold, envs.t, port))
            if model:
                q = model_head.assemble(heads, port[:, 0], fold.return_scale[envs.t], cfg.env,
                                     acfg.reward_scale)
                direction, magnitude = model_head.epsilon_greedy_positions(k_act, q, epsilon)
            else:
                direction, magnitude = learner.epsilon_greedy(k_act, heads, epsilon)
        target = env.target_fraction(direction, magnitude, cfg.env)
        new, out = jax.vmap(env.step, in_axes=(0, 0, None, None))(envs, target, fold.prices,
                                                                    cfg.env)
        done = out.terminated | out.truncated
        step = replay.Step(state_tm1=envs, direction=direction,
                           magnitude=magnitude, reward=out.reward * acfg.reward_scale,
                           portfolio_t=batch_portfolio(new, fold.prices),
                           terminated=out.terminated, last=done)
        fresh = reset_envs(k_reset, fold, done.shape[0])
        new = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, new)
        runner = runner.replace(envs=new, key=key, env_steps=runner.env_steps + 1,
                                replay=replay.add(runner.replay, step))
        return runner, step

    def init(key: jax.Array, fold: FoldData) -> Runner:
        k_net, k_env, k_run = jax.random.split(key, 3)
        n_feat = market_width(fold)
        dummy = Obs(market=jnp.zeros((n_feat,)), window=jnp.zeros((lookback, n_feat)),
                    portfolio=jnp.zeros((len(env.PORTFOLIO_NAMES),)))
        params = net.init(k_net, dummy)
        envs = reset_envs(k_env, fold, tcfg.n_envs)
        example = replay.Step(state_tm1=env.reset(jnp.int32(0), jnp.int32(0)),
                              direction=jnp.int32(0), magnitude=jnp.int32(0),
                              reward=jnp.float32(0), portfolio_t=dummy.portfolio,
                              terminated=jnp.bool_(False), last=jnp.bool_(False))
        runner = Runner(learner=learner.init_train_state(params, acfg), envs=envs,
                        replay=replay.init(example, acfg.replay_capacity, tcfg.n_envs),
                        key=k_run, env_steps=jnp.int32(0))
        prefill = max(tcfg.prefill_steps, acfg.n_step)

        def random_step(r, _):
            r, _ = env_step(r, fold, None)  # uniform random actions
            return r, None

        runner, _ = jax.lax.scan(random_step, runner, None, length=prefill)
        return runner.replace(env_steps=jnp.int32(0))

    def learn(runner: Runner, fold: FoldData,
              hp: learner.HParams) -> tuple[Runner, learner.LossInfo]:
        key, k_sample, k_noise = jax.random.split(runner.key, 3)
        b = replay.sample(runner.replay, k_sample, acfg.batch_size, acfg.n_step, hp.gamma)
        bar_tm1 = b.state_tm1.t
        port_tm1 = batch_portfolio(b.state_tm1, fold.prices)
        obs_tm1 = add_noise(k_noise, batch_observe(fold, bar_tm1, port_tm1), hp.obs_noise)
        y_tm1 = fold.aux_target[bar_tm1]
        if model or acfg.backup == "all":
            port_t, r_t, discount_t = jax.vmap(
                learner.counterfactual_step, in_axes=(0, None, None, None, None))(
                b.state_tm1, fold.prices, cfg.env, acfg.reward_scale, hp.gamma)  # [B, K, ...]
            obs_t = batch_observe(fold, bar_tm1 + 1, port_t)  # one market row each
        if model:
            trained, info = model_head.model_update(
                runner.learner, net.apply, obs_tm1, obs_t, port_tm1[:, 0], port_t[..., 0],
                fold.return_scale[bar_tm1], fold.return_scale[bar_tm1 + 1], y_tm1, discount_t,
                acfg, cfg.env, hp)
        elif acfg.backup == "all":
            trained, info = learner.full_action_update(runner.learner, net.apply, obs_tm1, obs_t,
                                                       r_t, discount_t, y_tm1, acfg, hp)
        else:
            obs_t = batch_observe(fold, b.bar_t, b.portfolio_t)
            trained, info = learner.update(runner.learner, net.apply, obs_tm1, obs_t,
                                           b.direction_tm1, b.magnitude_tm1, b.return_t,
                                           b.discount_t, y_tm1, acfg, hp)
        return runner.replace(learner=trained, key=key), info

    def epoch(runner: Runner, fold: FoldData,
              hp: learner.HParams) -> tuple[Runner, EpochMetrics]:

        def one(r, _):
            epsilon = learner.epsilon(r.env_steps, total_steps, acfg, hp)
            r, step = env_step(r, fold, epsilon)

            def upd(r2, _):
                return learn(r2, fold, hp)

            r, infos = jax.lax.scan(upd, r, None, length=tcfg.updates_per_step)
            info = jax.tree.map(lambda x: x.mean(), infos)
            return r, EpochMetrics(loss=info.loss, td_abs=info.td_abs, aux_loss=info.aux_loss,
                                   q_mean=info.q_mean, grad_norm=info.grad_norm,
                                   epsilon=epsilon,
                                   reward=step.reward.mean())

        runner, metrics = jax.lax.scan(one, runner, None, length=tcfg.steps_per_epoch)
        return runner, jax.tree.map(lambda x: x.mean(), metrics)

    def evaluate(params, fold: FoldData, start: jax.Array, length: int,
                 key: jax.Array) -> Rollout:
        return rollout(greedy_decide(params, fold, cfg), fold, start, length, cfg, key)

    def train(key: jax.Array, fold: FoldData, hp: learner.HParams) -> TrainResult:
        runner = init(key, fold)

        def one_epoch(carry, _):
            runner, best_params, best_sharpe, best_epoch, i = carry
            runner, metrics = epoch(runner, fold, hp)
            acting = learner.policy_params(runner.learner, tcfg.eval_params)
            val = evaluate(jax.tree.map(lambda x: x[None], acting), fold, fold.val[0],
                           val_steps, runner.key)  # an ensemble of one
            s = sharpe(val.returns, periods_per_year, valid=fold.val[1] - fold.val[0])
            better = improves(s, best_sharpe)  # the one selection rule
            best_params = jax.tree.map(lambda a, b: jnp.where(better, a, b),
                                       acting, best_params)
            carry = (runner, best_params, jnp.where(better, s, best_sharpe),
                     jnp.where(better, i, best_epoch), i + 1)
            return carry, (s, metrics)

        carry0 = (runner, runner.learner.params, jnp.float32(-jnp.inf), jnp.int32(0),
                  jnp.int32(0))
        (_, best, _, best_epoch, _), (val_sharpes, metrics) = jax.lax.scan(
            one_epoch, carry0, None, length=tcfg.epochs)
        return TrainResult(best_params=best, best_epoch=best_epoch, val_sharpe=val_sharpes,
                           metrics=metrics)

    return Trainer(init=init, epoch=epoch, evaluate=evaluate, train=train, network=net)


def jit_single(trainer: Trainer) -> Trainer:
    """The trainer's functions jitted for one member (the population jits their vmaps)."""
    return trainer._replace(init=jax.jit(trainer.init),
                            epoch=jax.jit(trainer.epoch, donate_argnums=0),
                            evaluate=jax.jit(trainer.evaluate, static_argnums=3),
                            train=jax.jit(trainer.train))
