"""Fold checkpoints (best/latest retention, exact round trip, metadata, fingerprint, export) and
the resume state's packed layout."""

import dataclasses
import functools
import gc
import math
import shutil
import time
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from safetensors.numpy import load_file

from rl_trader.agent.generic_head import QNetwork
from rl_trader.agent.heads import HEADS
from rl_trader.agent.learner import HParams, TrainState, init_train_state, make_optimizer
from rl_trader.agent.networks import Obs
from rl_trader.config import AgentConfig, NetConfig, RunConfig
from rl_trader.errors import InputError
from rl_trader.run import checkpoint
from rl_trader.run.checkpoint import (
    FoldCheckpoints,
    ResumeState,
    export_safetensors,
    fingerprint,
    flat_params,
    safetensors_metadata,
)

NET = NetConfig(q_head="generic", hidden=4, trunk=8, context=4)
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
    cfg = RunConfig(net=net_cfg)  # N_MAG magnitudes by default
    return jax.eval_shape(HEADS[net_cfg.q_head](cfg).network.init, jax.random.key(0), OBS)


@jax.jit
def advance(state: TrainState, scale: float) -> TrainState:
    """One fake Adam step so that params, target, opt_state and step all change."""
    opt = make_optimizer(AgentConfig(), HParams.from_config(AgentConfig()))
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
        assert meta == {**META, "fingerprint": fp, "epoch": 3, "val_sharpe": 0.25, "process": 0}
        assert ckpt.metadata(3) == meta
        with pytest.raises(ValueError, match="reserved"):
            FoldCheckpoints(tmp_path / "g", fp, {"fingerprint": "x"})


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b""
            for p in sorted(root.rglob("*"))}


def test_read_only_reads_and_changes_nothing(tmp_path, state0):
    fp = fingerprint(state0.params, NET, N_MAG)
    with FoldCheckpoints(tmp_path / "f", fp, META) as ckpt:
        ckpt.save(0, state0, 0.5)
    before = _tree_bytes(tmp_path)
    with FoldCheckpoints(tmp_path / "f", fp, {}, read_only=True) as ckpt:
        assert ckpt.metadata()["epoch"] == 0
        chex.assert_trees_all_equal(ckpt.restore(state0), state0)
    assert _tree_bytes(tmp_path) == before
    with pytest.raises(InputError, match="not found"):
        FoldCheckpoints(tmp_path / "missing", fp, {}, read_only=True)
    assert not (tmp_path / "missing").exists()


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
    # the model head changes it; the generic head leaves the value the fingerprint had before
    # that field existed (and since the removed `linear_path` and `embedding`)
    model = dataclasses.replace(NET, q_head="model")
    assert fingerprint(abstract_params(model), model, N_MAG) != a
    # computed at study 32's piecewise-linear VSNs (8e6cebceca32edea with per-variable GRNs)
    assert a == "25893e1e9f1b601c"
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
    header = {"fingerprint": "abc", "inference": {"normaliser": {"mean": [0.5, -1.25]}}}
    export_safetensors(params, path, metadata=header)
    assert safetensors_metadata(path) == header
    loaded = load_file(str(path))
    flat = flat_params(params)
    assert "params/market_vsn/knots" in flat
    assert set(loaded) == set(flat)
    for name, value in flat.items():
        assert loaded[name].dtype == np.float32
        np.testing.assert_array_equal(loaded[name], value)
    assert [p.name for p in path.parent.iterdir()] == ["params.safetensors"]


# A failed orbax restore abandons its other read tasks: they fail later on a closed event loop
# or are never awaited. Noise from orbax, not a second error of the restore; `_collect` makes it
# surface (captured) inside the test rather than at interpreter exit.
orbax_leftovers = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning",
    "ignore:coroutine .* was never awaited:RuntimeWarning")


def _collect() -> None:
    time.sleep(0.2)  # let tensorstore's threads finish their callbacks
    gc.collect()


def _saved_epoch(root: Path, fp: str, state) -> Path:
    """Save `state` as epoch 0 under `root`; return the epoch's `state` item directory."""
    with FoldCheckpoints(root, fp, META) as ckpt:
        ckpt.save(0, state, 0.5)
    return root.resolve() / "0" / "state"


