"""OHLCV data: loading and strict validation, and the embedded S&P 500 default file."""

from rl_trader.data.loader import Bars, embedded_path, load_bars

__all__ = ["Bars", "embedded_path", "load_bars"]
