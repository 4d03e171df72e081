"""The run record: what `summary.json` holds, as typed, frozen dataclasses.

`RunSummary` is a run's (or a validation-only run's, or a backtest's) summary; `FoldEntry` one
fold's figures; `Headline` the stitched test Sharpe with its selection-bias statistics;
`Performance` one strategy's metrics (`metrics.PERFORMANCE_KEYS`); `PriorFigures` the prior
and residual split; `Spa` Hansen's test. Scoring and `backtest` build them
(`run.scoring`, `run.inference`); the report, the command line and the experiments read them by
attribute.

`to_json()` gives the JSON object: fields in declaration order, a field holding `ABSENT` left
out (a key that summary never has, e.g. a synthetic market's oracle figures on real data),
tuples as lists. `from_json()` reads one back, checking every value's type against its
annotation (InputError naming the key), and is the one place where older summaries are
upgraded (`_upgrade`: a key they lack takes the value their runs had, a renamed one today's
name, a retired one is dropped). Other keys this version does not read are refused, so nothing
a file holds is silently lost.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, TypeVar

from rl_trader.errors import InputError


class Absent:
    """The type of `ABSENT`: a key the JSON object does not have (None is JSON null)."""

    _it: Absent | None = None

    def __new__(cls) -> Absent:
        if cls._it is None:
            cls._it = super().__new__(cls)
        return cls._it

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT = Absent()
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Performance:
    """One strategy's metrics over a block of bars (`evaluation.metrics.performance`)."""

    sharpe: float | Absent = ABSENT
    sortino: float | Absent = ABSENT
    max_drawdown: float | Absent = ABSENT
    calmar: float | Absent = ABSENT
    cagr: float | Absent = ABSENT
    volatility: float | Absent = ABSENT
    turnover: float | Absent = ABSENT
    hit_rate: float | Absent = ABSENT
    exposure: float | Absent = ABSENT
    n_trades: float | Absent = ABSENT


@dataclass(frozen=True, kw_only=True)
class PriorFigures:
    """The prior and the residual around it over the test bars (`metrics.prior_figures`)."""

    prior: str
    prior_mean: float
    mean_abs_residual: float
    turnover_added: float


@dataclass(frozen=True, kw_only=True)
class Spa:
    """Hansen's SPA of the agent against the baselines (`headline.superior_ability`)."""

    agent_beats: dict[str, float]
    p_agent_beats_all: float
    p_some_baseline_beats_agent: float
    block_bars: int
    reps: int


@dataclass(frozen=True, kw_only=True)
class Headline:
    """The stitched test Sharpe with PSR, DSR, MinTRL, E[max Sharpe], PBO and the SPA
    (`evaluation.headline.headline`); a backtest's has no trials (None) and no PBO by fold."""

    stitched_test_sharpe: float
    psr: float | None | Absent = ABSENT
    dsr: float | None | Absent = ABSENT
    n_trials: int | None | Absent = ABSENT
    expected_max_sharpe: float | None | Absent = ABSENT
    min_track_record_bars: float | None | Absent = ABSENT
    n_test_bars: int | Absent = ABSENT
    pbo: float | None | Absent = ABSENT
    pbo_by_fold: list[float] | Absent = ABSENT
    geo_mean_test_sharpe: float | None | Absent = ABSENT
    skew: float | Absent = ABSENT
    kurtosis: float | Absent = ABSENT
    spa: Spa | None | Absent = ABSENT


