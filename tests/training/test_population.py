"""The population's programs, made once per program config, and their wrappers."""

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh

from rl_trader.agent.learner import HParams
from rl_trader.baselines.oracle import oracle_rollout
from rl_trader.baselines.ridge import Forecast, forecast_val_returns
from rl_trader.baselines.suite import baseline_rollouts
from rl_trader.config import DataConfig, FoldConfig, program_config
from rl_trader.run.prepare import prepare
from rl_trader.runtime.devices import POP_AXIS
from rl_trader.training.population import (
    PROGRAMS_KEPT,
    THREEFRY_KERNELS,
    make_run_keys,
    members_of,
    programs,
    threefry_kernels,
    with_jax_settings,
)
from rl_trader.training.train import make_train
from tests.helpers import tiny_config, unread_dropped


def _cuda_text() -> str:
    """A random draw's program lowered for CUDA (possible on any machine)."""
    draw = jax.jit(lambda k: jax.random.normal(k, (8,)))
    return draw.trace(jax.random.PRNGKey(0)).lower(lowering_platforms=("cuda",)).as_text()


def test_threefry_kernels_lower_the_hash_to_the_gpu_kernel_only_inside():
    inside = threefry_kernels(_cuda_text)()
    assert "threefry2x32_ffi" in inside  # one custom call: the GPU kernel
    assert "threefry2x32_ffi" not in _cuda_text()  # outside: the inlined hash, as before


def test_with_jax_settings_on_while_called_and_restored():
    seen = []
    names = (THREEFRY_KERNELS, "jax_enable_checks")
    before = {n: getattr(jax.config, n) for n in names}

    def program(x):
        seen.append({n: getattr(jax.config, n) for n in names})
        return x + 1

    assert with_jax_settings(program, {n: not before[n] for n in names})(1) == 2
    assert seen == [{n: not before[n] for n in names}]
    assert {n: getattr(jax.config, n) for n in names} == before


def test_with_jax_settings_restored_after_an_error():
    def program(x):
        raise ValueError("boom")

    before = getattr(jax.config, THREEFRY_KERNELS)
    with pytest.raises(ValueError, match="boom"):
        threefry_kernels(program)(1)
    assert getattr(jax.config, THREEFRY_KERNELS) == before


def test_programs_are_made_once_per_program_config():
    """Runs that differ only in what `program_config` drops share one population; any other
    field or the mesh make another; the oldest beyond `PROGRAMS_KEPT` is dropped."""
    cfg = tiny_config()
    first = programs(cfg, None)
    other_run = dataclasses.replace(cfg, data=DataConfig(path="synthetic:step:1200:9"),
                                    folds=FoldConfig(n_folds=5), seed=7,
                                    sweep=(("learning_rate", (1e-3, 2e-3)),))
    assert programs(other_run, None) is first
    assert program_config(other_run) == program_config(cfg)
    epochs = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, epochs=4))
    lr = dataclasses.replace(cfg, agent=dataclasses.replace(cfg.agent, learning_rate=3e-4))
    mesh = Mesh(np.array(jax.devices()[:1]), (POP_AXIS,))
    clip = dataclasses.replace(cfg, features=dataclasses.replace(cfg.features, clip=4.0))
    made = [programs(epochs, None), programs(lr, None), programs(clip, None),
            programs(cfg, mesh), programs(dataclasses.replace(cfg, net=dataclasses.replace(
                cfg.net, hidden=4)), None)]
    assert all(p is not first for p in made) and len({id(p) for p in made}) == len(made)
    assert len(made) > PROGRAMS_KEPT  # so the first has been dropped
    assert programs(cfg, None) is not first


def test_no_program_reads_a_field_that_program_config_drops():
    """The generic head's trainer programs (tests/training/test_train.py traces the model
    head's) and the baselines' jitted functions (`rollout.jit_per_program`) trace with those fields
    unreadable (`helpers.unread_dropped`)."""
    cfg = tiny_config(generic=True)
    prep = prepare(cfg)
    data, unread = prep.fold_data(0), unread_dropped(cfg)
    trainer = make_train(unread)
    runner = jax.eval_shape(trainer.init, jax.random.PRNGKey(0), data)
    jax.eval_shape(trainer.epoch, runner, data, HParams.from_config(cfg.agent))
    length = int(data.test[1] - data.test[0])
    jax.eval_shape(partial(baseline_rollouts.__wrapped__, length=length, cfg=unread,
                           val_steps=prep.val_steps), data, data.test[0],
                   random_keys=jax.random.split(jax.random.PRNGKey(0), 2))
    jax.eval_shape(partial(oracle_rollout.__wrapped__, length=length, cfg=unread),
                   jnp.zeros(data.prices.close.shape), data, data.test[0])
    forecasts = Forecast(y_hat=jnp.zeros((2,) + data.aux_target.shape), scale=jnp.ones(2))
    jax.eval_shape(partial(forecast_val_returns.__wrapped__, val_steps=prep.val_steps,
                           cfg=unread), forecasts, data)


def test_the_run_keys_are_the_fold_ins_and_splits_they_stand_for():
    """One program draws every key of a run: each member's fold_in(fold_in(PRNGKey(s), fold),
    seed), and split(PRNGKey(s + i), n) for the validation (i = 0), test (1) and random-policy
    (2) rollouts; a prefix of a split is the smaller split (the scored folds, where one
    stopped)."""
    members = members_of(2, 1, [0, 1, 2])
    keys = make_run_keys(7, members, 2, 3, 16)
    root = jax.random.PRNGKey(7)
    want = [jax.random.fold_in(jax.random.fold_in(root, m.fold), m.seed) for m in members]
    np.testing.assert_array_equal(keys.members, np.stack(want))
    for got, seed, n in ((keys.evaluate, 7, 2), (keys.test, 8, 3), (keys.random, 9, 16)):
        np.testing.assert_array_equal(got, jax.random.split(jax.random.PRNGKey(seed), n))
    np.testing.assert_array_equal(keys.test[:2], jax.random.split(jax.random.PRNGKey(8), 2))
