"""Synthetic markets: the existing ones unchanged, the new ones' planted edge and oracle."""

import numpy as np
import pytest

from rl_trader.data.synthetic import generate, parse_spec
from rl_trader.errors import InputError
from rl_trader.evaluation.metrics import sharpe

# generate(name, 3000, 7) before the oracle position was added: close[-1], close[1234],
# high[10], low[10], volume[7], signal[100], signal[2000]
BEFORE = {
    "random_walk": (39.12218100090981, 41.541065535610386, 98.66262113750486, 97.8020798484408,
                    1987575.0, 0.0, 0.0),
    "ar1": (28.788916360569694, 30.815032401053717, 98.05360562106765, 97.35970629624624,
            1987575.0, -0.002294543453396994, -0.0016591548009983175),
    "ar1_strong": (15.596515493515467, 16.839812528098, 96.98415616432686, 96.434373528671,
                   1987575.0, -0.008773530462918042, -0.0059201016211354466),
    "regime": (213.29786054608627, 147.6260620822349, 102.9563971529826, 101.66472922281183,
               4603280.0, -0.004, -0.004),
}


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_existing_markets_are_unchanged_and_their_hidden_state_oracle_is_the_signal_sign(name):
    m = generate(name, 3000, 7)
    b = m.bars
    now = (b.close[-1], b.close[1234], b.high[10], b.low[10], b.volume[7], m.signal[100],
           m.signal[2000])
    np.testing.assert_allclose(now, BEFORE[name], rtol=1e-12, atol=0)
    np.testing.assert_array_equal(m.hidden_state_position, np.sign(m.signal))
    if name != "regime":  # ar1 signals are causal: both oracles are the same
        np.testing.assert_array_equal(m.oracle_position, m.hidden_state_position)


def _after_costs(position, r):
    """Per-bar simple returns of holding position[t] over bar t+1, less 2 bps per traded
    notional."""
    held = position[:-1]
    return held * np.expm1(r[1:]) - 2e-4 * np.abs(np.diff(np.concatenate([[0.0], held])))


def test_regime_oracle_is_the_causal_filter_and_below_the_hidden_state_one():
    m = generate("regime", 20_000, 5)
    r = np.diff(np.log(np.concatenate([[100.0], m.bars.close])))
    causal, hidden = (sharpe(_after_costs(p, r), 252)
                      for p in (m.oracle_position, m.hidden_state_position))
    assert 0.55 * hidden < causal < 0.8 * hidden, (causal, hidden)
    # causal: the position at the close of t does not change when later returns change
    r2 = r.copy()
    r2[15_000:] *= -1.0
    from rl_trader.data.synthetic import MARKETS, forward_filter

    spec = MARKETS["regime"]
    args = ((spec.drift, -spec.drift), (spec.sigma, spec.sigma), spec.p_stay)
    np.testing.assert_array_equal(forward_filter(r2, *args)[:15_000],
                                  forward_filter(r, *args)[:15_000])
    np.testing.assert_array_equal(m.oracle_position, np.sign(2 * forward_filter(r, *args) - 1))
    assert np.mean(m.oracle_position == m.hidden_state_position) > 0.8  # lags each flip


def test_forward_filter_by_hand_one_bar():
    # uniform start; bar 0 with r = μ_0: posterior ∝ (0.5·N(0; 0, σ), 0.5·N(μ_0; μ_1, σ))
    from rl_trader.data.synthetic import forward_filter

    mu, sd, stay = (0.01, -0.01), (0.01, 0.01), 0.9
    like = np.exp(-0.5 * ((0.01 - np.array(mu)) / 0.01) ** 2)
    post0 = like[0] / like.sum()
    expected = stay * post0 + (1 - stay) * (1 - post0)
    np.testing.assert_allclose(forward_filter(np.array([0.01]), mu, sd, stay), [expected],
                               rtol=1e-12)