@dataclass(frozen=True, kw_only=True)
class FoldEntry:
    """One fold's figures. A scored fold has all but the optional ones; a fold stopped before
    its first checkpoint has `fold`, `best_epoch` and `test_sharpe` (None), its test block,
    `epochs` and `status`; a validation-only run's has `fold`, `epochs` and
    `best_val_sharpe_by_setting`; a backtest's has no validation-side figures."""

    fold: int
    best_epoch: int | None | Absent = ABSENT
    ensemble_seeds: int | Absent = ABSENT
    best_setting: dict[str, float] | Absent = ABSENT
    val_sharpe: float | Absent = ABSENT
    # written by `--rival` runs, before 2026-12-07: "agent", or the baseline the fold acted
    # as on test; absent: the agent acted
    acts_as: str | Absent = ABSENT
    test_sharpe: float | None | Absent = ABSENT
    buy_and_hold_test_sharpe: float | Absent = ABSENT
    checkpoint_dir: str | Absent = ABSENT
    test_start: int | Absent = ABSENT
    test_end: int | Absent = ABSENT
    market_vsn_weights: dict[str, float] | Absent = ABSENT
    portfolio_vsn_weights: dict[str, float] | Absent = ABSENT
    baseline_test_sharpes: dict[str, float] | Absent = ABSENT
    gbm_choice: dict[str, int] | Absent = ABSENT  # {} where gbm is not scored
    random_test_sharpe_mean: float | Absent = ABSENT
    random_test_sharpe_std: float | Absent = ABSENT
    metrics: dict[str, Performance] | Absent = ABSENT
    prior: PriorFigures | Absent = ABSENT
    epochs: list[dict[str, Any]] | Absent = ABSENT  # per epoch (and setting) diagnostics
    returns_file: str | Absent = ABSENT
    oracle_test_sharpe: float | Absent = ABSENT  # synthetic markets
    tree_forecast: dict[str, Any] | Absent = ABSENT  # `gbm.TreeForecastChoice.to_dict`
    trust: dict[str, float] | Absent = ABSENT  # `gbm.Trust.to_dict` (--view trusted)
    status: str | Absent = ABSENT
    best_val_sharpe_by_setting: list[float | None] | Absent = ABSENT

    @property
    def scored(self) -> bool:
        """Whether the fold has test figures."""
        return isinstance(self.test_sharpe, float | int)


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """A run's `summary.json` (or a validation-only run's, or a backtest's)."""

    backtest: bool | Absent = ABSENT
    run_dir: str | Absent = ABSENT  # a backtest's: the run it scores
    fold: int | Absent = ABSENT  # a backtest's: the fold whose policy acts
    first_date: str | Absent = ABSENT
    last_date: str | Absent = ABSENT
    bars_seen_in_training: int | Absent = ABSENT
    fold_dates: dict[str, list[str]] | Absent = ABSENT
    validation_only: bool | Absent = ABSENT
    settings: list[dict[str, float]] | Absent = ABSENT
    folds: tuple[FoldEntry, ...]
    stitched_test_sharpe: float | None | Absent = ABSENT
    stitched_buy_and_hold_test_sharpe: float | None | Absent = ABSENT
    geo_mean_test_sharpe: float | None | Absent = ABSENT
    stitched: dict[str, Performance] | Absent = ABSENT
    stitched_random: Performance | Absent = ABSENT
    stitched_random_test_sharpe_band: list[float] | Absent = ABSENT
    headline: Headline | Absent = ABSENT
    scored_folds: list[int] | Absent = ABSENT
    stitched_oracle_test_sharpe: float | Absent = ABSENT
    trials: list[dict[str, Any]] | Absent = ABSENT
    config: dict[str, Any]
    data_sha256: str | Absent = ABSENT
    data_source: str | Absent = ABSENT
    data_pool: list[str] | Absent = ABSENT
    n_bars: int | Absent = ABSENT
    periods_per_year: float | Absent = ABSENT
    feature_names: list[str] | Absent = ABSENT
    device: str | Absent = ABSENT
    fingerprint: str | Absent = ABSENT
    stopped: list[str] | Absent = ABSENT

    def to_json(self) -> dict:
        """The summary.json object (`to_json`)."""
        return to_json(self)

    @classmethod
    def from_json(cls, obj: object, where: str = "summary.json") -> RunSummary:
        """`obj` (a parsed summary.json, of any version) as a record (`from_json`), older
        summaries upgraded (`_upgrade`); InputError naming `where` and the key."""
        return from_json(cls, _upgrade(obj), where)


