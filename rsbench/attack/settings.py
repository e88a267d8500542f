"""``attack.*``: what the empirical attack does, validated where it is defined (``conf/attack/smoothadv.yaml``).

The defaults are Salman et al.'s evaluation of smoothed classifiers (``code/predict.py`` of
Hadisalman/smoothing-adversarial as their README runs it): SmoothAdv PGD with T = 20 steps and m_test = 32 noise
samples held fixed across the steps, then PREDICT with N = 1,000 samples at alpha = 0.001 on the adversarial image.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from rsbench.certify.algorithm.bounds import check_alpha
from rsbench.errors import ConfigError

ATTACKS: tuple[str, ...] = ("smoothadv",)


@dataclass(frozen=True)
class AttackSettings:
    """The attack and the PREDICT that judges its result.

    Attributes:
        name: ``smoothadv`` (PGD on the soft smoothed classifier, Salman et al. 2019).
        num_steps: T, PGD steps (step size 2 epsilon / T).
        num_noise: m, noise samples of the soft smoothed classifier, drawn once per image and radius and held
            fixed across the steps (as ``predict.py`` does).
        n: PREDICT's samples at the adversarial image.
        alpha: PREDICT's failure probability (its two-sided binomial test may abstain).
        radii: the attack radii, in the certified norm; ``None``: the certified-accuracy grid of ``metrics.json``
            (0, step, ... up to the radius cap; radius 0 is PREDICT on the clean image).
        max_images: attack only the first ``max_images`` certified images (``None``: all of them).
        batch_size: noisy samples per forward pass of PREDICT.
        fail_below: the run fails when the number of images whose prediction the attack flipped within the
            certified radius is this improbable (one-sided p-value) under a sound certifier.
    """

    name: str = "smoothadv"
    num_steps: int = 20
    num_noise: int = 32
    n: int = 1000
    alpha: float = 0.001
    radii: tuple[float, ...] | None = None
    max_images: int | None = None
    batch_size: int = 1000
    fail_below: float = 0.001

    def __post_init__(self) -> None:
        if self.name not in ATTACKS:
            raise ValueError(f"attack.name must be one of {list(ATTACKS)}, got {self.name!r}")
        for key in ("num_steps", "num_noise", "n", "batch_size"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"attack.{key} must be an integer >= 1, got {value!r}")
        if self.max_images is not None and (not isinstance(self.max_images, int) or self.max_images < 1):
            raise ValueError(f"attack.max_images must be an integer >= 1 or null (all), got {self.max_images!r}")
        try:
            check_alpha(self.alpha)
        except ValueError as error:
            raise ValueError(f"attack.{error}") from None
        if not 0.0 < self.fail_below < 1.0:
            raise ValueError(f"attack.fail_below must be a p-value in (0, 1), got {self.fail_below!r}")
        if self.radii is not None and (not self.radii or any(r < 0 for r in self.radii)):
            raise ValueError(f"attack.radii must be a non-empty list of radii >= 0 or null, got {list(self.radii)}")

    @classmethod
    def from_keys(cls, **keys: Any) -> AttackSettings:
        """The settings from the ``attack`` config node's keys.

        Raises:
            ValueError: an unknown key, or a value out of range (the message names the ``attack.`` key).
        """
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(keys).difference(allowed))
        if unknown:
            raise ValueError(f"unknown attack keys {unknown}; allowed: {allowed}")
        radii = keys.get("radii")
        if radii is not None:
            if isinstance(radii, str) or not isinstance(radii, Sequence):
                raise ValueError(f"attack.radii must be a list of radii or null, got {radii!r}")
            keys["radii"] = tuple(sorted({float(r) for r in radii}))
        return cls(**keys)

    @classmethod
    def from_config(cls, node: Mapping[str, Any] | None) -> AttackSettings | None:
        """The settings of a composed ``attack`` node (``attack=smoothadv``), or ``None`` when there is none.

        Raises:
            ConfigError: an unknown key or a value out of range, named as ``attack.<key>``.
        """
        if not node:
            return None
        try:
            return cls.from_keys(**{str(key): value for key, value in node.items()})
        except ValueError as error:
            raise ConfigError(str(error)) from None

    def record(self) -> dict[str, Any]:
        """The settings as stored beside the attack's rows (a resumed attack must use the same)."""
        return {
            "name": self.name,
            "num_steps": self.num_steps,
            "num_noise": self.num_noise,
            "n": self.n,
            "alpha": self.alpha,
            "radii": list(self.radii) if self.radii is not None else None,
        }
