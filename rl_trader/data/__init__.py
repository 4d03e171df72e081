"""Bar data: loading and validation of OHLCV files, the embedded default, synthetic markets."""

from rl_trader.data.loader import Bars, embedded_path, load_bars

SYNTHETIC_PREFIX = "synthetic:"


def load(source: str | None) -> Bars:
    """Bars from a file path, `synthetic:NAME[:N_BARS[:SEED]]`, or None (embedded S&P 500)."""
    if source is not None and source.startswith(SYNTHETIC_PREFIX):
        from rl_trader.data.synthetic import from_spec

        return from_spec(source).bars
    return load_bars(source)


__all__ = ["Bars", "embedded_path", "load", "load_bars"]