def to_json(record: object) -> Any:
    """A record (or a value inside one) as JSON-ready Python: dataclasses as dicts in field
    order without their `ABSENT` fields, tuples as lists."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {f.name: to_json(v) for f in dataclasses.fields(record)
                if (v := getattr(record, f.name)) is not ABSENT}
    if isinstance(record, list | tuple):
        return [to_json(v) for v in record]
    if isinstance(record, dict):
        return {k: to_json(v) for k, v in record.items()}
    return record


def from_json(cls: type[T], obj: object, where: str) -> T:
    """`obj` (parsed JSON) as a `cls` record; InputError naming `where` (e.g. the file) and
    the first key whose value does not fit its annotation, or that `cls` does not know, e.g.
    "runs/x/summary.json: headline.dsr is 'high', not a number or null"."""
    try:
        return _decode(obj, cls, "")
    except _Wrong as err:
        raise InputError(f"{where}: {err}") from None


class _Wrong(Exception):
    """A value that does not fit its annotation (`from_json` names the file)."""


def _decode(value: object, hint: Any, path: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):  # the member of the value's JSON kind
        kinds = [a for a in args if a is not Absent and _kind(a) == _kind(type(value))]
        if not kinds:
            raise _wrong(value, hint, path)
        if _kind(kinds[0]) in ("object", "array"):  # an error inside it names its own key
            return _decode(value, kinds[0], path)
        try:
            return _decode(value, kinds[0], path)
        except _Wrong:
            raise _wrong(value, hint, path) from None
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise _wrong(value, hint, path)
        fields = {f.name: f for f in dataclasses.fields(hint)}
        if unknown := [k for k in value if k not in fields]:
            raise _Wrong(f"{_key(path, unknown[0])} is not a key this version reads")
        hints = typing.get_type_hints(hint)
        kw = {}
        for name, f in fields.items():
            if name in value:
                kw[name] = _decode(value[name], hints[name], _key(path, name))
            elif f.default is dataclasses.MISSING:
                raise _Wrong(f"{_key(path, name)} is missing")
        return hint(**kw)
    if origin in (tuple, list):
        if not isinstance(value, list | tuple):
            raise _wrong(value, hint, path)
        items = [_decode(v, args[0], f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise _wrong(value, hint, path)
        return {k: _decode(v, args[1], _key(path, k)) for k, v in value.items()}
    if hint is Any or (hint is type(None) and value is None):
        return value
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return value
    if hint in (int, str, bool) and isinstance(value, hint) and (
            isinstance(value, bool) == (hint is bool)):
        return value
    raise _wrong(value, hint, path)


def _kind(hint: Any) -> str:
    """The JSON kind of an annotation or a value's type: object, array, number, ..."""
    hint = typing.get_origin(hint) or hint
    if dataclasses.is_dataclass(hint) or hint is dict:
        return "object"
    return {list: "array", tuple: "array", float: "number", int: "number", str: "string",
            bool: "boolean", type(None): "null"}.get(hint, "any")


def _key(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


_NAMES = {float: "a number", int: "an integer", str: "a string", bool: "true or false",
          type(None): "null", list: "a list", tuple: "a list", dict: "an object"}


def _wrong(value: object, hint: Any, path: str) -> _Wrong:
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    return _Wrong(f"{path or 'the summary'} is {shown}, not {_name(hint)}")


def _name(hint: Any) -> str:
    """An annotation in words: `float | None` → 'a number or null'."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_name(a) for a in typing.get_args(hint) if a is not Absent)
    if dataclasses.is_dataclass(hint):
        return "an object"
    return _NAMES.get(typing.get_origin(hint) or hint, str(hint))


# Keys of a fold that older summaries wrote and this version does not: dropped on reading.
_FOLD_RETIRED = ("best_seed",  # the chosen seed's index, before seed ensembles (2026-11-30)
                 # the rival's validation evidence (`--rival`, before 2026-12-07)
                 "vol_target_val_sharpe", "vol_target_val_edge_t", "val_returns_file")
# Keys of the SPA that older summaries named otherwise: their name then → now (2026-12-03).
_SPA_RENAMED = {"p_no_baseline_beats_agent": "p_some_baseline_beats_agent"}


def _upgrade(obj: object) -> object:
    """`obj` as this version reads it: the keys older summaries wrote under another name
    renamed (`_SPA_RENAMED`) and the retired ones dropped (`_FOLD_RETIRED`)."""
    if not isinstance(obj, dict):
        return obj
    out = dict(obj)
    if isinstance(out.get("folds"), list):
        out["folds"] = [_fold(f) for f in out["folds"]]
    head = out.get("headline")
    if isinstance(head, dict) and isinstance(head.get("spa"), dict):
        spa = {_SPA_RENAMED.get(k, k): v for k, v in head["spa"].items()}
        out["headline"] = {**head, "spa": spa}
    return out


def _fold(f: object) -> object:
    """One fold entry of an older summary as this version writes it (`_upgrade`)."""
    if not isinstance(f, dict):
        return f
    return {k: v for k, v in f.items() if k not in _FOLD_RETIRED}
