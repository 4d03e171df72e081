"""The training run: fresh state per fold, the jitted epoch, the all-epochs program.

Every trainer here is made from its config with the fields `config.program_config` drops made
unreadable (`helpers.unread_dropped`): each program traced in this module also checks that
none of them reads one, which `population.programs` relies on to reuse programs across runs."""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl_trader.agent import learner, model_head
from rl_trader.agent.learner import HParams
from rl_trader.env import FLAT
from rl_trader.run.prepare import prepare
from rl_trader.training.train import Runner, jit_single, make_train
from tests.helpers import tiny_config, unread_dropped

CFG = tiny_config(n_envs=4)
HP = HParams.from_config(CFG.agent)


@pytest.fixture(scope="module")
def setup():
    prep = prepare(CFG)
    datas = [prep.fold_data(k) for k in range(len(prep.folds))]
    trainer = make_train(unread_dropped(CFG))
    return prep, datas, jit_single(trainer), prep.val_len


def test_init_creates_every_field_fresh(setup):
    prep, datas, trainer, _ = setup
    runner = trainer.init(jax.random.PRNGKey(0), datas[0])
    # Every field, leaf by leaf, has the shape and dtype of the declared state (the abstract
    # evaluation of `init`): nothing is missing, None or of a stale shape.
    expected = jax.eval_shape(make_train(unread_dropped(CFG)).init,
                              jax.random.PRNGKey(0), datas[0])
    for f in dataclasses.fields(Runner):
        chex.assert_trees_all_equal_shapes_and_dtypes(getattr(runner, f.name),
                                                      getattr(expected, f.name))
        chex.assert_tree_all_finite(getattr(runner, f.name))
    chex.assert_type([runner.learner.step, runner.env_steps, runner.envs.t], jnp.int32)
    chex.assert_trees_all_equal(runner.learner.params, runner.learner.target_params)
    assert int(runner.learner.step) == 0 and int(runner.env_steps) == 0
    prefill = max(CFG.train.prefill_steps, CFG.agent.n_step)
    assert int(runner.replay.size) == int(runner.replay.pos) == prefill  # random steps only
    assert not np.any(np.asarray(runner.replay.data.reward)[prefill:])  # the rest is empty
    train = datas[0].train
    assert np.all((np.asarray(runner.envs.t) >= int(train[0]))
                  & (np.asarray(runner.envs.t) < int(train[1]) - 1))


def test_fold_two_starts_from_a_fresh_state(setup):
    """Training fold 1 leaves nothing behind: fold 2's initial state equals a fresh one."""
    prep, datas, trainer, _ = setup
    key = jax.random.PRNGKey(3)
    runner = trainer.init(jax.random.fold_in(key, 0), datas[0])
    for _ in range(CFG.train.epochs):
        runner, _ = trainer.epoch(runner, datas[0], HP)
    second = trainer.init(jax.random.fold_in(key, 1), datas[1])
    fresh = jit_single(make_train(unread_dropped(CFG))).init(
        jax.random.fold_in(key, 1), datas[1])
    chex.assert_trees_all_equal(second, fresh)


def test_epoch_updates_and_stays_finite(setup):
    _, datas, trainer, _ = setup
    runner = trainer.init(jax.random.PRNGKey(1), datas[0])
    before = runner.learner.params
    before_leaves = [np.asarray(x).copy() for x in jax.tree.leaves(before)]
    runner, metrics = trainer.epoch(runner, datas[0], HP)
    chex.assert_tree_all_finite((runner.learner, metrics))
    assert int(runner.learner.step) == CFG.train.steps_per_epoch * CFG.train.updates_per_step
    assert int(runner.env_steps) == CFG.train.steps_per_epoch
    moved = [not np.array_equal(a, np.asarray(b))
             for a, b in zip(before_leaves, jax.tree.leaves(runner.learner.params), strict=True)]
    assert all(moved)
    # every env is inside the train segment, and ε decays from eps_start
    train = datas[0].train
    t = np.asarray(runner.envs.t)
    assert np.all((t >= int(train[0])) & (t < int(train[1])))
    assert float(metrics.epsilon) < CFG.agent.eps_start