def _damage(path, how: str) -> None:
    raw = path.read_bytes()
    if how == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    elif how == "zeros":
        path.write_bytes(bytes(len(raw)))
    else:  # one byte flipped in the middle
        b = bytearray(raw)
        b[len(b) // 2] ^= 0x01
        path.write_bytes(bytes(b))


@orbax_leftovers
@pytest.mark.parametrize("how", ["truncate", "zeros", "flip_byte"])
def test_corrupted_array_data_is_refused(tmp_path, state0, how):
    """Damaged array data of a saved epoch: restore raises one InputError ('corrupt'); the
    epoch's metadata, stored apart, still reads."""
    fp = fingerprint(state0.params, NET, N_MAG)
    item = _saved_epoch(tmp_path / "f", fp, advance(state0, 1.0))
    # The arrays live in the data files of the item's OCDBT database, `state/d/*` (the copies
    # under `ocdbt.process_0/` are not read on restore); damage the largest.
    data = sorted((p for p in (item / "d").iterdir() if p.is_file()),
                  key=lambda p: p.stat().st_size)
    assert data and data[-1].stat().st_size > 1000
    _damage(data[-1], how)
    with FoldCheckpoints(tmp_path / "f", fp, META) as ckpt:
        assert ckpt.latest_epoch() == 0
        with pytest.raises(InputError, match=r"epoch 0 is corrupt or incomplete and was not "
                                             r"loaded") as err:
            ckpt.restore(state0)
        message = str(err.value)
        del err  # its traceback holds orbax's abandoned tasks
        assert "\n" not in message and str(tmp_path) in message
        assert ckpt.metadata(0)["epoch"] == 0
    _collect()


@orbax_leftovers
def test_damage_anywhere_in_a_checkpoint_never_returns_garbage(tmp_path, state0):
    """A byte flipped in any one file of the saved `state` item: restore either refuses with
    the 'corrupt' InputError or returns exactly what was saved — never other values."""
    fp = fingerprint(state0.params, NET, N_MAG)
    saved = advance(state0, 1.0)
    pristine = _saved_epoch(tmp_path / "pristine", fp, saved).parents[1]
    # (array_metadatas/ is left out: its damage is refused too, but orbax then abandons
    # coroutines that Python reports at interpreter exit, after the test.)
    files = sorted(p.relative_to(pristine) for p in (pristine / "0" / "state").rglob("*")
                   if p.is_file() and p.parent.name != "array_metadatas")
    refused = 0
    for i, rel in enumerate(files):
        copy = tmp_path / f"copy_{i}"  # a fresh path each time: no cached reads
        shutil.copytree(pristine, copy)
        _damage(copy / rel, "flip_byte")
        with FoldCheckpoints(copy, fp, META) as ckpt:
            try:
                restored = ckpt.restore(state0)
            except InputError as err:
                assert "is corrupt or incomplete" in str(err), (rel, err)
                refused += 1
                continue
        chex.assert_trees_all_equal(restored, saved)
    _collect()
    assert refused >= 3  # at least the array data, the manifest and _METADATA are checked


def test_owned_directory_holds_the_same_arrays(tmp_path, state0):
    """A directory saved through `process=` (a fold that one process of a multi-process run
    owns; its numpy leaves written by that process) and one saved by a single-process run
    hold the same arrays: each manager kind restores both exactly."""
    fp = fingerprint(state0.params, NET, N_MAG)
    host = jax.tree.map(np.asarray, advance(state0, 1.0))  # what a multi-process run saves
    for name, process in (("owned", 0), ("shared", None)):
        with FoldCheckpoints(tmp_path / name, fp, META, process=process) as ckpt:
            ckpt.save(0, host, 0.5)
    for name in ("owned", "shared"):
        for process in (0, None):
            with FoldCheckpoints(tmp_path / name, fp, META, process=process) as ckpt:
                restored = ckpt.restore(host)
                assert ckpt.metadata()["process"] == 0
            chex.assert_trees_all_equal(restored, host)
            assert all(isinstance(x, np.ndarray) for x in jax.tree.leaves(restored))


def test_resume_state_packs_by_dtype_and_restores_exactly(tmp_path):
    """The members ([P, ...] leaves of four dtypes) are written as one [P, n] array per dtype
    and the host records as one flat array per dtype; restored into their templates, every
    leaf is exactly what was saved, and the caller's meta comes back as it was given."""
    rng = np.random.default_rng(3)
    members = {"w": jnp.asarray(rng.normal(size=(3, 2, 4)), jnp.float32),
               "t": jnp.arange(3, dtype=jnp.int32),
               "done": jnp.asarray(rng.random((3, 5)) > 0.5),
               "key": jax.random.split(jax.random.PRNGKey(1), 3),
               "b": jnp.asarray(rng.normal(size=(3,)), jnp.float32)}
    host = {"returns": rng.normal(size=(2, 3, 7)), "loss": rng.normal(size=(2, 3)).astype(
        np.float32), "none": None}
    packed = checkpoint._pack_members(members)
    assert {d: x.shape for d, x in packed.items()} == {
        "float32": (3, 9), "int32": (3, 1), "bool": (3, 5), "uint32": (3, 2)}
    state = ResumeState(tmp_path / "resume")
    state.save(4, members, host, {"epochs_done": 5})
    state.close()
    again = ResumeState(tmp_path / "resume")
    assert again.latest_epoch() == 4 and again.meta() == {"epochs_done": 5}
    zeros = jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), (members, host))
    got_members, got_host = again.restore(*zeros)
    again.close()
    chex.assert_trees_all_equal(got_members, jax.tree.map(np.asarray, members))
    chex.assert_trees_all_equal(got_host, host)
    assert all(isinstance(x, np.ndarray) for x in jax.tree.leaves((got_members, got_host)))


@pytest.mark.parametrize("rows, extra", [(3, 1), (3, -1), (4, 0)])
def test_a_resume_state_of_other_shapes_is_refused_in_one_line(tmp_path, rows, extra):
    """Templates longer or shorter than what was saved (another data length, another
    population): one InputError, never a reshape error or leaves read at wrong offsets."""
    state = ResumeState(tmp_path / "resume")
    state.save(0, {"w": jnp.ones((3, 4))}, {"v": np.ones(5), "m": np.zeros(2)}, {})
    state.close()
    again = ResumeState(tmp_path / "resume")
    with pytest.raises(InputError, match="does not fit this run's members and records"):
        again.restore({"w": np.zeros((rows, 4))}, {"v": np.zeros(5 + extra), "m": np.zeros(2)})
    again.close()


def test_an_unpacked_resume_state_is_refused_in_one_line(tmp_path):
    """A resume state of a version before the packed layout: one InputError, not a crash."""
    import orbax.checkpoint as ocp

    with ocp.CheckpointManager(tmp_path / "resume") as mngr:
        mngr.save(0, args=ocp.args.Composite(
            state=ocp.args.StandardSave({"w": np.zeros(3)}),
            meta=ocp.args.JsonSave({"epochs_done": 1})))
    state = ResumeState(tmp_path / "resume")
    with pytest.raises(InputError, match="written by an earlier version"):
        state.restore({"w": np.zeros((1, 3))}, {})
    state.close()
