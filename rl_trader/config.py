"""Frozen configuration dataclasses: one per pipeline stage, gathered in `RunConfig`.

Every config is hashable and static under `jit`. `validate()` checks ranges and raises
`InputError` naming the option and its allowed range.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from rl_trader.errors import InputError


def _check(cond: bool, option: str, allowed: str, value: object) -> None:
    """Refuse `value` of `option` unless `cond`; NaN and ±inf never pass for a number."""
    values = value if isinstance(value, tuple) else (value,)
    if any(isinstance(v, float) and not math.isfinite(v) for v in values):
        cond = False
    if not cond:
        raise InputError(f"option {option}={value!r} is out of range: must be {allowed}")


@dataclass(frozen=True)
class DataConfig:
    """Where the bars come from. `path=None` loads the embedded S&P 500 daily file."""

    path: str | None = None
    periods_per_year: float | None = None  # None: inferred from the median bar spacing


@dataclass(frozen=True)
class FeatureConfig:
    """Causal market features and the look-back window the network sees."""

    lookback: int = 32  # L: bars in the look-back window (including bar t)
    clip: float = 5.0  # normalised features are clipped to [-clip, clip]

    def validate(self) -> None:
        _check(2 <= self.lookback <= 512, "--lookback", "an integer in [2, 512]", self.lookback)
        _check(0.5 <= self.clip <= 100, "clip", "in [0.5, 100]", self.clip)


@dataclass(frozen=True)
class FoldConfig:
    """Walk-forward layout: K folds of train | gap | val | gap | test (bar counts)."""

    n_folds: int = 3
    test_bars: int | None = None  # None: the usable bars split so that each test block equals
    val_bars: int | None = None  # one val block and train of fold 0 gets the rest
    min_train_bars: int = 250
    gap: int | None = None  # None: max(lookback, n_step) + 1
    expanding: bool = True  # False: rolling train window of the first fold's length

    def validate(self) -> None:
        _check(1 <= self.n_folds <= 50, "--folds", "an integer in [1, 50]", self.n_folds)
        for name in ("test_bars", "val_bars", "gap"):
            v = getattr(self, name)
            _check(v is None or v >= 1, name, "a positive integer", v)
        _check(self.min_train_bars >= 10, "min_train_bars", ">= 10", self.min_train_bars)


@dataclass(frozen=True)
class EnvConfig:
    """Trading environment: actions, fills and costs (all on by default)."""

    magnitudes: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)  # fractions of equity
    commission_bps: float = 1.0  # on traded notional
    slippage_bps: float = 1.0  # fill price moves against the trader
    episode_bars: int = 256  # training episode length before truncation

    def validate(self) -> None:
        _check(len(self.magnitudes) >= 1 and all(0 < m <= 1 for m in self.magnitudes),
               "magnitudes", "values in (0, 1]", self.magnitudes)
        _check(0 <= self.commission_bps <= 1000, "--commission-bps", "in [0, 1000]",
               self.commission_bps)
        _check(0 <= self.slippage_bps <= 1000, "--slippage-bps", "in [0, 1000]",
               self.slippage_bps)
        _check(self.episode_bars >= 2, "episode_bars", ">= 2", self.episode_bars)


@dataclass(frozen=True)
class NetConfig:
    """Q-network widths (VSN/GRN as in the Temporal Fusion Transformer)."""

    hidden: int = 32  # per-variable embedding and VSN width
    trunk: int = 64  # trunk GRN width
    context: int = 32  # width of the look-back context vector
    # Matmul precision; parameters, optimiser state and the loss stay float32 in every case.
    # "tf32": the backend's default (TF32 tensor cores on NVIDIA GPUs, exact float32 on CPU);
    # "fp32": exact float32 products; "bf16": bfloat16 inputs with float32 accumulation.
    precision: str = "tf32"

    def validate(self) -> None:
        for name in ("hidden", "trunk", "context"):
            v = getattr(self, name)
            _check(1 <= v <= 4096, name, "an integer in [1, 4096]", v)
        _check(self.precision in PRECISIONS, "--precision", "one of " + ", ".join(PRECISIONS),
               self.precision)


PRECISIONS = ("tf32", "fp32", "bf16")


@dataclass(frozen=True)
class AgentConfig:
    """Double-DQN learner: optimiser, targets, exploration, replay."""

    # Defaults chosen by validation Sharpe on the planted-signal market `synthetic:ar1`
    # (experiments.sweep; docs/benchmarks.md). Test blocks were not looked at.
    learning_rate: float = 1e-4
    weight_decay: float = 0.3  # decoupled (AdamW), per update, relative to the learning rate
    obs_noise: float = 1.5  # std of Gaussian noise on normalised market inputs when learning
    max_grad_norm: float = 10.0
    tau: float = 0.005  # weight on the online params in the target EMA
    gamma: float = 0.9
    n_step: int = 3
    batch_size: int = 256
    huber_delta: float = 1.0
    aux_weight: float = 0.1
    reward_scale: float = 100.0  # rewards are log growth × this (percent) for conditioning
    eps_start: float = 1.0
    eps_end: float = 0.2  # kept high: validation collapses once exploration stops
    eps_decay_fraction: float = 0.5  # of all training env steps
    replay_capacity: int = 2048  # time steps per env kept in the replay ring
    backup: str = "taken"  # flag: --backup, help: TD backups: taken (n-step) or all positions

    def validate(self) -> None:
        _check(0 < self.learning_rate <= 1, "--lr", "in (0, 1]", self.learning_rate)
        _check(0 < self.tau <= 1, "--tau", "in (0, 1]", self.tau)
        _check(0 <= self.gamma < 1, "--gamma", "in [0, 1)", self.gamma)
        _check(1 <= self.n_step <= 64, "--n-step", "an integer in [1, 64]", self.n_step)
        _check(1 <= self.batch_size <= 65536, "--batch", "an integer in [1, 65536]",
               self.batch_size)
        _check(self.max_grad_norm > 0, "max_grad_norm", "> 0", self.max_grad_norm)
        _check(0 <= self.aux_weight <= 1000, "--aux-weight", "in [0, 1000]", self.aux_weight)
        _check(0 <= self.weight_decay <= 1, "--weight-decay", "in [0, 1]", self.weight_decay)
        _check(0 <= self.obs_noise <= 10, "--obs-noise", "in [0, 10]", self.obs_noise)
        _check(0 <= self.eps_end <= self.eps_start <= 1, "eps_start/eps_end",
               "0 <= eps_end <= eps_start <= 1", (self.eps_start, self.eps_end))
        _check(0 < self.eps_decay_fraction <= 1, "eps_decay_fraction", "in (0, 1]",
               self.eps_decay_fraction)
        _check(self.replay_capacity > self.n_step, "replay_capacity", "> n_step",
               self.replay_capacity)
        _check(self.backup in ("taken", "all"), "--backup", "taken or all", self.backup)


@dataclass(frozen=True)
class TrainConfig:
    """Epoch structure: parallel envs, env steps and gradient updates per epoch."""

    epochs: int = 5
    n_envs: int = 64
    steps_per_epoch: int = 1000  # env steps per env per epoch
    updates_per_step: int = 1  # gradient updates per parallel env step
    prefill_steps: int = 64  # random-policy env steps before the first update
    # Seeds per fold and setting; the fold's policy is their ensemble (mean greedy position).
    # 4 chosen on validation (docs/benchmarks.md): single agents vary a lot from seed to seed.
    seeds: int = 4
    eval_params: str = "online"  # greedy evaluation with the "online" or the "target" (EMA) params

    def validate(self) -> None:
        _check(1 <= self.epochs <= 10_000, "--epochs", "an integer in [1, 10000]", self.epochs)
        _check(1 <= self.n_envs <= 1_000_000, "--envs", "an integer in [1, 1000000]",
               self.n_envs)
        _check(self.steps_per_epoch >= 1, "--steps-per-epoch", ">= 1", self.steps_per_epoch)
        _check(self.updates_per_step >= 1, "updates_per_step", ">= 1", self.updates_per_step)
        _check(self.prefill_steps >= 1, "prefill_steps", ">= 1", self.prefill_steps)
        _check(1 <= self.seeds <= 4096, "--seeds", "an integer in [1, 4096]", self.seeds)
        _check(self.eval_params in ("online", "target"), "--eval-params", "online or target",
               self.eval_params)


# Fields of `agent.HParams`: the hyper-parameters a population may sweep (traced, not static).
SWEEPABLE = ("learning_rate", "gamma", "aux_weight", "obs_noise", "weight_decay", "eps_end",
             "eps_decay_fraction")


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
    # Hyper-parameter sweep: ((name, (v1, v2, ...)), ...) over HParams fields; () = none.
    sweep: tuple[tuple[str, tuple[float, ...]], ...] = ()

    def validate(self) -> RunConfig:
        for part in (self.features, self.folds, self.env, self.net, self.agent, self.train):
            part.validate()
        _check(0 <= self.seed < 2**31, "--seed", "an integer in [0, 2**31)", self.seed)
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


def preset(name: str) -> RunConfig:
    """Named configurations: `smoke` (seconds on a CPU) and `default` (the real one)."""
    if name == "default":
        return RunConfig()
    if name == "smoke":
        return RunConfig(
            features=FeatureConfig(lookback=8),
            net=NetConfig(hidden=8, trunk=16, context=8),
            agent=AgentConfig(batch_size=32, replay_capacity=64, n_step=2),
            train=TrainConfig(epochs=1, n_envs=8, steps_per_epoch=40, prefill_steps=8, seeds=1),
            env=EnvConfig(episode_bars=64),
        )
    raise InputError(f"option --preset={name!r} is unknown: must be one of smoke, default")


PRESETS = ("smoke", "default")


def config_from_dict(d: dict) -> RunConfig:
    """Inverse of `RunConfig.to_dict` (e.g. a run's saved config.json); tuples restored."""
    sections = {"data": DataConfig, "features": FeatureConfig, "folds": FoldConfig,
                "env": EnvConfig, "net": NetConfig, "agent": AgentConfig, "train": TrainConfig}
    try:
        kw = {name: cls(**d[name]) for name, cls in sections.items()}
        kw["env"] = dataclasses.replace(kw["env"], magnitudes=tuple(kw["env"].magnitudes))
        sweep = tuple((str(n), tuple(float(x) for x in v)) for n, v in d.get("sweep", ()))
        return RunConfig(seed=int(d["seed"]), sweep=sweep, **kw)
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"saved configuration is not valid: {err}") from None
