"""Per-fold checkpoints (orbax), the architecture fingerprint and the safetensors export.

A fold directory holds one orbax step directory per kept epoch, `<fold_dir>/<epoch>/`, each with
the items `state` (a pytree of arrays in orbax's PyTree format — a run's fold checkpoints hold
the ensemble's acting params, `HOLDS_ACTING`; epochs saved before that, its learner state —
written by `StandardSave`, or by `PyTreeSave` in a directory that one process of a
multi-process run owns), `meta` (JSON: the caller's metadata plus `fingerprint`, `epoch`,
`val_sharpe`, `process`) and orbax's own `metrics` (the sanitised validation Sharpe).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
import tensorstore as ts
from safetensors import safe_open
from safetensors.numpy import save_file

from rl_trader.config import NetConfig
from rl_trader.errors import InputError

_RESERVED = ("fingerprint", "epoch", "val_sharpe", "process")
# A fold checkpoint's "holds" metadata: the ensemble's acting parameters only (the online
# params, what scoring, `predict` and `backtest` use). Epochs saved without it (before
# 2026-11-30) hold the whole learner state: online and target params and Adam's
# moments, four times the arrays; `FoldCheckpoints.restore_acting` reads both.
HOLDS_ACTING = "acting_params"


def _flat(tree: Any) -> dict[str, Any]:
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    flat = {jax.tree_util.keystr(p, simple=True, separator="/"): v for p, v in leaves}
    if len(flat) != len(leaves):
        raise ValueError("two parameter paths flatten to the same name")
    return flat


def flat_params(params: Any) -> dict[str, np.ndarray]:
    """Leaves by '/'-joined tree path, e.g. 'params/market_vsn/knots' for Flax
    variables. The one flattening used by the fingerprint and the export."""
    return {k: np.asarray(v) for k, v in _flat(params).items()}


UNHASHED = ("precision",)
# NetConfig fields added later, hashed only away from the value runs had before them (the
# removed `embedding` was hashed only away from "none": runs without it keep their hash)
HASHED_UNLESS = {"q_head": "generic"}


def fingerprint(params: Any, net_cfg: NetConfig, n_magnitudes: int) -> str:
    """Stable hash (16 hex chars) of the params' (path, shape, dtype) and the network config.

    Independent of the parameter values (abstract `jax.eval_shape` trees work too); changes with
    any leaf's path, shape or dtype, any `NetConfig` field but those that leave the params'
    structure and meaning alone (`UNHASHED`: the matmul precision, the params being float32
    in every case), or the number of magnitudes. A field
    added later is hashed only away from the value runs had before it (`HASHED_UNLESS`), so
    runs saved before it existed keep their fingerprint.
    """
    leaves = sorted((k, list(v.shape), str(np.dtype(v.dtype))) for k, v in _flat(params).items())
    net = {k: v for k, v in dataclasses.asdict(net_cfg).items()
           if k not in UNHASHED and HASHED_UNLESS.get(k, object()) != v}
    blob = json.dumps({"leaves": leaves, "net": net,
                       "n_magnitudes": int(n_magnitudes)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _score(metrics: dict) -> float:
    """Selection score of a saved epoch: its validation Sharpe (NaN was stored as -inf)."""
    return float(metrics["val_sharpe"])


class _CallerWritesNumpy(ocp.type_handlers.NumpyHandler):
    """orbax's `NumpyHandler`, except that the process calling `serialize` writes the arrays.

    orbax takes numpy leaves to be replicated on every process and writes them from process 0
    only (`if multihost.process_index() == 0` in `NumpyHandler._background_serialize`), so a
    manager used by process 1 alone would commit a checkpoint without its arrays. Only for
    managers that one process uses alone. The arrays are stored as orbax stores them (same
    `np.ndarray` type name, tensorstore spec and per-process OCDBT directory, merged by the
    manager's primary host), so reading is orbax's own and either kind of manager reads them.
    Built from the public `ocp.type_handlers` helpers, present in orbax 0.12.4 and 0.12.8.
    """

    async def serialize(self, values: Sequence[np.ndarray],
                        infos: Sequence[ocp.type_handlers.ParamInfo],
                        args: Sequence[ocp.type_handlers.SaveArgs] | None = None,
                        ) -> list[ocp.future.Future]:
        args = args or [ocp.type_handlers.SaveArgs()] * len(values)
        ocp.type_handlers.check_input_arguments(values, infos, args)
        copies = [np.array(v) for v in values]  # the caller may change its arrays meanwhile
        return [ocp.future.CommitFutureAwaitingContractedSignals(
            _write_arrays(copies, infos, args), name="caller_numpy")]


async def _write_arrays(values: Sequence[np.ndarray],
                        infos: Sequence[ocp.type_handlers.ParamInfo],
                        args: Sequence[ocp.type_handlers.SaveArgs]) -> None:
    """Write each array where orbax's `NumpyHandler` would (run in orbax's commit thread)."""

    async def write(value: np.ndarray, info: ocp.type_handlers.ParamInfo,
                    arg: ocp.type_handlers.SaveArgs) -> None:
        await info.await_path_creation()
        ocdbt = bool(info.is_ocdbt_checkpoint)
        spec = ocp.type_handlers.get_json_tspec_write(
            info, use_ocdbt=ocdbt, global_shape=value.shape, local_shape=value.shape,
            dtype=value.dtype, process_index=ocp.multihost.process_index() if ocdbt else None,
            arg=arg)
        spec = ocp.type_handlers.get_cast_tspec_serialize(spec, value, arg)
        store = await ts.open(ts.Spec(spec), create=True, open=True, context=info.ts_context)
        await store.write(value)

    await asyncio.gather(*map(write, values, infos, args))


# Background writes, but step directories created in the calling thread: orbax's background
# creation signals other processes through per-process operation counters, which diverge when
# each fold's manager is used by one process only (folds not divisible by the processes).
_ASYNC = ocp.options.AsyncOptions(create_directories_asynchronously=False)


class FoldCheckpoints:
    """orbax CheckpointManager for one fold directory: keeps the two best epochs by validation
    Sharpe and the latest epoch.

    The runner-up is kept so that a run killed right after saving a new best (which would
    otherwise delete the previous best) still has its previous best when `--resume` removes
    the unfinished epoch and trains it again.

    Retention uses a preservation policy, `AnyPreservationPolicy([BestN(n=2), LatestN(n=1)])`:
    the legacy `max_to_keep` + `best_fn` pair keeps only the top `max_to_keep` by metric, so the
    latest epoch would be deleted whenever it is not among the best. `best_fn` is still set
    (without `max_to_keep`, which orbax forbids next to a policy) because `best_step()` needs it.
    Both the policy classes and this combination are identical in orbax 0.12.4 and 0.12.8.
    Saving is asynchronous: `save` returns once orbax has the arrays (host numpy, not to be
    changed afterwards) and the write continues in the background, so several folds' saves
    overlap each other and the next epoch; `wait` blocks until they are committed, and every
    reading method waits first, so a read always sees the saves made before it.

    In a multi-process run each fold directory has one owning process, which alone saves to it
    (`process=`): the manager then synchronises with no other process, is its own primary host
    (it writes orbax's metadata, merges the OCDBT store and commits the step), and writes its
    numpy leaves through `_CallerWritesNumpy` (orbax's own `NumpyHandler` would leave them to
    process 0). The arrays on disk are the same either way, so a directory written with or
    without `process` reads with either. Every saved epoch records the writing process in its
    metadata (`process`).
    """

    def __init__(self, directory: str | Path, fingerprint: str, metadata: dict,
                 process: int | None = None, read_only: bool = False) -> None:
        """`process`: in a multi-process run, the one process that uses this manager (the
        fold's owner to save; any process to read once the owner's saves are done).
        `read_only`: only read an existing directory; nothing in it is created or changed."""
        self.directory = Path(directory).expanduser().resolve()
        self._fingerprint = fingerprint
        bad = [k for k in _RESERVED if k in metadata]
        if bad:
            raise ValueError(f"metadata keys {bad} are reserved for the checkpoint")
        self._meta = json.loads(json.dumps(metadata))  # json-able check; tuples become lists
        self._solo = process is not None
        cm = ocp.checkpoint_managers
        keep = cm.AnyPreservationPolicy([
            cm.BestN(get_metric_fn=_score, reverse=False, n=2),  # ascending: keeps the max
            cm.LatestN(n=1)])
        solo, handlers = {}, None
        if process is not None:
            mp = ocp.options.MultiprocessingOptions(primary_host=process,
                                                    active_processes={process})
            # numpy leaves written by this process; jax.Array leaves as orbax writes them
            registry = ocp.type_handlers.create_type_handler_registry(
                (np.ndarray, _CallerWritesNumpy()),
                (jax.Array, ocp.type_handlers.ArrayHandler(primary_host=process)))
            solo = {"multiprocessing_options": mp}
            handlers = {"state": ocp.PyTreeCheckpointHandler(multiprocessing_options=mp,
                                                             type_handler_registry=registry),
                        "meta": ocp.JsonCheckpointHandler(multiprocessing_options=mp)}
            # orbax creates the root only when every process takes part
            self.directory.mkdir(parents=True, exist_ok=True)
        if read_only and not self.directory.is_dir():
            raise InputError(f"checkpoint directory {self.directory} not found")
        options = ocp.CheckpointManagerOptions(
            best_fn=_score, best_mode="max", preservation_policy=keep,
            create=process is None and not read_only, read_only=read_only,
            enable_async_checkpointing=True, async_options=_ASYNC, **solo)
        absl = logging.getLogger("absl")
        level = absl.level
        if read_only:  # orbax warns that read-only options turn saving off: that is the point
            absl.setLevel(logging.ERROR)
        try:
            self._mngr = ocp.CheckpointManager(self.directory, options=options,
                                               item_handlers=handlers)
        finally:
            absl.setLevel(level)

    def save(self, epoch: int, state: Any, val_sharpe: float, extra: dict | None = None) -> None:
        """Start saving `state` (any pytree of arrays) as `epoch` (`wait`: until it is on disk).

        `extra` (json-able) is stored in this epoch's metadata beside the fixed metadata.
        """
        v = float(val_sharpe)
        meta = {**self._meta, **(extra or {}), "fingerprint": self._fingerprint,
                "epoch": int(epoch), "val_sharpe": None if math.isnan(v) else v,
                "process": jax.process_index()}
        item = ocp.args.PyTreeSave(state) if self._solo else ocp.args.StandardSave(state)
        args = ocp.args.Composite(state=item, meta=ocp.args.JsonSave(meta))
        metrics = {"val_sharpe": -math.inf if math.isnan(v) else v}
        saved = self._mngr.save(int(epoch), args=args, metrics=metrics)
        if not saved:
            raise InputError(f"checkpoint {self.directory}: epoch {epoch} not saved: "
                             f"it must come after the latest epoch {self.latest_epoch()}")

    def wait(self) -> None:
        """Block until every save started so far is committed on disk."""
        self._mngr.wait_until_finished()

    def best_epoch(self) -> int | None:
        """Epoch with the highest validation Sharpe (NaN counts as -inf); None if none saved."""
        self.wait()
        return self._mngr.best_step()

    def latest_epoch(self) -> int | None:
        """Most recent saved epoch; None if none saved."""
        self.wait()
        return self._mngr.latest_step()

    def saved_epochs(self) -> list[int]:
        """Every epoch kept on disk, in order."""
        self.wait()
        return sorted(int(e) for e in self._mngr.all_steps())

    def _epoch(self, epoch: int | None) -> int:
        steps = self.saved_epochs()
        if epoch is None:
            epoch = self.best_epoch()
        if epoch is None or epoch not in steps:
            want = "any epoch" if epoch is None else f"epoch {epoch}"
            raise InputError(f"checkpoint {self.directory} has no {want} (saved: {steps})")
        return int(epoch)

    def metadata(self, epoch: int | None = None) -> dict:
        """Stored metadata of `epoch` (default: the best): the caller's dict plus
        'fingerprint', 'epoch', 'val_sharpe' (None for NaN) and 'process' (the writer's index;
        absent from epochs saved before it was recorded)."""
        epoch = self._epoch(epoch)
        args = ocp.args.Composite(meta=ocp.args.JsonRestore())
        return dict(_restore(self._mngr, epoch, args, self.directory)["meta"])

    def restore(self, template: Any, epoch: int | None = None, partial: bool = False) -> Any:
        """Restore `epoch` (default: the best) into `template`'s structure, after checking the
        stored fingerprint against this network's; with `partial`, `template` may name a part
        of what the epoch holds (a dict of some of its top-level entries), and only that part
        is read."""
        epoch = self._epoch(epoch)
        stored = self.metadata(epoch).get("fingerprint")
        if stored != self._fingerprint:
            raise InputError(
                f"checkpoint {self.directory} epoch {epoch} has fingerprint {stored}, this "
                f"network has {self._fingerprint}: the architecture differs")
        if self._solo or partial:
            item = ocp.args.PyTreeRestore(
                item=template, restore_args=ocp.checkpoint_utils.construct_restore_args(template),
                **({"partial_restore": True} if partial else {}))
        else:
            item = ocp.args.StandardRestore(template)
        args = ocp.args.Composite(state=item)
        return _restore(self._mngr, epoch, args, self.directory)["state"]

    def restore_acting(self, learner: Any, epoch: int | None = None) -> Any:
        """The acting (online) params of `epoch` (default: the best),
        `learner` being a learner-state template: restored alone from an epoch that holds them
        (`HOLDS_ACTING`), or read alone from the whole learner state an older epoch holds (its
        `params` entry; the optimiser state beside it, of whatever form that version's
        optimiser had, is not read)."""
        if self.metadata(epoch).get("holds") == HOLDS_ACTING:
            return self.restore(learner.params, epoch)
        return self.restore({"params": learner.params}, epoch, partial=True)["params"]

    def delete_after(self, epoch: int) -> None:
        """Remove saved epochs > `epoch` (left by a run killed before its resume point)."""
        for step in self.saved_epochs():
            if step > epoch:
                self._mngr.delete(step)

    def close(self) -> None:
        """Wait for pending work and release the manager."""
        self._mngr.wait_until_finished()
        self._mngr.close()

    def __enter__(self) -> FoldCheckpoints:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _restore(mngr: ocp.CheckpointManager, step: int, args: Any, directory: Path) -> Any:
    """orbax restore; a damaged or partly written checkpoint becomes one clear InputError.

    orbax writes a step into a temporary directory and renames it when complete, so a save cut
    short is never listed; a listed step that fails to read has been damaged afterwards.
    """
    try:
        return mngr.restore(step, args=args)
    except InputError:
        raise
    except Exception as err:  # orbax/tensorstore raise many types for unreadable data
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"checkpoint {directory} epoch {step} is corrupt or incomplete and "
                         f"was not loaded: {first[:200]}") from None


def _dtype_groups(leaves: Sequence[Any]) -> dict[str, list[int]]:
    """Leaf indices by dtype name, in leaf order (the packed arrays' order and layout)."""
    groups: dict[str, list[int]] = {}
    for i, x in enumerate(leaves):
        groups.setdefault(np.dtype(x.dtype).name, []).append(i)
    return groups


@jax.jit
def _pack_members(members: Any) -> dict[str, jax.Array]:
    """A pytree of [P, ...] arrays → one [P, n_d] array per dtype d: each leaf's rows
    flattened and laid side by side in leaf order (`_unpack`). The population axis keeps its
    sharding, so each process still holds (and writes) its own rows."""
    leaves = jax.tree.leaves(members)
    return {d: jax.numpy.concatenate([leaves[i].reshape(leaves[i].shape[0], -1) for i in idx],
                                     axis=1)
            for d, idx in _dtype_groups(leaves).items()}


def _pack_host(tree: Any) -> dict[str, np.ndarray]:
    """A pytree of host arrays → one flat array per dtype (`_unpack` with `rows=False`)."""
    leaves = [np.asarray(x) for x in jax.tree.leaves(tree)]
    return {d: np.concatenate([leaves[i].ravel() for i in idx])
            for d, idx in _dtype_groups(leaves).items()}


def _packed_template(template: Any, rows: bool) -> dict[str, np.ndarray]:
    """Zeros shaped as `_pack_members` (`rows`) or `_pack_host` would pack `template`."""
    leaves = jax.tree.leaves(template)
    lead = (leaves[0].shape[0],) if rows else ()
    return {d: np.zeros(lead + (sum(math.prod(leaves[i].shape[len(lead):]) for i in idx),),
                        np.dtype(d))
            for d, idx in _dtype_groups(leaves).items()}


def _shapes(packed: dict[str, dict[str, Any]]) -> dict[str, dict[str, list[int]]]:
    """The shapes of packed arrays by part and dtype, as saved in the resume state's JSON."""
    return {part: {d: list(np.shape(x)) for d, x in arrays.items()}
            for part, arrays in packed.items()}


def _unpack(packed: dict[str, np.ndarray], template: Any, rows: bool) -> Any:
    """Inverse of `_pack_members` (`rows`: [P, n_d] arrays) or `_pack_host`: host numpy
    leaves shaped as `template`'s."""
    leaves = jax.tree.leaves(template)
    lead = (leaves[0].shape[0],) if rows else ()
    out: list[Any] = [None] * len(leaves)
    for d, idx in _dtype_groups(leaves).items():
        start = 0
        for i in idx:
            n = math.prod(leaves[i].shape[len(lead):])
            out[i] = np.asarray(packed[d])[..., start:start + n].reshape(leaves[i].shape)
            start += n
    return jax.tree.unflatten(jax.tree.structure(template), out)


class ResumeState:
    """The latest complete epoch of a whole run — every member's state (learner, envs, replay,
    PRNG key) plus the host's records — for `--resume`. Only the latest epoch is kept.

    Saving is asynchronous. `save` returns once the arrays are copied to the host; the write
    to disk continues in the background (the next epoch trains meanwhile) and `wait` returns
    when it is committed. The members' leaves are written packed, one [P, n] array per dtype
    (the host records likewise, one flat array per dtype): orbax's cost is per array, and a
    tiny run's resume writes took 0.4–0.5 s an epoch on a 2-core CPU as some 200 arrays
    (2026-12-03). The packed members keep their sharding: each process writes the rows on its
    own devices, so nothing is gathered to one host. Host numpy leaves are written by process
    0. Packing holds a second copy of the members' state on the devices until it is copied
    to the host (`save`): a run that leaves less free device memory than its state needs
    runs out of it here.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).expanduser().resolve()
        options = ocp.CheckpointManagerOptions(max_to_keep=1, create=True,
                                               enable_async_checkpointing=True,
                                               async_options=_ASYNC)
        self._mngr = ocp.CheckpointManager(self.directory, options=options)

    def save(self, epoch: int, members: Any, host: Any, meta: dict) -> None:
        """Start writing epoch `epoch` (after the previous save is committed): `members` a
        pytree of [P, ...] device arrays, `host` one of host numpy arrays (packed into new
        arrays here: the caller may change them once `save` returns)."""
        state = {"members": _pack_members(members), "host": _pack_host(host)}
        args = ocp.args.Composite(state=ocp.args.StandardSave(state),
                                  meta=ocp.args.JsonSave({**meta, "packed": _shapes(state)}))
        self._mngr.save(int(epoch), args=args, force=True)

    def wait(self) -> None:
        """Block until the last save is committed on disk."""
        self._mngr.wait_until_finished()

    def latest_epoch(self) -> int | None:
        """The epoch of the latest committed resume state; None if none."""
        return self._mngr.latest_step()

    def meta(self) -> dict:
        """The JSON saved with the latest epoch (the caller's `meta` of `save`)."""
        meta = self._saved_meta()
        meta.pop("packed", None)
        return meta

    def _saved_meta(self) -> dict:
        args = ocp.args.Composite(meta=ocp.args.JsonRestore())
        return dict(_restore(self._mngr, self.latest_epoch(), args, self.directory)["meta"])

    def restore(self, members: Any, host: Any) -> tuple[Any, Any]:
        """The latest epoch's (members, host) as host numpy leaves, shaped and typed as the
        templates `members` ([P_saved, ...]) and `host`. A state written unpacked, by a
        version before 2026-12-03, is refused in one line (InputError)."""
        saved = self._saved_meta().get("packed")
        if not saved:
            raise InputError(f"option --resume: the resume state in {self.directory} was "
                             "written by an earlier version (unpacked); start a new run, or "
                             "resume it with that version")
        template = {"members": _packed_template(members, rows=True),
                    "host": _packed_template(host, rows=False)}
        want = _shapes(template)
        if saved != want:  # checked first: unpacking at other offsets would misread leaves
            raise InputError(f"option --resume: the resume state in {self.directory} does not "
                             f"fit this run's members and records (saved {saved}, expected "
                             f"{want}); start a new run, or resume it with the version and "
                             "data it was written with")
        args = ocp.args.Composite(state=ocp.args.StandardRestore(template))
        state = _restore(self._mngr, self.latest_epoch(), args, self.directory)["state"]
        return (_unpack(state["members"], members, rows=True),
                _unpack(state["host"], host, rows=False))

    def close(self) -> None:
        self._mngr.wait_until_finished()
        self._mngr.close()


def export_safetensors(params: Any, path: str | Path, metadata: dict | None = None) -> None:
    """Write `params` as float32 tensors named by `flat_params`, atomically (temp + replace).

    `metadata` (JSON-able values) goes into the file's header, each value JSON-encoded (the
    header holds strings only); `safetensors_metadata` decodes it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: np.ascontiguousarray(v, dtype=np.float32)
               for k, v in flat_params(params).items()}
    header = {str(k): json.dumps(v) for k, v in (metadata or {}).items()}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=header)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def safetensors_metadata(path: str | Path) -> dict:
    """The header metadata of a file written by `export_safetensors`, each value JSON-decoded."""
    with safe_open(str(path), framework="numpy") as f:
        return {k: json.loads(v) for k, v in (f.metadata() or {}).items()}
