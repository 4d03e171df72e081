"""The accelerator(s) a run uses."""

from __future__ import annotations

import jax


def describe_device() -> str:
    """e.g. 'gpu: NVIDIA H200 (1 device)' or 'cpu: cpu (1 device)'."""
    devs = jax.devices()
    return f"{devs[0].platform}: {devs[0].device_kind} ({len(devs)} device{'s' * (len(devs) > 1)})"