# on the flat prior, whose positions are the direction × magnitude grid checked below
ALL = dataclasses.replace(CFG, agent=dataclasses.replace(CFG.agent, backup="all"),
                          env=dataclasses.replace(CFG.env, prior="flat", view="excess"))


def test_backup_all_trains_with_finite_metrics(setup):
    """`--backup all` end to end (init, two epochs); from every stored pre-step state the
    counterfactual step of the action taken reproduces the stored reward and next features."""
    prep, datas, _, val_len = setup
    trainer = jit_single(make_train(unread_dropped(ALL)))
    runner = trainer.init(jax.random.PRNGKey(5), datas[0])
    for _ in range(ALL.train.epochs):
        runner, metrics = trainer.epoch(runner, datas[0], HP)
        chex.assert_tree_all_finite((runner.learner, metrics))
        assert float(metrics.loss) > 0 and float(metrics.td_abs) > 0
    assert int(runner.learner.step) == ALL.train.epochs * ALL.train.steps_per_epoch

    size = int(runner.replay.size)
    assert size < ALL.agent.replay_capacity  # no wrap: rows 0 … size − 1 are written
    data = jax.tree.map(lambda x: x[:size].reshape((-1,) + x.shape[2:]), runner.replay.data)
    port_t, r_t, discount_t = jax.jit(jax.vmap(
        learner.counterfactual_step, in_axes=(0, None, None, None, None)), static_argnums=2)(
        data.state_tm1, datas[0].prices, ALL.env, ALL.agent.reward_scale, HP.gamma)
    direction, magnitude = learner.position_actions(len(ALL.env.magnitudes))
    taken = ((np.asarray(direction)[None] == np.asarray(data.direction)[:, None])
             & ((np.asarray(direction)[None] == FLAT)
                | (np.asarray(magnitude)[None] == np.asarray(data.magnitude)[:, None])))
    assert np.all(taken.sum(1) == 1)
    idx = np.argmax(taken, 1)
    rows = np.arange(len(idx))
    # Equal up to float32 rounding of log(E'/E) (×100: ~1e-5), the two programs fusing apart.
    np.testing.assert_allclose(np.asarray(r_t)[rows, idx], data.reward, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.asarray(port_t)[rows, idx], data.portfolio_t, rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_array_equal(np.asarray(discount_t)[rows, idx] == 0, data.terminated)


def test_the_model_head_trains_its_forecasts_and_acts_on_the_position_grid(setup):
    """`--q-head model` (the default) end to end: the random prefill is the generic head's
    (same key, same actions: the network is not read), epochs learn with finite metrics,
    every target leaf moves under the EMA, and each greedy validation position is among the
    K positions around its bar's prior."""
    prep, datas, model, val_len = setup
    cfg = CFG
    assert cfg.net.q_head == "model"
    generic = tiny_config(n_envs=4, generic=True)
    key = jax.random.PRNGKey(21)
    runner = model.init(key, datas[0])
    plain = jax.jit(make_train(unread_dropped(generic)).init)(key, datas[0])
    np.testing.assert_array_equal(runner.replay.data.direction, plain.replay.data.direction)
    before = jax.tree.map(np.asarray, runner.learner.target_params)  # epochs donate the runner
    for _ in range(2):
        runner, metrics = model.epoch(runner, datas[0], HP)
        chex.assert_tree_all_finite((runner.learner, metrics))
    moved = jax.tree.map(lambda a, b: bool(np.any(np.asarray(a) != b)),
                         runner.learner.target_params, before)
    assert all(jax.tree.leaves(moved)), moved
    one = jax.tree.map(lambda x: x[None], runner.learner.params)
    val = model.evaluate(one, datas[0], datas[0].val[0], val_len, key)
    grid = np.asarray(model_head.position_fractions(cfg.env, val.prior))  # [bars, K]
    assert np.all((np.asarray(val.position)[:, None] == grid).any(1))