def test_ar1_weak_has_a_small_momentum():
    m = generate("ar1_weak", 100_000, 3)
    r = np.diff(np.log(np.concatenate([[100.0], m.bars.close])))
    assert abs(np.corrcoef(r[:-1], r[1:])[0, 1] - 0.1) < 0.01
    np.testing.assert_allclose(m.signal, 0.1 * r, rtol=1e-9, atol=1e-15)
    np.testing.assert_array_equal(m.oracle_position, np.sign(m.signal))


def test_vol_regime_sizing_oracle_beats_buy_and_hold_with_a_causal_position():
    m = generate("vol_regime", 100_000, 3)
    state, pos = m.hidden_state, m.oracle_position
    r = np.diff(np.log(np.concatenate([[100.0], m.bars.close])))
    # the hidden state sets σ only: calm 0.6 %, turbulent 2 % per bar; drift 0.05 % in both
    np.testing.assert_allclose([r[state == k].std() for k in (0, 1)], [0.006, 0.02], rtol=0.03)
    assert 0.3 < state.mean() < 0.7
    assert 50 < len(state) / (1 + np.count_nonzero(np.diff(state))) < 200  # p_stay 0.99
    np.testing.assert_array_equal(m.signal, 0.0005)
    # the hidden-state oracle's position at the close of t is the hidden state of bar t's
    np.testing.assert_array_equal(m.hidden_state_position, np.where(state == 0, 1.0, 0.25))
    # the causal oracle filters the state from returns: mostly the same sizes, nearly as good
    assert set(np.unique(pos)) == {0.25, 1.0}
    assert np.mean(pos == m.hidden_state_position) > 0.9
    simple = np.expm1(r)
    oracle, buy_and_hold = sharpe(pos[:-1] * simple[1:], 252), sharpe(simple[1:], 252)
    hidden = sharpe(m.hidden_state_position[:-1] * simple[1:], 252)
    assert hidden >= oracle > buy_and_hold + 0.2 > 0.5, (hidden, oracle, buy_and_hold)


def test_drift_market_holds_a_drift_under_clustered_volatility():
    """drift: a constant E[r_{t+1}] = 0.03 % a bar and GARCH volatility around 1.2 % (squared
    returns autocorrelated); the oracle sizes by the next bar's known variance, within
    [0.25, 1], and beats holding at full size after costs."""
    m = generate("drift", 100_000, 3)
    r = np.diff(np.log(np.concatenate([[100.0], m.bars.close])))
    np.testing.assert_array_equal(m.signal, 0.0003)
    assert abs(r.mean() - 0.0003) < 3 * r.std() / np.sqrt(len(r))
    np.testing.assert_allclose(r.std(), 0.012, rtol=0.1)
    sq = (r - r.mean()) ** 2
    assert np.corrcoef(sq[:-1], sq[1:])[0, 1] > 0.1  # volatility clusters
    pos = m.oracle_position
    assert pos.min() >= 0.25 and pos.max() == 1.0 and 0.25 < pos.mean() < 1.0
    np.testing.assert_array_equal(m.hidden_state_position, pos)  # no hidden state
    oracle, hold = (sharpe(_after_costs(p, r), 252) for p in (pos, np.ones_like(pos)))
    assert oracle > hold > 0.2, (oracle, hold)


def test_markets_are_reproducible_by_seed():
    a, b, c = (generate("vol_regime", 2000, s) for s in (5, 5, 6))
    for field in ("close", "oracle_position", "hidden_state"):
        x, y, z = (getattr(m.bars if field == "close" else m, field) for m in (a, b, c))
        assert np.array_equal(x, y) and not np.array_equal(x, z), field


def test_parse_spec_defaults_and_refusals():
    assert parse_spec("synthetic:vol_regime") == ("vol_regime", 5000, 0)
    assert parse_spec("synthetic:ar1_weak:1200:1003") == ("ar1_weak", 1200, 1003)
    with pytest.raises(InputError, match="must be integers"):
        parse_spec("synthetic:ar1:x")


def _returns(m):
    return np.diff(np.log(np.concatenate([[100.0], m.bars.close])))


