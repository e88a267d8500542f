"""What a result was computed with, recorded beside it in ``metrics.json["environment"]``.

Two runs of one seed on different hardware or library versions draw different noise and train differently (CPU and
CUDA generators differ), so a table that mixes them must be able to say which run used what.
"""

from __future__ import annotations

import importlib.metadata
import platform
from pathlib import Path
from typing import Any

import torch


def environment(device: torch.device) -> dict[str, Any]:
    """The versions of Python, torch and Lightning, and the device that certified (its model name), with threads.

    >>> sorted(environment(torch.device("cpu")))
    ['device', 'device_name', 'lightning', 'python', 'threads', 'torch']
    """
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "lightning": _version("pytorch-lightning"),
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name(),
        "threads": torch.get_num_threads(),
    }


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what :mod:`platform` knows of the machine."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
