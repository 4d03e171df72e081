"""Frozen configuration dataclasses: one per pipeline stage, gathered in `RunConfig`.

Every field is declared once, with `option(...)`: its default, its help text, its command-line
flag (default `--field-name`), its allowed choices and whether a population may sweep it. The
CLI (`rl_trader.cli.options`) and the sweepable names (`SWEEPABLE`) are derived from these
declarations; the learner's traced hyper-parameters (`agent.learner.HParams`) declare one field per
sweepable name, which a test keeps equal.

Every config is hashable and static under `jit`. `validate()` checks ranges and raises
`InputError` naming the option and its allowed range.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from rl_trader.errors import InputError


def option(default: Any, help: str, *, flag: str | None = None, sweep: bool = False,
           choices: tuple[str, ...] | None = None) -> Any:
    """A config field declared once: default, help, CLI flag (None: `--field-name`), allowed
    choices, and `sweep=True` when it is a traced hyper-parameter a population may sweep."""
    return field(default=default, metadata={"help": help, "flag": flag, "sweep": sweep,
                                            "choices": choices})


def flag_of(f: dataclasses.Field) -> str:
    """The command-line flag of a config field."""
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def _check(cond: bool, option: str, allowed: str, value: object) -> None:
    """Refuse `value` of `option` unless `cond`; NaN and ±inf never pass for a number."""
    values = value if isinstance(value, tuple) else (value,)
    if any(isinstance(v, float) and not math.isfinite(v) for v in values):
        cond = False
    if not cond:
        raise InputError(f"option {option}={value!r} is out of range: must be {allowed}")


def _flag(cls: type, name: str) -> str:
    return flag_of(next(f for f in dataclasses.fields(cls) if f.name == name))


@dataclass(frozen=True)
class DataConfig:
    """Where the bars come from."""

    path: str | None = option(
        None, "OHLCV file (CSV, CSV.gz or Parquet) or synthetic:NAME[:N[:SEED]]; default: "
        "the embedded S&P 500 daily bars. A comma-separated list pools instruments: the first "
        "is traded, validated and tested, the others only add training episodes from their "
        "bars in each fold's train dates", flag="--data")
    periods_per_year: float | None = option(
        None, "bars per year for annualising (252 for daily bars); default: inferred from the "
        "median bar spacing")

    def validate(self) -> None:
        ppy = self.periods_per_year
        _check(ppy is None or 1 <= ppy <= 10_000_000, "--periods-per-year", "in [1, 1e7]", ppy)


TREE_FORECAST_MODES = ("off", "validation")  # `prepare.Prepared.fold_data`


@dataclass(frozen=True)
class FeatureConfig:
    """Causal market features and the look-back window the network sees."""

    lookback: int = option(
        1, "look-back window in bars (including bar t); 1: bar-level inputs (the bar-t "
        "variables alone, no window context)")
    clip: float = option(
        5.0, "normalised features are clipped to [-clip, clip] (the VSN curves are flat "
        "beyond ±4)")
    tree_forecast: str = option(
        "validation", "the gbm baseline's forecast as one more market variable, cross-fitted "
        "on each fold's train segment (5 blocks with purge gaps: no train bar's value comes "
        "from trees fit on it): off, or validation: in a fold only where the gbm baseline's "
        "validation Sharpe beats ridge's, else the column is zero. Not with pooled "
        "--data; the trees are saved with the run for predict and backtest",
        choices=TREE_FORECAST_MODES)

    def validate(self) -> None:
        _check(1 <= self.lookback <= 512, "--lookback", "an integer in [1, 512]", self.lookback)
        _check(0.5 <= self.clip <= 100, "--clip", "in [0.5, 100]", self.clip)
        _check(self.tree_forecast in TREE_FORECAST_MODES, "--tree-forecast",
               "off or validation", self.tree_forecast)


@dataclass(frozen=True)
class FoldConfig:
    """Walk-forward layout: K folds of train | gap | val | gap | test (bar counts)."""

    n_folds: int = option(3, "number of walk-forward folds", flag="--folds")
    test_bars: int | None = option(
        None, "bars per test block; default: the usable bars split so that each test block "
        "equals one val block and fold 0's train gets the rest")
    val_bars: int | None = option(None, "bars per validation block; default: as --test-bars")
    min_train_bars: int = option(250, "fewest bars of fold 0's train segment")
    gap: int | None = option(None, "purge gap in bars; default: max(lookback, n_step) + 1")
    expanding: bool = option(True, "expanding train windows (else rolling, of fold 0's length)")

    def validate(self) -> None:
        _check(1 <= self.n_folds <= 50, "--folds", "an integer in [1, 50]", self.n_folds)
        for name in ("test_bars", "val_bars", "gap"):
            v = getattr(self, name)
            _check(v is None or v >= 1, _flag(FoldConfig, name), "a positive integer", v)
        _check(self.min_train_bars >= 10, "--min-train-bars", ">= 10", self.min_train_bars)


REWARDS = ("log", "mean_variance")  # the learning rewards of `env.reward`
PRIORS = ("flat", "vol_target")  # the position the zero action holds (`env.target_fraction`)
VIEWS = ("excess", "trusted")  # how the forecast tilts the prior (`env.residual_view`)


@dataclass(frozen=True)
class EnvConfig:
    """Trading environment: actions, fills and costs (all on by default)."""

    prior: str = option(
        "vol_target", "the position the agent's zero action holds: vol_target, min(1, σ*/σ̂) "
        "(σ̂ the trailing 20-bar volatility, σ* its train median), with the action a residual "
        "around it, clip(prior + residual, -1, 1), and the model head scoring the residual's "
        "excess over the prior; flat: the action is the position itself", choices=PRIORS)
    prior_scale: float = option(
        1.0, "k of the prior min(1, k·σ*/σ̂) (--prior vol_target): σ* as a multiple of "
        "vol_target's; below 1 the prior holds less than vol_target (the same Sharpe while the "
        "cap at 1 is idle) and leaves the residual room on the long side")
    view: str = option(
        "trusted", "how the model head's forecast tilts the prior (--prior vol_target): excess, "
        "by its excess over its train level; trusted, as an absolute view (and the learnt "
        "continuation too) weighed by the trust w = max(0, 1 − 1/t²), t the t-statistic of "
        "trees cross-fitted on the fold's train segment (0 where they find no predictable "
        "direction): the optimum is then (1 − w)·prior + w·(the flat learner's "
        "mean-variance position)", choices=VIEWS)
    magnitudes: tuple[float, ...] = option(
        (0.25, 0.5, 0.75, 1.0), "position sizes as fractions of equity, comma-separated "
        "(--prior flat)")
    residuals: tuple[float, ...] = option(
        (0.25, 0.5, 1.0, 2.0), "residual sizes around the prior as fractions of equity, "
        "comma-separated (--prior vol_target; 2 reaches full short from a full prior)")
    commission_bps: float = option(1.0, "commission, bps of traded notional")
    slippage_bps: float = option(1.0, "slippage against the trader, bps of traded notional")
    episode_bars: int = option(256, "training episode length in bars before truncation")
    reward: str = option("mean_variance", "learning reward: log growth or mean_variance "
                         "(r − (λ/2)·r², returns in percent)", choices=REWARDS)
    risk_aversion: float = option(0.1, "λ of the mean_variance reward, per percent return")

    def validate(self) -> None:
        _check(self.prior in PRIORS, "--prior", "one of " + ", ".join(PRIORS), self.prior)
        _check(0 < self.prior_scale <= 1, "--prior-scale", "in (0, 1]", self.prior_scale)
        _check(self.view in VIEWS, "--view", "one of " + ", ".join(VIEWS), self.view)
        _check(self.view == "excess" or self.prior != "flat", "--view",
               "excess with --prior flat (a view tilts a prior; trusted is the default, so "
               "pass --view excess)", self.view)
        _check(len(self.magnitudes) >= 1 and all(0 < m <= 1 for m in self.magnitudes),
               "--magnitudes", "values in (0, 1]", self.magnitudes)
        _check(len(self.residuals) >= 1 and all(0 < m <= 2 for m in self.residuals),
               "--residuals", "values in (0, 2]", self.residuals)
        _check(0 <= self.commission_bps <= 1000, "--commission-bps", "in [0, 1000]",
               self.commission_bps)
        _check(0 <= self.slippage_bps <= 1000, "--slippage-bps", "in [0, 1000]",
               self.slippage_bps)
        _check(self.episode_bars >= 2, "--episode-bars", ">= 2", self.episode_bars)
        _check(self.reward in REWARDS, "--reward", "one of " + ", ".join(REWARDS), self.reward)
        _check(0 <= self.risk_aversion <= 100, "--risk-aversion", "in [0, 100]",
               self.risk_aversion)


PRECISIONS = ("tf32", "fp32", "bf16")
Q_HEADS = ("generic", "model")  # `agent.heads.HEADS`


@dataclass(frozen=True)
class NetConfig:
    """Q-network: its head and widths (VSN/GRN as in the Temporal Fusion Transformer)."""

    q_head: str = option(
        "model", "Q-function: generic (a branching dueling Q-network learnt by TD) or model "
        "(Q assembled from the known reward: forecasts of the next return's first two "
        "moments learnt by regression, the env's cost, and a continuation learnt by TD)",
        choices=Q_HEADS)
    hidden: int = option(32, "per-variable embedding and VSN width")
    trunk: int = option(64, "trunk GRN width")
    context: int = option(32, "width of the look-back context vector (unused at --lookback 1)")
    # Parameters, optimiser state and the loss stay float32 in every case.
    precision: str = option(
        "tf32", "matmul precision: tf32 (the backend default: TF32 tensor cores on NVIDIA "
        "GPUs, exact float32 on CPU), fp32 (exact) or bf16 (bfloat16 inputs, float32 "
        "accumulation); params stay float32", choices=PRECISIONS)

    def validate(self) -> None:
        for name in ("hidden", "trunk", "context"):
            v = getattr(self, name)
            _check(1 <= v <= 4096, "--" + name, "an integer in [1, 4096]", v)
        _check(self.precision in PRECISIONS, "--precision", "one of " + ", ".join(PRECISIONS),
               self.precision)
        _check(self.q_head in Q_HEADS, "--q-head", "generic or model", self.q_head)


BACKUPS = ("taken", "all")


@dataclass(frozen=True)
class AgentConfig:
    """Double-DQN learner: optimiser, targets, exploration, replay.

    Defaults chosen by validation Sharpe on the planted-signal market `synthetic:ar1`
    (experiments.sweep; docs/findings.md). Test blocks were not looked at. The weight decay
    shrinks the weight matrices only (`optimizer.kernel_mask`).
    """

    learning_rate: float = option(1e-4, "Adam learning rate", flag="--lr", sweep=True)
    weight_decay: float = option(
        0.3, "decoupled weight decay (AdamW), per update, relative to the learning rate",
        sweep=True)
    obs_noise: float = option(
        1.5, "std of Gaussian noise on the normalised market inputs while learning", sweep=True)
    max_grad_norm: float = option(10.0, "global gradient-norm clip")
    tau: float = option(0.005, "target EMA weight on the online params, in (0, 1]")
    gamma: float = option(0.9, "discount per bar, in [0, 1)", sweep=True)
    n_step: int = option(3, "n-step return length")
    batch_size: int = option(256, "gradient batch size", flag="--batch")
    huber_delta: float = option(1.0, "Huber loss threshold of the TD error")
    aux_weight: float = option(0.1, "weight of the next-bar-return loss", sweep=True)
    reward_scale: float = option(100.0, "rewards are log growth × this (percent)")
    eps_start: float = option(1.0, "initial ε of the ε-greedy exploration")
    eps_end: float = option(
        0.2, "final ε of the ε-greedy exploration (kept high: validation collapses once "
        "exploration stops)", sweep=True)
    eps_decay_fraction: float = option(
        0.5, "fraction of all training env steps over which ε decays to --eps-end",
        flag="--eps-decay", sweep=True)
    replay_capacity: int = option(2048, "time steps per env kept in the replay ring")
    backup: str | None = option(
        None, "TD backups: taken (n-step, the action taken; generic head only) or all "
        "(1-step, every position from the same state: full-action backups); default: taken "
        "for the generic head, all for the model head", choices=BACKUPS)

    def validate(self) -> None:
        _check(0 < self.learning_rate <= 1, "--lr", "in (0, 1]", self.learning_rate)
        _check(0 < self.tau <= 1, "--tau", "in (0, 1]", self.tau)
        _check(0 <= self.gamma < 1, "--gamma", "in [0, 1)", self.gamma)
        _check(1 <= self.n_step <= 64, "--n-step", "an integer in [1, 64]", self.n_step)
        _check(1 <= self.batch_size <= 65536, "--batch", "an integer in [1, 65536]",
               self.batch_size)
        _check(self.max_grad_norm > 0, "--max-grad-norm", "> 0", self.max_grad_norm)
        _check(self.huber_delta > 0, "--huber-delta", "> 0", self.huber_delta)
        _check(self.reward_scale > 0, "--reward-scale", "> 0", self.reward_scale)
        _check(0 <= self.aux_weight <= 1000, "--aux-weight", "in [0, 1000]", self.aux_weight)
        _check(0 <= self.weight_decay <= 1, "--weight-decay", "in [0, 1]", self.weight_decay)
        _check(0 <= self.obs_noise <= 10, "--obs-noise", "in [0, 10]", self.obs_noise)
        _check(0 <= self.eps_end <= self.eps_start <= 1, "--eps-start/--eps-end",
               "0 <= eps_end <= eps_start <= 1", (self.eps_start, self.eps_end))
        _check(0 < self.eps_decay_fraction <= 1, "--eps-decay", "in (0, 1]",
               self.eps_decay_fraction)
        _check(self.replay_capacity > self.n_step, "--replay-capacity", "> n_step",
               self.replay_capacity)
        _check(self.backup is None or self.backup in BACKUPS, "--backup", "taken or all",
               self.backup)


# The gbm baseline's candidate boosting iterations (`gbm.fit_gbm`), up to
# `TrainConfig.gbm_iterations`.
GBM_ITERATIONS = (25, 50, 100, 200, 400)


@dataclass(frozen=True)
class TrainConfig:
    """Epoch structure: parallel envs, env steps and gradient updates per epoch."""

    epochs: int = option(5, "epochs per fold")
    n_envs: int = option(64, "parallel training envs", flag="--envs")
    steps_per_epoch: int = option(1000, "env steps per env per epoch")
    updates_per_step: int = option(1, "gradient updates per parallel env step")
    prefill_steps: int = option(64, "random-policy env steps before the first update")
    # 4 chosen on validation (docs/findings.md): single agents vary a lot from seed to seed.
    seeds: int = option(4, "seeds per fold (and setting), trained together; their ensemble "
                        "(mean greedy position) is the fold's policy")
    gbm_iterations: int = option(
        400, "most boosting iterations of the gbm baseline: it chooses on validation among "
        "25, 50, 100, 200 and 400 trees up to this (the smoke preset: 100, for speed)")
    # 886 = the settings looked at to choose the defaults, counted in docs/findings.md.
    prior_trials: int = option(886, "trials looked at outside this run (e.g. the settings tried "
                               "to choose its defaults: docs/findings.md), added to the DSR's "
                               "count of trials")

    def validate(self) -> None:
        _check(1 <= self.epochs <= 10_000, "--epochs", "an integer in [1, 10000]", self.epochs)
        _check(1 <= self.n_envs <= 1_000_000, "--envs", "an integer in [1, 1000000]",
               self.n_envs)
        _check(self.steps_per_epoch >= 1, "--steps-per-epoch", ">= 1", self.steps_per_epoch)
        _check(self.updates_per_step >= 1, "--updates-per-step", ">= 1", self.updates_per_step)
        _check(self.prefill_steps >= 1, "--prefill-steps", ">= 1", self.prefill_steps)
        _check(1 <= self.seeds <= 4096, "--seeds", "an integer in [1, 4096]", self.seeds)
        _check(self.gbm_iterations in GBM_ITERATIONS, "--gbm-iterations",
               f"one of {', '.join(map(str, GBM_ITERATIONS))}", self.gbm_iterations)
        _check(0 <= self.prior_trials <= 10_000_000, "--prior-trials", "an integer >= 0",
               self.prior_trials)


# The hyper-parameters a population may sweep (traced, not static): `learner.HParams`'s fields.
SWEEPABLE = tuple(f.name for f in dataclasses.fields(AgentConfig) if f.metadata["sweep"])

SECTIONS = {"data": DataConfig, "features": FeatureConfig, "folds": FoldConfig,
            "env": EnvConfig, "net": NetConfig, "agent": AgentConfig, "train": TrainConfig}


@dataclass(frozen=True)
class RunConfig:
    """Everything a run depends on; saved with every checkpoint and in summary.json."""

    data: DataConfig = field(default_factory=DataConfig)
    features: FeatureConfig = field(default_factory=FeatureConfig)
    folds: FoldConfig = field(default_factory=FoldConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    net: NetConfig = field(default_factory=NetConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    seed: int = 0
    # Hyper-parameter sweep: ((name, (v1, v2, ...)), ...) over SWEEPABLE fields; () = none.
    sweep: tuple[tuple[str, tuple[float, ...]], ...] = ()

    def validate(self) -> RunConfig:
        for name in SECTIONS:
            getattr(self, name).validate()
        model = self.net.q_head == "model"
        _check(not (model and self.agent.backup == "taken"), "--backup",
               "all or unset with --q-head model (it backs up every position)",
               self.agent.backup)
        _check(model or self.env.view == "excess", "--view",
               "excess with --q-head generic (the model head alone weighs a view; trusted is "
               "the default, so pass --view excess)",
               self.env.view)
        # seed + 2 keys the random policy (`population.RunKeys`): it must fit an int32 too
        _check(0 <= self.seed < 2**31 - 2, "--seed", "an integer in [0, 2**31 - 2)",
               self.seed)
        for name, values in self.sweep:
            if name not in SWEEPABLE:
                raise InputError(f"option --sweep {name}: cannot be swept; sweepable are "
                                 f"{', '.join(SWEEPABLE)}")
            _check(len(values) >= 1, f"--sweep {name}", "at least one value", values)
            for v in values:
                try:
                    dataclasses.replace(self.agent, **{name: v}).validate()
                except InputError as err:
                    raise InputError(f"option --sweep {name}={v!r}: {err}") from None
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def program_config(cfg: RunConfig) -> RunConfig:
    """`cfg` without what the compiled programs do not read: the data source, the fold layout,
    the seed and the sweep's values (inputs of the programs, not part of them). Every other
    field stays, read by a program or not, so no field that shapes a program can be left out.
    Programs made once per process are keyed on it (`population.programs`,
    `rollout.jit_per_program`); the tests trace those programs with the dropped fields made
    unreadable (`tests/helpers.unread_dropped`), so a program that reads one fails them."""
    return dataclasses.replace(cfg, data=DataConfig(), folds=FoldConfig(), seed=0, sweep=())


PRESETS = ("smoke", "default")


def preset(name: str) -> RunConfig:
    """Named configurations: `smoke` (seconds on a CPU) and `default` (the real one)."""
    if name == "default":
        return RunConfig()
    if name == "smoke":
        return RunConfig(
            net=NetConfig(hidden=8, trunk=16, context=8),
            agent=AgentConfig(batch_size=32, replay_capacity=64, n_step=2),
            train=TrainConfig(epochs=1, n_envs=8, steps_per_epoch=40, prefill_steps=8, seeds=1,
                              gbm_iterations=100),
            env=EnvConfig(episode_bars=64),
        )
    raise InputError(f"option --preset={name!r} is unknown: must be one of smoke, default")


# Fields added after configurations were saved whose default is not what runs did before the
# field existed: a saved configuration without the field keeps its old behaviour.
BEFORE_FIELD = {"net": {"q_head": "generic"},  # the field of issue 27
                "features": {"tree_forecast": "off"},  # study 19's field; default since study 20
                "env": {"prior": "flat",  # issue 58's field
                        "view": "excess"}}  # study 40's field, the default since then


class Removed(typing.NamedTuple):
    """A field removed from the configs: the one value every run still reads the same way, the
    studies that rejected it (docs/findings.md) and the date it left."""

    same: Any
    where: str
    removed: str
    read_if: tuple[str, Any] | None = None  # (field, value) of its section: read only then
    # (the value runs had before the field existed, a (section, field) that every
    # configuration saved since the field holds and none saved before it): a configuration
    # lacking both the field and the marker is from before the field
    before: tuple[Any, tuple[str, str]] | None = None


# Fields removed (options superseded or rejected by their studies; docs/findings.md keeps the
# studies), with the one value every run still reads the same way: a saved configuration
# holding that value loads (the field is dropped), any other value is refused in one line. A
# field with `read_if` was read only under that value of another field of its section, so
# elsewhere any value of it loads.
REMOVED_FIELDS = {
    ("net", "linear_path"): Removed(False, "study 13", "2026-12-01"),
    ("agent", "aux_noise"): Removed(None, "studies 14-15", "2026-12-01"),
    ("agent", "sizing"): Removed("q", "study 12", "2026-12-01"),
    ("features", "portfolio_inputs"): Removed("all", "study 11", "2026-12-03"),
    ("agent", "bootstrap_block"): Removed(0, "study 6", "2026-12-03"),
    ("agent", "dropout"): Removed(0.0, "studies 10-11", "2026-12-03"),
    ("net", "embedding"): Removed("none", "study 18", "2026-12-03"),
    ("train", "forecast_patience"): Removed(0, "study 21", "2026-12-03"),
    ("env", "dsr_eta"): Removed(0.01, "study 3", "2026-12-03", read_if=("reward", "dsr")),
    ("train", "forecast_shrink"): Removed("off", "study 25", "2026-12-03"),
    ("agent", "continuation_weight"): Removed(1.0, "study 27", "2026-12-04"),
    ("net", "continuation"): Removed("afterstate", "study 28", "2026-12-04",
                                     read_if=("q_head", "model")),
    ("train", "skill_shrink"): Removed("off", "study 30", "2026-12-04"),
    ("net", "variables"): Removed("pwl", "studies 31-32", "2026-12-04"),
    ("train", "fallback"): Removed("off", "study 33", "2026-12-05"),
    ("net", "td_to_encoder"): Removed(False, "study 18", "2026-12-07",
                                      read_if=("q_head", "model")),
    ("agent", "weight_decay_on"): Removed("kernels", "study 7", "2026-12-07",
                                          before=("all", ("net", "q_head"))),
    ("train", "eval_params"): Removed("online", "study 24 and the acting-parameters rows",
                                      "2026-12-07"),
    ("train", "rival"): Removed("off", "studies 34-40", "2026-12-07"),
}
# Choices removed from a field that remains, with the studies that rejected them and the date.
REMOVED_CHOICES = {("env", "reward", "dsr"): ("study 3", "2026-12-03"),
                   ("features", "tree_forecast", "on"): ("study 19", "2026-12-07")}
# Fields whose type changed: a saved configuration's old value and the one it now reads as.
RETYPED_FIELDS = {("features", "tree_forecast"): {False: "off", True: "on"}}  # 2026-12-02


def _holds(d: dict, section: str, name: str) -> bool:
    """Whether the saved configuration `d` has the field `section.name`."""
    return isinstance(d.get(section), dict) and name in d[section]


def _refuse(what: str, where: str, removed: str, runs: str) -> InputError:
    return InputError(f"saved configuration {what}, an option removed on {removed} "
                      f"(its results: {where} in docs/findings.md); this version runs only "
                      f"{runs}")


def _upgrade(d: dict) -> dict:
    """`d` (a saved `RunConfig.to_dict`) without the `REMOVED_FIELDS` and with the
    `RETYPED_FIELDS`' old values read as today's; InputError naming the field when one holds a
    value today's code cannot reproduce (a removed field's other value, or a
    `REMOVED_CHOICES` value)."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in d.items()}
    for (section, name), values in RETYPED_FIELDS.items():
        part = out.get(section)
        if isinstance(part, dict) and isinstance(part.get(name), bool):
            part[name] = values[part[name]]
    for (section, name, value), (where, removed) in REMOVED_CHOICES.items():
        part = out.get(section)
        if isinstance(part, dict) and part.get(name) == value:
            raise _refuse(f"sets {section}.{name}={value!r}", where, removed,
                          f"{section}.{name} in {', '.join(_choices(section, name))}")
    for (section, name), gone in REMOVED_FIELDS.items():
        part = out.get(section)
        if not isinstance(part, dict):
            continue
        if name in part:
            value = part.pop(name)
            what = f"sets {section}.{name}={value!r}"
        elif gone.before is not None and not _holds(out, *gone.before[1]):
            value = gone.before[0]  # saved before the field: its runs read this value
            what = f"predates {section}.{name} (its runs read {value!r})"
        else:
            continue
        read = gone.read_if is None or part.get(gone.read_if[0]) == gone.read_if[1]
        if read and value != gone.same:
            raise _refuse(what, gone.where, gone.removed, f"{section}.{name}={gone.same!r}")
    return out