@pytest.mark.parametrize("name", ["cubic", "step", "vol_sign", "interaction"])
def test_nonlinear_markets_plant_their_drift_and_hide_it_from_a_linear_forecast(name):
    """The drift is the documented function of past bars (recomputed here from the returns
    and volumes), the oracle trades its sign, and the last return's linear correlation with
    the next drift is small next to the drift's own correlation with the next return."""
    from rl_trader.data.synthetic import GARCH, MARKETS, STEP_EDGE

    spec = MARKETS[name]
    m = generate(name, 40_000, 11)
    r, phi, sd = _returns(m), spec.phi, spec.sigma
    if name == "vol_sign":
        a, b = GARCH
        sig = np.full(len(r), sd)
        for t in range(len(r) - 1):
            sig[t + 1] = np.sqrt(sd * sd * (1 - a - b) + a * r[t] ** 2 + b * sig[t] ** 2)
        z = r / sig
        want = phi * sig[1:] * np.sign(sig[1:] - sd) * np.tanh(z[:-1])
    else:
        z = r / sd
        if name == "cubic":
            zc = np.clip(z, -3, 3)
            want = phi * sd * (zc**3 - 3 * zc) / np.sqrt(6)
        elif name == "step":
            want = phi * sd * np.sign(z) * np.where(np.abs(z) < STEP_EDGE, 1.0, -1.0)
        else:
            surprise = (np.log(m.bars.volume) - 15.0) / 0.3
            want = phi * sd * np.tanh(z) * np.tanh(surprise)
        want = want[:-1]
    np.testing.assert_allclose(m.signal[:-1], want, rtol=1e-6, atol=1e-5 * sd)  # volume: rounded
    np.testing.assert_array_equal(m.oracle_position, np.sign(m.signal))
    true = np.corrcoef(m.signal[:-1], r[1:])[0, 1]
    linear = abs(np.corrcoef(r[:-1], m.signal[:-1])[0, 1])
    assert true > 0.1 and linear < 0.5 * true / 0.25 + 0.1, (true, linear)
    sr = sharpe(_after_costs(m.oracle_position, r), 252)
    assert sr > 1.5, sr


def test_slow_drift_oracle_holds_the_filtered_sign_with_a_band():
    """Cost-aware: it trades only when the filtered P(up) leaves [½ − band, ½ + band], so it
    trades far less than the filter's sign and, at 20 bp a unit, earns more."""
    from rl_trader.data.synthetic import MARKETS, forward_filter, hold_with_band

    spec = MARKETS["slow_drift"]
    m = generate("slow_drift", 20_000, 9)
    r = _returns(m)
    p_up = forward_filter(r, (spec.drift, -spec.drift), (spec.sigma, spec.sigma), spec.p_stay)
    np.testing.assert_array_equal(m.oracle_position, hold_with_band(p_up, spec.band))
    np.testing.assert_array_equal(hold_with_band(np.array([0.5, 0.75, 0.6, 0.2, 0.5]), 0.2),
                                  [0.0, 1.0, 1.0, -1.0, -1.0])
    sign = np.sign(2 * p_up - 1)
    assert np.count_nonzero(np.diff(m.oracle_position)) < np.count_nonzero(np.diff(sign))

    def at_20bp(pos):
        held = pos[:-1]
        return sharpe(held * np.expm1(r[1:])
                      - 2e-3 * np.abs(np.diff(np.concatenate([[0.0], held]))), 252)

    assert at_20bp(m.oracle_position) > at_20bp(sign) and at_20bp(m.oracle_position) > 1.0


def test_drift_market_is_unchanged_by_the_no_direction_family():
    # generate("drift", 3000, 7) before the family shared its generator: close[-1], close[1234],
    # high[10], low[10], volume[7]
    b = generate("drift", 3000, 7).bars
    np.testing.assert_allclose(
        (b.close[-1], b.close[1234], b.high[10], b.low[10], b.volume[7]),
        (98.34593453286301, 56.205344037143554, 98.88485765251767, 98.01329071477298,
         1987575.0), rtol=1e-12, atol=0)


