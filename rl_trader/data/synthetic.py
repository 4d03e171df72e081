"""Synthetic markets with a known, tunable predictable component (planted signal).

Bar t's log return (open t → close t) is r_t = μ_t + σ·ε_t with ε ~ N(0, 1) (unit-variance
Student-t in the no-direction family). The open of bar t equals the close of bar t−1 (no
overnight gap), so a position filled at the open of t+1 earns r_{t+1} exactly (less costs). The
conditional mean known at the close of t is `signal[t]`:

    ar1:        μ_{t+1} = φ·r_t                               (momentum for φ > 0)
    regime:     μ_{t+1} = ±drift, the sign from a hidden two-state Markov chain (sticky p_stay),
                observed only through returns
    vol_regime: μ = drift > 0, σ_t = σ_calm or σ_turbulent by a hidden two-state Markov chain
                (sticky p_stay): the edge is in sizing, not direction
    random_walk μ = 0                                          (no skill possible)
    drift:      μ = drift > 0, σ_t by GARCH(1, 1) around σ (`GARCH`): no predictable mean, the
                edge is holding the drift sized by the forecastable σ (an index-like market)

The no-direction family (`NO_DIRECTION`), stand-ins for stock indices and stocks: clustered,
fat-tailed volatility and a constant conditional mean, so no predictable direction:

    garch_up:   r_t = μ + σ_t·ε_t, μ = +0.0004 a bar, with
                σ²_{t+1} = σ²·(1 − α − β) + α·(r_t − μ)² + β·σ²_t, σ = 0.012, (α, β) =
                `GARCH_PERSISTENT` (0.08, 0.90), and ε_t = t₄·√(1/2), Student-t with 4 degrees
                of freedom scaled to unit variance (ε_t = t_ν·√((ν − 2)/ν))
    garch_flat: the same with μ = 0
    garch_down: the same with μ = −0.0003

Nonlinear markets, whose drift a linear forecast of the bar-t features sees little of (z_t =
r_t / σ_t, the last return in units of its σ; `nonlinear_drift`):

    cubic:       μ_{t+1} = φ·σ·He₃(z_t)/√6, He₃(z) = z³ − 3z with z clipped to ±3 (odd, yet
                 uncorrelated with z_t: down after small rises, up after large ones)
    step:        μ_{t+1} = φ·σ·sign(z_t)·(1 if |z_t| < c else −1), c = √(2 ln 2) (momentum
                 after small moves, reversal after large ones; c makes it uncorrelated with z_t)
    vol_sign:    σ_{t+1}² = ω + α·r_t² + β·σ_t² (GARCH(1, 1) around σ), and
                 μ_{t+1} = φ·σ_{t+1}·sign(σ_{t+1} − σ)·tanh(z_t): momentum when volatility is
                 above its long-run level, reversal below it
    interaction: μ_{t+1} = φ·σ·tanh(z_t)·tanh(v_t), v_t the bar's volume surprise (log volume =
                 15 + 0.3·v_t, v_t ~ N(0, 1)): a move on high volume continues, one on low
                 volume reverses

and a persistent hidden drift to be traded at high costs:

    slow_drift:  as regime, with a smaller drift and longer regimes (p_stay 0.995)

`signal[t] = E[r_{t+1} | bars ≤ t]` for ar1, vol_regime, drift, the no-direction family and
random_walk; for regime it is the true next drift (it knows the hidden state).

The oracle's target position `oracle_position[t]` (a signed fraction of equity, decided at the
close of t and held over bar t+1) trades the Bayes-optimal **causal** forecast of the true
model by its sign (or size), the bar a perfect learner could reach (costs are not part of the
rule, so a policy that trades less, such as ridge, can beat it after costs):

    ar1, random_walk: sign(signal[t]) (the signal is already causal)
    nonlinear:        sign(signal[t]) (the drift is a known function of past returns)
    regime:           sign(E[μ_{t+1} | r_≤t]), the next drift filtered by the two-state Bayes
                      (forward) filter with the true drift, σ and p_stay
    slow_drift:       the cost-aware oracle: the same filter's sign held with a band, long once
                      P(up) > ½ + band, short once P(up) < ½ − band, else the position it holds
                      (`hold_with_band`), so it trades only on strong evidence
    drift:            clip(σ²/σ²_{t+1}, 0.25, 1): the Sharpe-optimal size ∝ μ/σ²_{t+1} (σ_{t+1}
                      is known at the close of t), full at the long-run σ, within the env's
                      smallest and largest magnitudes
    no-direction:     sign(μ)·clip(σ²/σ²_{t+1}, 0.25, 1), drift's rule with μ's sign (flat, 0,
                      on garch_flat)
    vol_regime:       1.0 when the filtered P(bar t+1 calm | r_≤t) > 1/2, else 0.25. The Sharpe
                      ratio of sizes w_s per state is maximised by w_s ∝ μ/σ_s² (calm :
                      turbulent = 1 : 0.09); 1.0 and 0.25 are the nearest the env's magnitudes
                      (0.25 … 1) express.

`hidden_state_position[t]` is the same rule with the hidden state known (regime: the true next
drift; vol_regime: the state of bar t) — a reference no causal trader can reach: on 5,000-bar
markets (seeds 4–11) the filter reaches 0.63–0.74 of its Sharpe on regime and 0.86–1.02 on
vol_regime, after costs. `hidden_state[t]` is the regime of bar t (0 calm / up, 1 turbulent /
down; 0 for the markets without one).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np

from rl_trader.data.loader import Bars
from rl_trader.errors import InputError

GARCH = (0.1, 0.85)  # vol_sign and drift (`Spec.garch`'s default): (α, β); ω = σ²·(1 − α − β)
GARCH_PERSISTENT = (0.08, 0.90)  # the no-direction family's (α, β): longer volatility clusters


@dataclass(frozen=True)
class Spec:
    kind: str
    sigma: float = 0.01
    phi: float = 0.0
    drift: float = 0.0
    p_stay: float = 0.98
    sigma_turbulent: float = 0.0  # vol_regime: σ of the turbulent state (`sigma` is the calm one)
    turbulent_size: float = 0.25  # vol_regime: the oracle's size in the turbulent state
    shape: str = ""  # nonlinear: bump, cubic, vol_sign or interaction
    band: float = 0.0  # regime: the oracle holds its position while |P(up) − ½| ≤ band
    garch: tuple[float, float] = GARCH  # drift, vol_sign: GARCH(1, 1)'s (α, β)
    tail_df: float = 0.0  # ν > 2: ε is Student-t_ν scaled to unit variance; 0: ε ~ N(0, 1)


NO_DIRECTION_SPEC = Spec("drift", sigma=0.012, garch=GARCH_PERSISTENT, tail_df=4.0)


MARKETS = {
    "random_walk": Spec("ar1", phi=0.0),
    "ar1": Spec("ar1", phi=0.25),
    "ar1_strong": Spec("ar1", phi=0.5),
    "regime": Spec("regime", drift=0.004, p_stay=0.98),
    "ar1_weak": Spec("ar1", phi=0.1),
    "vol_regime": Spec("vol_regime", sigma=0.006, sigma_turbulent=0.02, drift=0.0005,
                       p_stay=0.99),
    "cubic": Spec("nonlinear", shape="cubic", phi=0.25),
    "step": Spec("nonlinear", shape="step", phi=0.25),
    "vol_sign": Spec("nonlinear", shape="vol_sign", phi=0.4),
    "interaction": Spec("nonlinear", shape="interaction", phi=0.6),
    "slow_drift": Spec("regime", drift=0.0015, p_stay=0.995, band=0.2),
    "drift": Spec("drift", sigma=0.012, drift=0.0003),
    "garch_up": replace(NO_DIRECTION_SPEC, drift=0.0004),
    "garch_flat": NO_DIRECTION_SPEC,
    "garch_down": replace(NO_DIRECTION_SPEC, drift=-0.0003),
}
NONLINEAR = tuple(name for name, spec in MARKETS.items() if spec.kind == "nonlinear")
NO_DIRECTION = ("garch_up", "garch_flat", "garch_down")  # constant mean, fat-tailed GARCH σ


@dataclass(frozen=True)
class SyntheticMarket:
    bars: Bars
    signal: np.ndarray  # float64 [T]: E[r_{t+1}] known to the oracle at the close of t
    oracle_position: np.ndarray  # float64 [T]: the causal oracle's target at the close of t
    hidden_state_position: np.ndarray  # float64 [T]: the same rule knowing the hidden state
    hidden_state: np.ndarray  # int64 [T]: the hidden regime of bar t (0 for ar1 markets)


def generate(name: str, n_bars: int = 5000, seed: int = 0) -> SyntheticMarket:
    """OHLCV bars of market `name` (see MARKETS), daily business dates from 2000-01-03."""
    if name not in MARKETS:
        raise InputError(f"synthetic market {name!r} is unknown: must be one of "
                         f"{', '.join(sorted(MARKETS))}")
    spec = MARKETS[name]
    rng = np.random.default_rng(seed)
    eps = (rng.standard_t(spec.tail_df, n_bars) * np.sqrt((spec.tail_df - 2.0) / spec.tail_df)
           if spec.tail_df else rng.standard_normal(n_bars))
    r = np.empty(n_bars)
    signal = np.zeros(n_bars)
    state = np.zeros(n_bars, np.int64)
    sigma = spec.sigma  # σ of each bar: a scalar, or [T] for vol_regime
    if spec.kind == "ar1":
        prev = 0.0
        for t in range(n_bars):  # a recursion; fine for ≤ 10^6 bars
            r[t] = spec.phi * prev + spec.sigma * eps[t]
            signal[t] = spec.phi * r[t]
            prev = r[t]
        position = hidden_position = np.sign(signal)
    elif spec.kind == "regime":
        flips = rng.random(n_bars) > spec.p_stay
        state = np.cumsum(flips) % 2  # 0/1 hidden regime
        mu = np.where(state == 0, spec.drift, -spec.drift)
        r = mu + spec.sigma * eps
        signal[:-1] = mu[1:]
        hidden_position = np.sign(signal)
        calm_or_up = forward_filter(r, (spec.drift, -spec.drift), (spec.sigma, spec.sigma),
                                    spec.p_stay)
        position = (hold_with_band(calm_or_up, spec.band) if spec.band
                    else np.sign(2.0 * calm_or_up - 1.0))
    elif spec.kind == "drift":
        r, sigma, sigma_next = garch_drift(spec, eps)
        signal[:] = spec.drift
        size = np.clip(spec.sigma**2 / sigma_next**2, 0.25, 1.0)
        position = hidden_position = np.sign(spec.drift) * size
    elif spec.kind == "nonlinear":
        surprise = rng.standard_normal(n_bars)  # the volume's, drawn before it is used
        r, signal, sigma = nonlinear_drift(spec, eps, surprise)
        position = hidden_position = np.sign(signal)
    else:  # vol_regime
        state = np.cumsum(rng.random(n_bars) > spec.p_stay) % 2
        sigma = np.where(state == 0, spec.sigma, spec.sigma_turbulent)
        r = spec.drift + sigma * eps
        signal[:] = spec.drift
        hidden_position = np.where(state == 0, 1.0, spec.turbulent_size)
        calm_or_up = forward_filter(r, (spec.drift, spec.drift),
                                    (spec.sigma, spec.sigma_turbulent), spec.p_stay)
        position = np.where(calm_or_up > 0.5, 1.0, spec.turbulent_size)
    close = 100.0 * np.exp(np.cumsum(r))
    open_ = np.concatenate([[100.0], close[:-1]])
    wick = np.abs(rng.normal(0.0, 0.3 * sigma, (2, n_bars)))
    high = np.maximum(open_, close) * np.exp(wick[0])
    low = np.minimum(open_, close) * np.exp(-wick[1])
    volume = np.round(rng.lognormal(15.0, 0.3, n_bars) if spec.kind != "nonlinear"
                      else np.exp(15.0 + 0.3 * surprise))
    dates = np.busday_offset("2000-01-03", np.arange(n_bars), roll="forward")
    digest = hashlib.sha256(f"synthetic:{name}:{n_bars}:{seed}".encode()).hexdigest()
    bars = Bars(dates=dates.astype("datetime64[ns]"), open=open_, high=high, low=low,
                close=close, volume=volume, source=f"synthetic:{name}", sha256=digest)
    return SyntheticMarket(bars=bars, signal=signal, oracle_position=position,
                           hidden_state_position=hidden_position, hidden_state=state)


def garch_drift(spec: Spec, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(returns r, σ_t of each bar, σ_{t+1} known at the close of t), float64 [T] each, of a
    drift market (drift or the no-direction family) driven by the unit-variance draws `eps`:
    r_t = μ + σ_t·ε_t, σ²_{t+1} = σ²·(1 − α − β) + α·(r_t − μ)² + β·σ²_t, σ_0 = σ, with
    (α, β) = `spec.garch`."""
    alpha, beta = spec.garch
    var = np.empty(len(eps) + 1)
    var[0] = spec.sigma**2
    r = np.empty(len(eps))
    for t in range(len(eps)):  # a recursion over bars
        r[t] = spec.drift + np.sqrt(var[t]) * eps[t]
        var[t + 1] = (spec.sigma**2 * (1.0 - alpha - beta) + alpha * (r[t] - spec.drift) ** 2
                      + beta * var[t])
    return r, np.sqrt(var[:-1]), np.sqrt(var[1:])