def _choices(section: str, name: str) -> tuple[str, ...]:
    """The allowed values of a config field declared with `choices`."""
    return next(f for f in dataclasses.fields(SECTIONS[section])
                if f.name == name).metadata["choices"]


def config_from_dict(d: dict) -> RunConfig:
    """Inverse of `RunConfig.to_dict` (e.g. a run's saved config.json); tuples restored and
    every value's type checked against its annotation (InputError naming the first wrong
    field, e.g. `train.epochs='3'`); a field missing from an older file takes the value of
    `BEFORE_FIELD`, else its default; a removed field is dropped or refused
    (`REMOVED_FIELDS`), a retyped one's old value read as today's (`RETYPED_FIELDS`). Not
    validated: call `.validate()`."""
    if isinstance(d, dict):
        d = _upgrade(d)
    try:
        kw = {name: cls(**(BEFORE_FIELD.get(name, {}) | d[name]))
              for name, cls in SECTIONS.items()}
        kw["env"] = dataclasses.replace(kw["env"], magnitudes=tuple(kw["env"].magnitudes),
                                        residuals=tuple(kw["env"].residuals))
        sweep = tuple((str(n), tuple(float(x) for x in v)) for n, v in d.get("sweep", ()))
        cfg = RunConfig(seed=d["seed"], sweep=sweep, **kw)
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"saved configuration is not valid: {err}") from None
    wrong = _wrong_type(cfg)
    if wrong:
        raise InputError(f"wrong type: {wrong}")
    return cfg


def _wrong_type(obj: object, prefix: str = "") -> str | None:
    """The first field of a config dataclass whose value does not match its annotation (e.g.
    `"epochs": "3"` in a hand-edited config.json), as 'train.epochs=...'; None if all match."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value, name = getattr(obj, f.name), prefix + f.name
        if dataclasses.is_dataclass(value):
            wrong = _wrong_type(value, name + ".")
            if wrong:
                return wrong
        elif not _is_a(value, hints[f.name]):
            return f"{name}={value!r} (expected {hints[f.name]})"
    return None


def _is_a(value: object, hint: object) -> bool:
    """isinstance for the annotations the configs use (unions, tuple[X, ...], int, float, str;
    an int counts as a float, a bool as neither)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_is_a(value, a) for a in args)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_is_a(v, args[0]) for v in value)
        return len(value) == len(args) and all(
            _is_a(v, a) for v, a in zip(value, args, strict=True))
    if isinstance(value, bool):
        return hint is bool
    if hint is float:
        return isinstance(value, int | float)
    return isinstance(value, hint)
