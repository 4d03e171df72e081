"""rl_trader: a JAX/Flax deep-Q trading research system with walk-forward evaluation."""

__version__ = "0.1.0"
