"""The values of ``train_layout`` and their check, torch-free so that the command line is checked before torch loads.

:mod:`rsbench.runs.training_layout` applies the layout to a training run.
"""

from __future__ import annotations

from typing import Literal

from rsbench.errors import ConfigError

Layout = Literal["contiguous", "channels_last", "auto"]
LAYOUTS: tuple[str, ...] = ("contiguous", "channels_last", "auto")
"""contiguous: eager NCHW; channels_last: NHWC weights and activations; auto: channels-last on a CPU for a conv net."""


def check_layout(layout: object, key: str = "train_layout") -> Layout:
    """Return ``layout`` if it is one of :data:`LAYOUTS`, else raise :class:`ConfigError` naming ``key`` and them."""
    if layout not in LAYOUTS:
        raise ConfigError(f"{key}={layout!r} is not a training memory layout: use one of {', '.join(LAYOUTS)}")
    return layout  # type: ignore[return-value]
