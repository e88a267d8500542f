"""The certification settings' value checks that need neither torch nor SciPy, so a bad value is refused at once.

:class:`~rsbench.certify.pipeline.settings.CertifySettings` runs them when it is built, and the command floor
(:mod:`rsbench.runs.precheck`) runs the same functions before torch is imported: each message exists once.
"""

from __future__ import annotations

from typing import Any

from rsbench.errors import ConfigError


def check_count(**values: Any) -> None:
    """Raise ``ValueError`` naming ``certify.<key>`` unless each value is an integer >= 1.

    >>> check_count(n0=100, n=0)
    Traceback (most recent call last):
    ValueError: certify.n must be an integer >= 1, got 0
    """
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"certify.{key} must be an integer >= 1, got {value!r}")


def check_alpha(alpha: float) -> None:
    """Raise ``ValueError`` unless 0 < alpha < 1."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1) (the failure probability, e.g. 0.001), got {alpha!r}")


def settings_error(error: ValueError) -> ConfigError:
    """A settings group's ``ValueError`` as the user sees it: named ``certify.<key>``, or prefixed by ``certify:``."""
    message = str(error)
    return ConfigError(message if "certify" in message else f"certify: {message}")
