"""Sequential designs for CERTIFY's estimation step: when an image may stop sampling, and the bound it reports.

A design watches the cumulative votes ``k`` for the selected class at its looks ``n_1 < n_2 < ...`` (at most
``n_max`` estimation samples) and decides, per image, when to stop and which lower bound on pA to report. The
selection samples (n0) are drawn before and independently, exactly as in Cohen et al.'s CERTIFY. One decision code
serves both the pipeline (:func:`rsbench.certify.algorithm.sequential.certify_group`, real votes) and the replay
benchmark (:mod:`rsbench.bench.replay`, simulated votes): :func:`run_design` is the loop, vectorised over images.

Every design keeps Cohen et al.'s promise at the same alpha: with probability >= 1 - alpha over the sampling, a
reported class c and radius R satisfy g(x + delta) = c for all ||delta||_2 < R. The reported bound is valid at the
data-dependent stopping time because each design pays for looking:

- ``looks`` (rsbench's design of issue #6): Clopper-Pearson at alpha / S at each of S looks fixed in advance
  (``first_look``, times ``growth``, ..., n_max); a union bound over the looks. It reports the bound of the last look.
- ``informed`` (the default): ``betting`` with the mixture updated by the image's selection votes (its posterior,
  a prior fixed before the first estimation vote; the selection votes are no evidence) and futility judged by the
  predictive probability of certifying the next target by n_max (:class:`InformedDesign`).
- ``betting``: a betting confidence sequence (:mod:`rsbench.certify.algorithm.confidence`; Waudby-Smith and Ramdas 2024,
  Voráček 2024), valid at every sample count at once by Ville's inequality, so looks cost nothing; with
  ``final_share`` > 0, that share of alpha goes to one Clopper-Pearson bound at n_max for the images that get there
  (union bound: (1 - share) alpha + share alpha = alpha). The reported bound is the largest valid one seen.
- ``adaptive`` (Horváth et al., "Boosting randomized smoothing with variance reduced classifiers", ICLR 2022,
  adaptive sampling; eth-sri/smoothing-ensembles ``smooth_ensemble_adaptive.py``): fresh stages of n_1, n_2, ...
  samples, each bounded alone by Clopper-Pearson at alpha / s, for one target radius. (Horváth et al. also draw fresh
  selection samples per stage; here one selection serves all stages, which is as valid: the selection is independent
  of every estimation sample.)

What the designs promise beyond soundness differs, and each says it in :attr:`Design.promise`: ``looks`` and
``betting`` decide every target radius of the certified-accuracy table (the grid up to the radius cap) and report
the full radius up to the cap; ``adaptive`` decides one target radius (the cap).

Stopping rules only affect cost and power, never soundness. An image stops when its bound reaches the cap, when it
has drawn n_max samples, or when the next target is out of reach: ``looks`` when the upper Clopper-Pearson bound
(alpha / S) is below the next target's probability (its rule since #6), ``betting`` when the upper end of its
confidence sequence at level ``futility`` is below the vote probability at which the design would reach the next
target at n_max (half the time), ``adaptive`` when the upper bound at futility / (s - 1) puts the radius below the
target (Horváth et al.'s early abstention).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

from rsbench.certify.algorithm.bounds import check_alpha
from rsbench.certify.algorithm.confidence import BetaMixture, betting_lower, cp_lower, cp_upper


@dataclass(frozen=True)
class LookSchedule:
    """Cumulative estimation sample counts after which the certificate is checked.

    Attributes:
        first: samples in the first stage.
        growth: each stage's cumulative count is the previous one times ``growth``.
        max_samples: the last look (n_max), also the most samples any image gets.
    """

    first: int = 1000
    growth: float = 2.0
    max_samples: int = 100_000

    def __post_init__(self) -> None:
        if self.first < 1 or self.max_samples < self.first:
            raise ValueError(f"need 1 <= first ({self.first}) <= max_samples ({self.max_samples})")
        if self.growth <= 1:
            raise ValueError(f"growth must be > 1, got {self.growth}")

    def looks(self) -> list[int]:
        """The cumulative counts n_1 < ... < n_S = max_samples.

        >>> LookSchedule(1000, 2.0, 10_000).looks()
        [1000, 2000, 4000, 8000, 10000]
        """
        looks = [self.first]
        while looks[-1] < self.max_samples:
            looks.append(min(self.max_samples, max(looks[-1] + 1, math.ceil(looks[-1] * self.growth))))
        return looks


@dataclass(frozen=True)
class Goal:
    """What a design is asked to decide, per image.

    Attributes:
        sigma: the noise level; radius r corresponds to the vote probability Phi(r / sigma).
        alpha: the failure probability of each certificate (the whole design's, every look included).
        n_max: the most estimation samples an image may take.
        targets: the radii to decide, ascending (the certified-accuracy grid); the last one is the radius cap, the
            largest radius reported. A design drops the targets it could not certify even with n_max of n_max votes.
    """

    sigma: float
    alpha: float
    n_max: int
    targets: tuple[float, ...]

    def __post_init__(self) -> None:
        check_alpha(self.alpha)
        if self.n_max < 1 or not self.targets or min(self.targets) < 0 or list(self.targets) != sorted(self.targets):
            raise ValueError(f"need n_max >= 1 and ascending targets >= 0, got n_max={self.n_max}, {self.targets}")

    @classmethod
    def grid(cls, sigma: float, alpha: float, n_max: int, cap: float, step: float = 0.25) -> Goal:
        """Targets 0, step, 2 step, ... up to ``cap`` (and ``cap`` itself when it is not on the grid)."""
        if cap <= 0 or step <= 0:
            raise ValueError(f"the radius cap and step must be > 0, got {cap} and {step}")
        targets = [i * step for i in range(math.floor(cap / step + 1e-9) + 1)]
        if cap - targets[-1] > 1e-9:
            targets.append(cap)
        return cls(sigma, alpha, n_max, tuple(targets))

    def probability(self, radius: float) -> float:
        """The vote probability that certifies ``radius``: 1/2 at radius 0 (no abstention), else Phi(r / sigma)."""
        return max(0.5, float(norm.cdf(radius / self.sigma)))


@dataclass
class Progress:
    """Where each image stands: updated by :meth:`Design.observe`, read by :meth:`Design.finish`.

    Attributes:
        lower: the largest valid lower bound on pA reached so far (0 before any).
        stopped: whether the image has stopped sampling.
        samples: estimation samples drawn (when stopped: in total).
        counts: votes for the selected class among them.
        reached: the index of the largest target certified so far (-1: none, not even radius 0).
        state: design-specific arrays.
    """

    lower: np.ndarray
    stopped: np.ndarray
    samples: np.ndarray
    counts: np.ndarray
    reached: np.ndarray
    state: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class Decisions:
    """A design's outcome per image: the reported bound, whether it certifies, the radius and the samples drawn."""

    lower: np.ndarray
    certified: np.ndarray
    radius: np.ndarray
    samples: np.ndarray
    counts: np.ndarray


class Design(ABC):
    """A sequential design for one :class:`Goal` (see the module docstring).

    Subclasses set :attr:`name`, :meth:`looks`, :meth:`best_lower` (the bound n_max of n_max votes give, which
    decides which targets are reachable) and :meth:`observe`.
    """

    name: ClassVar[str]

    def __init__(self, goal: Goal) -> None:
        self.goal = goal
        best = self.best_lower()
        probabilities = [goal.probability(r) for r in goal.targets]
        reachable = [r for r, p in zip(goal.targets, probabilities, strict=True) if p <= best]
        self.unreachable = tuple(r for r in goal.targets if r not in reachable)
        self.targets = tuple(reachable) or (0.0,)
        self.probabilities = np.array([goal.probability(r) for r in self.targets])

    @property
    def cap(self) -> float:
        """The largest radius reported: the largest reachable target."""
        return self.targets[-1]

    @property
    @abstractmethod
    def promise(self) -> str:
        """What the design decides (besides soundness at alpha), in one sentence."""

    @abstractmethod
    def looks(self) -> list[int]:
        """The cumulative estimation sample counts at which :meth:`observe` is called."""

    @abstractmethod
    def best_lower(self) -> float:
        """The reported bound when every one of n_max votes is for the selected class."""

    @abstractmethod
    def observe(self, progress: Progress, look: int, images: np.ndarray, counts: np.ndarray) -> None:
        """Update ``progress`` of ``images`` (indices of running images) with their cumulative counts at a look.

        Args:
            progress: every image's progress; only the entries of ``images`` are read and written.
            look: the index of the look in :meth:`looks`.
            images: the running images (indices into ``progress``).
            counts: their cumulative votes for the selected class after ``looks()[look]`` estimation samples.
        """

    def parameters(self) -> dict[str, Any]:
        """The design's settings, as recorded in ``certify_protocol.json`` and ``metrics.json``."""
        return {"design": self.name, "looks": self.looks(), "targets": list(self.targets)}

    def start(self, images: int, selection: Selection | None = None) -> Progress:
        """The progress of ``images`` images before any estimation sample.

        Args:
            images: how many images.
            selection: each image's selection votes for its selected class and the selection samples n0, kept in
                ``state`` (``selection_votes``, ``selection_samples``) for designs that set their prior with them;
                ``None``: none recorded (zero votes of zero).
        """
        votes, samples = selection if selection is not None else (np.zeros(images), 0)
        votes = np.asarray(votes, dtype=np.float64)
        if votes.shape != (images,) or np.any(votes < 0) or np.any(votes > samples):
            raise ValueError(f"need one selection vote count in [0, {samples}] per image, got {votes!r}")
        return Progress(
            lower=np.zeros(images),
            stopped=np.zeros(images, dtype=bool),
            samples=np.zeros(images, dtype=np.int64),
            counts=np.zeros(images, dtype=np.int64),
            reached=np.full(images, -1, dtype=np.int64),
            state={"selection_votes": votes, "selection_samples": np.full(images, float(samples))},
        )

    def finish(self, progress: Progress) -> Decisions:
        """The decisions: certified where the bound is >= 1/2, radius min(sigma Phi^-1(bound), cap), else abstain.

        A radius is never below the largest target the design certified (``reached``): sigma Phi^-1(Phi(r / sigma))
        can round to just below r, which would drop a certified image from the table at r.
        """
        certified = progress.lower >= 0.5
        with np.errstate(divide="ignore"):
            radius = np.minimum(self.goal.sigma * norm.ppf(np.where(certified, progress.lower, 0.5)), self.cap)
        decided = np.asarray(self.targets)[np.maximum(progress.reached, 0)]
        radius = np.where(certified & (progress.reached >= 0), np.maximum(radius, decided), radius)
        return Decisions(
            lower=progress.lower.copy(),
            certified=certified,
            radius=np.where(certified, radius, 0.0),
            samples=progress.samples.copy(),
            counts=progress.counts.copy(),
        )

    def _record(self, progress: Progress, images: np.ndarray, look: int, counts: np.ndarray) -> None:
        progress.samples[images] = self.looks()[look]
        progress.counts[images] = counts

    def _reached(self, lower: np.ndarray) -> np.ndarray:
        """The index of the largest target whose probability is <= each bound (-1: none)."""
        return np.searchsorted(self.probabilities, lower, side="right") - 1


Selection = tuple[np.ndarray, int]
"""Each image's votes for its selected class among the n0 selection samples, and n0."""


def run_design(
    design: Design,
    images: int,
    counts_at: Callable[[int, np.ndarray], np.ndarray],
    selection: Selection | None = None,
) -> Decisions:
    """Run ``design`` on ``images`` images whose votes come from ``counts_at``.

    Args:
        design: the design.
        images: how many images.
        counts_at: ``counts_at(samples, running)`` returns the cumulative votes for the selected class of the images
            ``running`` (indices) after ``samples`` estimation samples; it is called once per look, with the
            running images only, and the looks in increasing order (so it may draw the samples in between).
        selection: the selection votes for each selected class and n0 (drawn before and independently of the
            estimation samples); the ``informed`` design sets its prior with them, the others ignore them.
    """
    progress = design.start(images, selection)
    for look, samples in enumerate(design.looks()):
        running = np.flatnonzero(~progress.stopped)
        if running.size == 0:
            break
        design.observe(progress, look, running, np.asarray(counts_at(samples, running), dtype=np.int64))
    progress.stopped[:] = True
    return design.finish(progress)


class LooksDesign(Design):
    """rsbench's design of issue #6: Clopper-Pearson at alpha / S at S looks fixed in advance (a union bound).

    Args:
        goal: the targets and protocol.
        first_look: samples at the first look.
        growth: each look's cumulative count is the previous one times ``growth`` (up to n_max).
    """

    name = "looks"

    def __init__(self, goal: Goal, first_look: int = 1000, growth: float = 2.0) -> None:
        self.schedule = LookSchedule(min(first_look, goal.n_max), growth, goal.n_max)
        self.look_alpha = goal.alpha / len(self.schedule.looks())
        super().__init__(goal)

    @property
    def promise(self) -> str:  # noqa: D102
        return (
            f"decides every radius of the grid up to {self.cap:g}; Clopper-Pearson at alpha/{len(self.looks())} "
            "per look; reports the last look's radius up to the cap"
        )

    def looks(self) -> list[int]:  # noqa: D102
        return self.schedule.looks()

    def best_lower(self) -> float:  # noqa: D102
        return float(cp_lower(self.goal.n_max, self.goal.n_max, self.look_alpha)[()])

    def parameters(self) -> dict[str, Any]:  # noqa: D102
        return {**super().parameters(), "look_alpha": self.look_alpha}

    def observe(self, progress: Progress, look: int, images: np.ndarray, counts: np.ndarray) -> None:  # noqa: D102
        drawn = self.looks()[look]
        lower = cp_lower(counts, drawn, self.look_alpha)
        upper = cp_upper(counts, drawn, self.look_alpha)
        reached = self._reached(lower)
        following = np.minimum(reached + 1, len(self.targets) - 1)
        done = (reached == len(self.targets) - 1) | (upper < self.probabilities[following]) | (drawn >= self.goal.n_max)
        progress.lower[images] = lower  # the last look's bound (#6), not the largest seen
        progress.reached[images] = reached
        self._record(progress, images, look, counts)
        progress.stopped[images] = done


class BettingDesign(Design):
    """A betting confidence sequence, free to look at every look, plus optionally one Clopper-Pearson bound at n_max.

    Args:
        goal: the targets and protocol.
        prior: the mixture the bettor bets with (:class:`rsbench.certify.algorithm.confidence.BetaMixture`).
        first_look: samples at the first look.
        growth: each look's cumulative count is the previous one times ``growth`` (looks are free: a small growth
            only bounds how far past its stopping point an image samples).
        final_share: the share of alpha spent on a Clopper-Pearson bound at n_max (0: the sequence alone).
        futility: the level of the upper end of the sequence that stops an image whose next target is out of reach.
    """

    name = "betting"

    def __init__(
        self,
        goal: Goal,
        prior: BetaMixture | None = None,
        first_look: int = 100,
        growth: float = 1.1,
        final_share: float = 0.25,
        futility: float = 0.05,
    ) -> None:
        if not 0 <= final_share < 1:
            raise ValueError(f"final_share must be in [0, 1), got {final_share}")
        check_alpha(futility)
        self.prior = prior or BetaMixture(a=(0.5, 1.0), b=(0.5, 0.05), weights=(0.5, 0.5))
        self.schedule = LookSchedule(min(first_look, goal.n_max), growth, goal.n_max)
        self.final_share = final_share
        self.sequence_alpha = goal.alpha * (1 - final_share)
        self.final_alpha = goal.alpha * final_share
        self.futility = futility
        super().__init__(goal)
        self.reach = np.array([self._reach_probability(p) for p in self.probabilities])

    @property
    def promise(self) -> str:  # noqa: D102
        final = f" and Clopper-Pearson at n_max at {self.final_share:g} alpha" if self.final_share else ""
        return (
            f"decides every radius of the grid up to {self.cap:g}; betting confidence sequence at "
            f"{1 - self.final_share:g} alpha{final}; reports the largest valid radius up to the cap"
        )

    def looks(self) -> list[int]:  # noqa: D102
        return self.schedule.looks()

    def parameters(self) -> dict[str, Any]:  # noqa: D102
        prior = {"a": list(self.prior.a), "b": list(self.prior.b), "weights": list(self.prior.weights)}
        return {**super().parameters(), "prior": prior, "final_share": self.final_share, "futility": self.futility}

    def _final_bound(self, count: float) -> float:
        """The reported bound at n_max from ``count`` votes (a real count interpolates)."""
        n = self.goal.n_max
        bound = float(betting_lower(self.prior, np.array(count), np.array(float(n)), self.sequence_alpha)[()])
        if self.final_share:
            bound = max(bound, float(cp_lower(np.array(count), n, self.final_alpha)[()]))
        return bound

    def best_lower(self) -> float:  # noqa: D102
        return self._final_bound(self.goal.n_max)

    def _reach_probability(self, target: float) -> float:
        """The vote probability q whose expected count q n_max gives the final bound ``target`` (half the time)."""
        n = self.goal.n_max
        return brentq(lambda count: self._final_bound(count) - target, 0.0, float(n), xtol=1e-6) / n

    def observe(self, progress: Progress, look: int, images: np.ndarray, counts: np.ndarray) -> None:  # noqa: D102
        drawn = self.looks()[look]
        k, n = counts.astype(np.float64), np.full(len(counts), float(drawn))
        log_marginal = self.prior.log_marginal(k, n)
        reached = progress.reached[images].copy()
        certifies = self._rejects(log_marginal, k, n, self.probabilities[None, :], self.sequence_alpha, below=True)
        reached = np.maximum(reached, np.where(certifies.any(axis=1), _last_true(certifies), -1))
        last = drawn >= self.goal.n_max
        if last and self.final_share:
            reached = np.maximum(reached, self._reached(cp_lower(counts, drawn, self.final_alpha)))
        following = np.minimum(reached + 1, len(self.targets) - 1)
        futile = self._rejects(log_marginal, k, n, self.reach[following][:, None], self.futility, below=False).ravel()
        done = (reached == len(self.targets) - 1) | futile | last
        progress.reached[images] = reached
        self._record(progress, images, look, counts)
        progress.stopped[images] = done
        finished = images[done]
        if finished.size:
            lower = betting_lower(self.prior, k[done], n[done], self.sequence_alpha)
            if last and self.final_share:
                lower = np.maximum(lower, cp_lower(counts[done], drawn, self.final_alpha))
            target_bound = np.where(reached[done] >= 0, self.probabilities[np.maximum(reached[done], 0)], 0.0)
            progress.lower[finished] = np.maximum(lower, target_bound)

    def _rejects(
        self,
        log_marginal: np.ndarray,
        k: np.ndarray,
        n: np.ndarray,
        m: np.ndarray,
        alpha: float,
        *,
        below: bool,
    ) -> np.ndarray:
        """Whether the sequence at level alpha excludes m, on the side below the vote share k/n or above it.

        Excluding m below k/n certifies pA > m; excluding it above says pA < m. ``m`` broadcasts against
        ``[images, 1]``; m = inf (an unreachable target) is never excluded.
        """
        k2, n2, marginal = k[:, None], n[:, None], log_marginal[:, None]
        share = k2 / n2
        side = (m < share) if below else (m > share)
        finite = np.isfinite(m) & (m > 0) & (m < 1)
        safe = np.where(finite, m, 0.5)
        with np.errstate(divide="ignore", invalid="ignore"):
            likelihood = np.where(k2 > 0, k2 * np.log(safe), 0.0) + np.where(n2 > k2, (n2 - k2) * np.log1p(-safe), 0.0)
        wealth = marginal - likelihood
        if not below:  # m = 1 above every share below 1: excluded once a single vote is missing
            wealth = np.where(m >= 1, np.where(k2 < n2, np.inf, -np.inf), wealth)
            finite = finite | (m >= 1)
        return side & finite & (wealth >= math.log(1.0 / alpha))


class AdaptiveDesign(Design):
    """Horváth et al.'s adaptive sampling for one target radius: fresh stages, Clopper-Pearson at alpha / s each.

    Args:
        goal: the protocol; only the last target (the cap) is decided.
        stages: the samples of each stage (fresh); ``None``: Horváth et al.'s example, n/100, n/10 and 5n/4
            (1,000, 10,000 and 125,000 for n = 100,000; at most 136,000 samples).
        futility: beta, the level of the upper bound behind early abstention (their default 1e-4), split over the
            s - 1 early stages.
    """

    name = "adaptive"

    def __init__(self, goal: Goal, stages: Sequence[int] | None = None, futility: float = 1e-4) -> None:
        n = goal.n_max
        self.stages = tuple(stages) if stages is not None else (max(1, n // 100), max(1, n // 10), n + n // 4)
        if not self.stages or min(self.stages) < 1:
            raise ValueError(f"stages must be sample counts >= 1, got {self.stages}")
        check_alpha(futility)
        self.stage_alpha = goal.alpha / len(self.stages)
        self.futility = futility
        super().__init__(Goal(goal.sigma, goal.alpha, goal.n_max, (goal.targets[-1],)))

    @property
    def promise(self) -> str:  # noqa: D102
        return (
            f"decides one radius, {self.cap:g} (certified at it, or abstains); fresh stages {list(self.stages)} at "
            f"alpha/{len(self.stages)} each"
        )

    def looks(self) -> list[int]:  # noqa: D102
        return [int(total) for total in np.cumsum(self.stages)]

    def best_lower(self) -> float:  # noqa: D102
        return float(cp_lower(max(self.stages), max(self.stages), self.stage_alpha)[()])

    def parameters(self) -> dict[str, Any]:  # noqa: D102
        return {**super().parameters(), "stages": list(self.stages), "futility": self.futility}

    def observe(self, progress: Progress, look: int, images: np.ndarray, counts: np.ndarray) -> None:  # noqa: D102
        before = progress.state.setdefault("before", np.zeros(len(progress.lower), dtype=np.int64))
        fresh, size = counts - before[images], self.stages[look]
        lower = cp_lower(fresh, size, self.stage_alpha)
        certified = lower >= self.probabilities[-1]
        early = look < len(self.stages) - 1
        futile = np.zeros(len(images), dtype=bool)
        if early:
            upper = cp_upper(fresh, size, self.futility / (len(self.stages) - 1))
            futile = upper < self.probabilities[-1]
        done = certified | futile | (not early)
        before[images] = counts
        progress.lower[images] = np.where(certified, lower, 0.0)  # certified at the target, or abstain
        progress.reached[images] = np.where(certified, 0, -1)
        self._record(progress, images, look, counts)
        progress.stopped[images] = done


class InformedDesign(BettingDesign):
    """``betting`` with the prior updated by the selection votes and futility judged by the predictive probability.

    Two changes to :class:`BettingDesign`, one per side of the decision:

    - **Where the bets go** (soundness unchanged): the mixture the bettor bets with is ``prior`` updated by the
      image's n0 selection votes (k0 for the selected class), its posterior. The selection votes are drawn before
      and independently of the estimation votes, so this prior is fixed before the first estimation vote and W_n(m)
      (:mod:`rsbench.certify.algorithm.confidence`) is still a test martingale under pA = m; the selection votes update
      the prior but are not evidence. A prior spread over (0, 1) spends much of the sequence's level on alternatives
      that would be decided within the first samples, before the first look; the posterior spends it near the
      image's own vote probability, where the looks decide.
    - **When an image gives up** (only cost and power): an image stops once the predictive probability that it
      certifies its next target by n_max is below ``futility``: under the posterior Beta(1/2 + k0 + k,
      1/2 + n0 - k0 + n - k) of pA (Jeffreys' prior), the final count k + X, X ~ BetaBinomial(n_max - n, ...), is
      compared with the count the final bound needs (normal approximation; stochastic curtailment). ``betting``
      instead waits until its confidence sequence excludes the vote probability that reaches the target half the
      time, which costs the sequence's regret on the futility side as well.

    Args:
        goal: the targets and protocol.
        prior: the mixture before the selection votes.
        first_look: samples at the first look.
        growth: each look's cumulative count is the previous one times ``growth`` (1.05: looks are free, and a
            finer schedule stops an image closer to where its bound decides; 1.1 drew 4% more on the replay).
        final_share: the share of alpha spent on a Clopper-Pearson bound at n_max.
        futility: gamma, the predictive probability of certifying the next target below which an image stops
            (0.02: 0.01 kept the same accuracy on the replay and drew 4-7% more).
    """

    name = "informed"

    def __init__(
        self,
        goal: Goal,
        prior: BetaMixture | None = None,
        first_look: int = 100,
        growth: float = 1.05,
        final_share: float = 0.25,
        futility: float = 0.02,
    ) -> None:
        super().__init__(goal, prior, first_look, growth, final_share, futility)
        self.needed = self.reach * goal.n_max  # the final count that reaches each target (half the time)

    @property
    def promise(self) -> str:  # noqa: D102
        final = f" and Clopper-Pearson at n_max at {self.final_share:g} alpha" if self.final_share else ""
        return (
            f"decides every radius of the grid up to {self.cap:g}; betting confidence sequence at "
            f"{1 - self.final_share:g} alpha with the prior updated by the selection votes{final}; reports the "
            "largest valid radius up to the cap"
        )

    def observe(self, progress: Progress, look: int, images: np.ndarray, counts: np.ndarray) -> None:  # noqa: D102
        drawn = self.looks()[look]
        k, n = counts.astype(np.float64), np.full(len(counts), float(drawn))
        votes = (progress.state["selection_votes"][images], progress.state["selection_samples"][images])
        log_marginal = self.prior.log_predictive(k, n, votes)
        reached = progress.reached[images].copy()
        certifies = self._rejects(log_marginal, k, n, self.probabilities[None, :], self.sequence_alpha, below=True)
        reached = np.maximum(reached, np.where(certifies.any(axis=1), _last_true(certifies), -1))
        last = drawn >= self.goal.n_max
        if last and self.final_share:
            reached = np.maximum(reached, self._reached(cp_lower(counts, drawn, self.final_alpha)))
        following = np.minimum(reached + 1, len(self.targets) - 1)
        futile = self._unlikely(k, n, votes, self.needed[following]) if not last else np.zeros(len(k), dtype=bool)
        done = (reached == len(self.targets) - 1) | futile | last
        progress.reached[images] = reached
        self._record(progress, images, look, counts)
        progress.stopped[images] = done
        finished = images[done]
        if finished.size:
            chosen = (votes[0][done], votes[1][done])
            lower = betting_lower(self.prior, k[done], n[done], self.sequence_alpha, chosen)
            if last and self.final_share:
                lower = np.maximum(lower, cp_lower(counts[done], drawn, self.final_alpha))
            target_bound = np.where(reached[done] >= 0, self.probabilities[np.maximum(reached[done], 0)], 0.0)
            progress.lower[finished] = np.maximum(lower, target_bound)

    def _unlikely(
        self, k: np.ndarray, n: np.ndarray, votes: tuple[np.ndarray, np.ndarray], needed: np.ndarray
    ) -> np.ndarray:
        """Whether the predictive probability of reaching ``needed`` votes by n_max is below ``futility``."""
        a = 0.5 + votes[0] + k
        b = 0.5 + (votes[1] - votes[0]) + (n - k)
        remaining = self.goal.n_max - n
        mean = a / (a + b)
        variance = remaining * mean * (1 - mean) * (a + b + remaining) / (a + b + 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (needed - 0.5 - k - remaining * mean) / np.sqrt(np.maximum(variance, 1e-12))
        return np.where(np.isfinite(needed), norm.sf(z), 0.0) < self.futility


def _last_true(mask: np.ndarray) -> np.ndarray:
    """The index of the last True entry of each row (rows must hold one)."""
    return mask.shape[1] - 1 - np.argmax(mask[:, ::-1], axis=1)


DESIGNS: dict[str, type[Design]] = {d.name: d for d in (LooksDesign, BettingDesign, InformedDesign, AdaptiveDesign)}


def make_design(name: str, goal: Goal, **parameters: Any) -> Design:
    """The design called ``name`` (looks, betting, informed, adaptive) for ``goal``, with its own parameters."""
    if name not in DESIGNS:
        raise ValueError(f"unknown sequential design {name!r}; allowed: {sorted(DESIGNS)}")
    return DESIGNS[name](goal, **parameters)