STEP_EDGE = float(np.sqrt(2.0 * np.log(2.0)))  # step: E[|z|; |z| < c] = ½·E|z| for z ~ N(0, 1)


def nonlinear_drift(spec: Spec, eps: np.ndarray,
                    surprise: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(returns r, signal E[r_{t+1} | bars ≤ t], σ_t of each bar) of a nonlinear market driven
    by the standard normal draws `eps` and the volume surprises `surprise` (module
    docstring). A recursion over bars."""
    n, sd, phi = len(eps), spec.sigma, spec.phi
    alpha, beta = spec.garch
    r, signal, sigma = np.zeros(n), np.zeros(n), np.full(n, sd)
    mu = 0.0  # the drift of bar t, known at the close of t − 1
    for t in range(n):
        r[t] = mu + sigma[t] * eps[t]
        z = r[t] / sigma[t]
        nxt = sd
        if spec.shape == "step":
            mu = phi * sd * np.sign(z) * (1.0 if abs(z) < STEP_EDGE else -1.0)
        elif spec.shape == "cubic":
            zc = min(max(z, -3.0), 3.0)
            mu = phi * sd * (zc**3 - 3.0 * zc) / np.sqrt(6.0)
        elif spec.shape == "vol_sign":
            nxt = np.sqrt(sd * sd * (1.0 - alpha - beta) + alpha * r[t] ** 2
                          + beta * sigma[t] ** 2)
            mu = phi * nxt * np.sign(nxt - sd) * np.tanh(z)
        else:  # interaction
            mu = phi * sd * np.tanh(z) * np.tanh(surprise[t])
        signal[t] = mu
        if t + 1 < n:
            sigma[t + 1] = nxt
    return r, signal, sigma


def hold_with_band(p_up: np.ndarray, band: float) -> np.ndarray:
    """Positions [T] from P(up) [T]: +1 once p > ½ + band, −1 once p < ½ − band, otherwise
    the position already held (0 before the first signal). A recursion over bars."""
    out, held = np.empty(len(p_up)), 0.0
    for t, p in enumerate(p_up):
        if p > 0.5 + band:
            held = 1.0
        elif p < 0.5 - band:
            held = -1.0
        out[t] = held
    return out


def forward_filter(r: np.ndarray, mu: tuple[float, float], sigma: tuple[float, float],
                   p_stay: float) -> np.ndarray:
    """P(s_{t+1} = 0 | r_≤t), float64 [T], of a two-state Markov chain (stay probability
    p_stay, uniform start) whose bar returns are r_t ~ N(mu[s_t], sigma[s_t]²):

        π_t = P·π_{t−1} ⊙ N(r_t; mu, sigma) / Σ(·),   output_t = (P·π_t)[0]

    with P the symmetric transition matrix. A recursion over bars, as the generator's."""
    mu_, sd = np.asarray(mu), np.asarray(sigma)
    log_lik = -0.5 * ((r[:, None] - mu_) / sd) ** 2 - np.log(sd)  # [T, 2], constants cancel
    lik = np.exp(log_lik - log_lik.max(1, keepdims=True))  # never 0 in both states
    post0, out = 0.5, np.empty(len(r))
    for t in range(len(r)):
        prior0 = p_stay * post0 + (1.0 - p_stay) * (1.0 - post0)
        a, b = prior0 * lik[t, 0], (1.0 - prior0) * lik[t, 1]
        post0 = a / (a + b)
        out[t] = p_stay * post0 + (1.0 - p_stay) * (1.0 - post0)
    return out


def from_spec(spec: str) -> SyntheticMarket:
    """The market of `synthetic:NAME[:N_BARS[:SEED]]` (e.g. `synthetic:ar1:20000:3`)."""
    return generate(*parse_spec(spec))


def parse_spec(spec: str) -> tuple[str, int, int]:
    """`synthetic:NAME[:N_BARS[:SEED]]` → (NAME, N_BARS, SEED); defaults 5000 bars, seed 0."""
    parts = spec.split(":")
    if parts[0] != "synthetic" or not 2 <= len(parts) <= 4:
        raise InputError(f"option --data={spec!r}: expected synthetic:NAME[:N_BARS[:SEED]]")
    try:
        n_bars = int(parts[2]) if len(parts) > 2 else 5000
        seed = int(parts[3]) if len(parts) > 3 else 0
    except ValueError:
        raise InputError(f"option --data={spec!r}: N_BARS and SEED must be integers") from None
    if not 2 <= n_bars <= 50_000_000 or seed < 0:
        raise InputError(f"option --data={spec!r}: N_BARS must be in [2, 5e7], SEED >= 0")
    return parts[1], n_bars, seed
