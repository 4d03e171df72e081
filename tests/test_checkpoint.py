"""Fold checkpoints: best/latest retention, exact round trip, metadata, fingerprint, export."""

import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from safetensors.numpy import load_file

from rl_trader.agent import TrainState, init_train_state, make_optimizer
from rl_trader.checkpoint import FoldCheckpoints, export_safetensors, fingerprint, flat_params
from rl_trader.config import AgentConfig, NetConfig
from rl_trader.errors import InputError
from rl_trader.networks import Obs, QNetwork

NET = NetConfig(hidden=4, trunk=8, context=4)
N_MAG = 4
OBS = Obs(market=jnp.zeros(5), window=jnp.zeros((3, 5)), portfolio=jnp.zeros(5))
META = {"config": {"net": {"hidden": 4}, "lr": 3e-4, "magnitudes": [0.5, 1.0]},
        "folds": [{"train": [0, 100], "val": [110, 150], "test": [160, 200]}],
        "data_sha256": "ab" * 32}


_init = jax.jit(lambda key: QNetwork(NET, N_MAG).init(key, OBS))  # compiled once (CPU: ~3 s)


@functools.cache
def init_params(seed: int = 0):
    """Real `QNetwork(NET)` params initialised with an `Obs` of zeros."""
    return _init(jax.random.key(seed))


def abstract_params(net_cfg: NetConfig):
    return jax.eval_shape(QNetwork(net_cfg, N_MAG).init, jax.random.key(0), OBS)


@jax.jit
def advance(state: TrainState, scale: float) -> TrainState:
    """One fake Adam step so that params, target, opt_state and step all change."""
    opt = make_optimizer(AgentConfig())
    grads = jax.tree.map(lambda p: jnp.full_like(p, scale), state.params)
    updates, opt_state = opt.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return TrainState(params=params, target_params=jax.tree.map(lambda p: p * 0.5, params),
                      opt_state=opt_state, step=state.step + 1)


@pytest.fixture(scope="module")
def state0() -> TrainState:
    return jax.jit(init_train_state, static_argnums=1)(init_params(), AgentConfig())


def test_keeps_best_and_latest_and_restores_exactly(tmp_path, state0):
    fp = fingerprint(state0.params, NET, N_MAG)
    ckpt = FoldCheckpoints(tmp_path / "fold_0", fp, META)
    states, state = {}, state0
    for epoch, sharpe in enumerate((0.1, 0.9, 0.3)):
        state = advance(state, float(epoch + 1))
        states[epoch] = state
        ckpt.save(epoch, state, sharpe)
    assert ckpt.best_epoch() == 1
    assert ckpt.latest_epoch() == 2
    best = ckpt.restore(state0)
    assert isinstance(best, TrainState)
    chex.assert_trees_all_equal(best, states[1])
    assert not np.array_equal(best.step, states[2].step)
    chex.assert_trees_all_equal(ckpt.restore(state0, epoch=2), states[2])
    with pytest.raises(InputError, match="no epoch 0"):
        ckpt.restore(state0, epoch=0)
    ckpt.close()
    root = (tmp_path / "fold_0").resolve()
    assert (root / "1").is_dir() and (root / "2").is_dir()
    assert not (root / "0").exists()
    # a fresh manager over the same directory (resume) sees the same epochs
    with FoldCheckpoints(root, fp, META) as again:
        assert (again.best_epoch(), again.latest_epoch()) == (1, 2)
        chex.assert_trees_all_equal(again.restore(state0), states[1])


def test_metadata_round_trip(tmp_path, state0):
    fp = fingerprint(state0.params, NET, N_MAG)
    with FoldCheckpoints(str(tmp_path / "f"), fp, META) as ckpt:
        ckpt.save(3, state0, 0.25)
        meta = ckpt.metadata()
        assert meta == {**META, "fingerprint": fp, "epoch": 3, "val_sharpe": 0.25}
        assert ckpt.metadata(3) == meta
        with pytest.raises(ValueError, match="reserved"):
            FoldCheckpoints(tmp_path / "g", fp, {"fingerprint": "x"})


def test_fingerprint_stable_and_architecture_sensitive(tmp_path, state0):
    a = fingerprint(init_params(seed=0), NET, N_MAG)
    b = fingerprint(init_params(seed=1), NET, N_MAG)
    assert a == b and len(a) == 16
    assert fingerprint(abstract_params(NET), NET, N_MAG) == a
    wider = NetConfig(hidden=6, trunk=8, context=4)
    other_params = abstract_params(wider)
    c = fingerprint(other_params, wider, N_MAG)
    assert c != a
    assert fingerprint(state0.params, NET, N_MAG + 1) != a
    half = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, jnp.float16), other_params)
    assert fingerprint(half, wider, N_MAG) != c
    with FoldCheckpoints(tmp_path / "f", a, META) as ckpt:
        ckpt.save(0, state0, 0.5)
    template = jax.eval_shape(lambda p: init_train_state(p, AgentConfig()), other_params)
    with FoldCheckpoints(tmp_path / "f", c, META) as ckpt:
        with pytest.raises(InputError, match="architecture differs") as err:
            ckpt.restore(template)
    assert a in str(err.value) and c in str(err.value)


def test_nan_sharpe_never_best(tmp_path, state0):
    fp = fingerprint(state0.params, NET, N_MAG)
    with FoldCheckpoints(tmp_path / "f", fp, META) as ckpt:
        ckpt.save(0, state0, -5.0)
        ckpt.save(1, advance(state0, 1.0), math.nan)
        assert (ckpt.best_epoch(), ckpt.latest_epoch()) == (0, 1)
        assert ckpt.metadata(1)["val_sharpe"] is None
        ckpt.save(2, advance(state0, 2.0), float("nan"))
        assert (ckpt.best_epoch(), ckpt.latest_epoch()) == (0, 2)
        chex.assert_trees_all_equal(ckpt.restore(state0), state0)
    with FoldCheckpoints(tmp_path / "g", fp, META) as ckpt:
        ckpt.save(0, state0, math.nan)
        assert ckpt.best_epoch() == 0  # all NaN: still restorable


def test_export_safetensors(tmp_path):
    params = init_params()
    path = tmp_path / "out" / "params.safetensors"
    export_safetensors(params, path, metadata={"fingerprint": "abc"})
    loaded = load_file(str(path))
    flat = flat_params(params)
    assert "params/market_vsn/variables/w1_kernel" in flat
    assert set(loaded) == set(flat)
    for name, value in flat.items():
        assert loaded[name].dtype == np.float32
        np.testing.assert_array_equal(loaded[name], value)
    assert [p.name for p in path.parent.iterdir()] == ["params.safetensors"]