def _autocorr(x: np.ndarray, lag: int) -> float:
    """Sample autocorrelation of x [T] at `lag` bars."""
    x = x - x.mean()
    return float(x[:-lag] @ x[lag:] / (x @ x))


@pytest.mark.parametrize("name", ["garch_up", "garch_flat", "garch_down"])
def test_no_direction_markets_have_a_constant_mean_and_clustered_fat_tailed_volatility(name):
    """r_t = μ + σ_t·ε_t: returns uncorrelated with their past and averaging μ; squared and
    absolute returns autocorrelated (GARCH around σ = 1.2 %); Student-t tails (excess kurtosis
    ≫ 0). The oracle is sign(μ)·clip(σ²/σ²_{t+1}, 0.25, 1) with σ_{t+1} recomputed from r_≤t
    (causal), and beats holding sign(μ) at full size after costs."""
    from rl_trader.data.synthetic import GARCH_PERSISTENT, MARKETS, NO_DIRECTION

    assert name in NO_DIRECTION
    spec = MARKETS[name]
    mu, sd = spec.drift, spec.sigma
    m = generate(name, 100_000, 3)
    r = _returns(m)
    np.testing.assert_array_equal(m.signal, mu)
    assert abs(r.mean() - mu) < 3 * r.std() / np.sqrt(len(r))
    np.testing.assert_allclose(r.std(), sd, rtol=0.1)
    assert all(abs(_autocorr(r, lag)) < 0.03 for lag in range(1, 6))  # no predictable direction
    assert _autocorr((r - mu) ** 2, 1) > 0.05 and _autocorr(np.abs(r - mu), 1) > 0.15  # clusters
    z = (r - r.mean()) / r.std()
    assert np.mean(z**4) - 3.0 > 5.0  # fat tails (with Gaussian ε this GARCH gives about 1.4)
    a, b = GARCH_PERSISTENT
    var = np.empty(len(r) + 1)
    var[0] = sd**2
    for t in range(len(r)):
        var[t + 1] = sd**2 * (1 - a - b) + a * (r[t] - mu) ** 2 + b * var[t]
    want = np.sign(mu) * np.clip(sd**2 / var[1:], 0.25, 1.0)
    np.testing.assert_allclose(m.oracle_position, want, rtol=1e-9, atol=0)
    np.testing.assert_array_equal(m.hidden_state_position, m.oracle_position)
    np.testing.assert_array_equal(m.hidden_state, 0)
    pos = m.oracle_position
    if mu == 0:
        np.testing.assert_array_equal(pos, 0.0)  # flat: nothing to earn
    else:
        size = np.abs(pos)
        assert np.all(np.sign(pos) == np.sign(mu)) and size.min() == 0.25 and size.max() == 1.0
        oracle, hold = (sharpe(_after_costs(p, r), 252)
                        for p in (pos, np.full_like(pos, np.sign(mu))))
        assert oracle > hold > 0.1, (oracle, hold)


@pytest.mark.parametrize("name", ["garch_up", "garch_flat", "garch_down"])
def test_no_direction_markets_are_reproducible_by_seed(name):
    a, b, c = (generate(name, 2000, s) for s in (5, 5, 6))
    for x, y, z in ((a.bars.close, b.bars.close, c.bars.close),
                    (a.bars.volume, b.bars.volume, c.bars.volume),
                    (a.bars.high, b.bars.high, c.bars.high)):
        assert np.array_equal(x, y) and not np.array_equal(x, z)
    np.testing.assert_array_equal(a.oracle_position, b.oracle_position)
    assert a.bars.sha256 == b.bars.sha256 != c.bars.sha256
    assert np.all(a.bars.low <= np.minimum(a.bars.open, a.bars.close))
    assert np.all(a.bars.high >= np.maximum(a.bars.open, a.bars.close))
