"""Fail-fast checks of method hyperparameters: each error names the config key, the value and what is allowed."""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any


def check_int(key: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    """Return ``value`` if it is an integer in ``[minimum, maximum]``, else raise ``ValueError`` naming ``key``.

    Args:
        key: the config key, e.g. ``method.num_noise``.
        value: the value given.
        minimum: the smallest allowed value.
        maximum: the largest allowed value (no upper limit when ``None``).
    """
    in_range = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
    if in_range and maximum is not None:
        in_range = value <= maximum
    if not in_range:
        allowed = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{key} must be an integer {allowed}, got {value!r}")
    return int(value)


def check_float(key: str, value: Any, minimum: float = 0.0, *, strict: bool = False) -> float:
    """Return ``value`` as a float if it is a finite number ``>= minimum`` (``> minimum`` when ``strict``).

    Args:
        key: the config key, e.g. ``method.epsilon``.
        value: the value given.
        minimum: the lower limit.
        strict: exclude the lower limit itself.

    Raises:
        ValueError: naming ``key``, the value and the allowed range.
    """
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > minimum if strict else value >= minimum)
    if not ok:
        relation = ">" if strict else ">="
        raise ValueError(f"{key} must be a finite number {relation} {minimum:g}, got {value!r}")
    return float(value)


def check_optional_float(key: str, value: Any, minimum: float = 0.0) -> float | None:
    """``None`` (the option is off), or :func:`check_float` of ``value``."""
    return None if value is None else check_float(key, value, minimum)


def check_choice(key: str, value: Any, choices: Collection[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise ``ValueError`` listing them."""
    if value not in choices:
        raise ValueError(f"{key} must be one of {sorted(choices)}, got {value!r}")
    return str(value)
