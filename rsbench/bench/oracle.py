"""A Bernoulli stand-in for a released log's base classifier, one vote probability per image (a model of the model).

A Cohen-format log records, per test image, the class fixed-n CERTIFY returned and its radius R, hence its lower
bound pA_lower = Phi(R / sigma) (n = 100,000 estimation samples, alpha = 0.001 for every released log rsbench
ships). The replay benchmark (:mod:`rsbench.bench.replay`) needs the vote probability pA behind it, which the log
does not hold; this module models it, image by image:

- **certified below the cap** (0 < pA_lower < alpha^(1/n)): pA is the vote share whose expected count makes fixed-n
  CERTIFY return exactly the logged bound, i.e. the real k solving Beta^-1(alpha; k, n - k + 1) = pA_lower, and
  pA = k / n. Fixed-n CERTIFY on this oracle then reproduces the log's bound at its median; half the replayed
  fixed-n radii land above the logged one, half below.
- **at the cap** (every one of the n votes was for the class): the log says only that pA is close to 1. The default,
  ``cap="posterior"``, draws pA from the posterior given n of n votes under a uniform prior, Beta(n + 1, 1) (mean
  1 - 1/(n+2), about 1 - 1e-5); ``cap="one"`` sets pA = 1, the most favourable case for early stopping.
- **abstained** (pA_lower < 1/2): the log holds no class. The class selection picks has a vote probability anywhere
  below the point where fixed-n would certify half the time (q_half, about 0.505 at n = 100,000); the default,
  ``abstained="uniform"``, draws it uniformly on [0, q_half]; a number fixes it (0.5, the costliest case for a
  sequential design, is the sensitivity check). Abstained images count as wrong, as in the log.
- **selection**: CERTIFY's n0 selection samples pick the logged class unless a competitor outvotes it; the oracle
  models the worst case, one competitor with all of 1 - pA, and then that competitor (probability 1 - pA, below
  1/2) is estimated instead. Both fixed-n and the sequential designs see the same selection.

The oracle's true radius for the selected class is sigma * Phi^-1(pA) (Cohen et al.'s Theorem 1 with pB = 1 - pA):
a certificate above it, or any certificate when pA < 1/2, is a false certificate. Point 4 of the benchmark (the real
pipeline on real networks) is the check on this model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import betainc
from scipy.stats import binom, norm

from rsbench.certify.algorithm.confidence import cp_lower

CAP_MODELS = ("posterior", "one")


@dataclass(frozen=True)
class Assumptions:
    """How the oracle fills in what a log does not say.

    Attributes:
        cap: ``posterior`` (pA ~ Beta(n + 1, 1) for images at the cap) or ``one`` (pA = 1).
        abstained: ``uniform`` (the selected class's pA ~ U[0, q_half] for abstained images) or a fixed probability.
    """

    cap: str = "posterior"
    abstained: str | float = "uniform"

    def __post_init__(self) -> None:
        if self.cap not in CAP_MODELS:
            raise ValueError(f"cap model must be one of {list(CAP_MODELS)}, got {self.cap!r}")
        if self.abstained != "uniform" and not (isinstance(self.abstained, float) and 0 <= self.abstained <= 0.51):
            raise ValueError(f"abstained must be 'uniform' or a probability in [0, 0.51], got {self.abstained!r}")

    def label(self) -> str:
        """A short description, e.g. ``cap=posterior, abstained=uniform``."""
        return f"cap={self.cap}, abstained={self.abstained}"


@dataclass(frozen=True)
class Oracle:
    """Per-image vote probabilities standing in for a log's base classifier.

    Attributes:
        p_selected: the true vote probability of the class selection picks, per image (after the selection draw).
        correct: whether that class is the label.
        logged_correct: the log's own ``correct`` column (for checking the oracle's fixed-n replay against it).
        logged_radius: the log's radii (0 where it abstained).
        at_cap: the log certified the image at the cap (n of n votes).
        abstained: the log abstained on the image.
        sigma, n0, n, alpha: the log's protocol.
    """

    p_selected: np.ndarray
    correct: np.ndarray
    logged_correct: np.ndarray
    logged_radius: np.ndarray
    at_cap: np.ndarray
    abstained: np.ndarray
    sigma: float
    n0: int
    n: int
    alpha: float

    def __len__(self) -> int:
        return len(self.p_selected)

    def true_radius(self) -> np.ndarray:
        """sigma * Phi^-1(pA) of the selected class (-inf below 1/2: every certificate of it is false)."""
        with np.errstate(divide="ignore"):
            return np.where(self.p_selected >= 0.5, self.sigma * norm.ppf(self.p_selected), -np.inf)


def count_for_bound(bound: np.ndarray, n: int, alpha: float) -> np.ndarray:
    """The real count k in [0, n] with Clopper-Pearson lower bound Beta^-1(alpha; k, n - k + 1) equal to ``bound``.

    The bound increases with k, so a bisection finds it (the bound is >= ``bound`` exactly when the regularised
    incomplete beta function I_bound(k, n - k + 1) <= alpha); bounds above the k = n bound give n.
    """
    bound = np.asarray(bound, dtype=np.float64)
    low, high = np.zeros_like(bound), np.full_like(bound, float(n))
    for _ in range(60):
        middle = (low + high) / 2
        above = betainc(np.maximum(middle, 1e-12), n - middle + 1, bound) <= alpha
        low, high = np.where(above, low, middle), np.where(above, middle, high)
    return high


def half_point(n: int, alpha: float) -> float:
    """q_half: the vote probability at which fixed-n CERTIFY's expected count gives pA_lower = 1/2."""
    return float(brentq(lambda k: float(cp_lower(np.array(k), n, alpha)[()]) - 0.5, 1.0, float(n))) / n


def build_oracle(
    *,
    label: np.ndarray,
    predict: np.ndarray,
    radius: np.ndarray,
    sigma: float,
    n0: int,
    n: int,
    alpha: float,
    assumptions: Assumptions,
    rng: np.random.Generator,
) -> Oracle:
    """The oracle of one log (columns as in Cohen et al.'s format; see the module docstring for the model).

    Args:
        label: the log's labels.
        predict: the log's predictions (-1: abstained).
        radius: the log's radii.
        sigma: the noise level.
        n0: selection samples.
        n: estimation samples.
        alpha: the failure probability.
        assumptions: the cap and abstention models.
        rng: draws the modelled probabilities and the selection.
    """
    predict, radius = np.asarray(predict), np.asarray(radius, dtype=np.float64)
    abstained = predict < 0
    bound = np.where(abstained, 0.5, norm.cdf(radius / sigma))
    at_cap = ~abstained & (bound > float(cp_lower(np.array(n - 0.5), n, alpha)[()]))
    p_top = count_for_bound(np.minimum(bound, 1.0), n, alpha) / n
    if assumptions.cap == "posterior":
        p_top = np.where(at_cap, rng.beta(n + 1, 1, size=len(bound)), p_top)
    else:
        p_top = np.where(at_cap, 1.0, p_top)
    if assumptions.abstained == "uniform":
        modelled = rng.uniform(0.0, half_point(n, alpha), size=len(bound))
    else:
        modelled = np.full(len(bound), float(assumptions.abstained))
    p_top = np.where(abstained, modelled, p_top)
    # selection: the logged class wins the n0 votes against one competitor holding 1 - pA (ties: a coin)
    wins = binom.sf(n0 // 2, n0, p_top) + (0.5 * binom.pmf(n0 // 2, n0, p_top) if n0 % 2 == 0 else 0.0)
    selected_top = abstained | (rng.uniform(size=len(bound)) < wins)
    logged_correct = (predict == np.asarray(label)) & ~abstained
    return Oracle(
        p_selected=np.where(selected_top, p_top, 1.0 - p_top),
        correct=selected_top & logged_correct,
        logged_correct=logged_correct,
        logged_radius=np.where(abstained, 0.0, radius),
        at_cap=at_cap,
        abstained=abstained,
        sigma=sigma,
        n0=n0,
        n=n,
        alpha=alpha,
    )


def selection_votes(oracle: Oracle, rng: np.random.Generator) -> np.ndarray:
    """Each image's n0 selection votes for the class selection picked, drawn as the oracle's selection implies.

    The oracle's selection is two classes, the picked one holding ``p_selected`` of the votes and winning the n0
    votes, so its count is Bin(n0, p) conditioned on being at least n0 / 2 (inverse-CDF sampling); an abstained image's
    class is picked whatever its count (with more classes a plurality below half wins), so its count is Bin(n0, p).
    Sequential CERTIFY's ``informed`` design sets its prior with them; they are drawn from their own stream, so every
    other figure of a replay stays as it was.
    """
    p = np.clip(oracle.p_selected, 0.0, 1.0)
    least = np.where(oracle.abstained, 0, math.ceil(oracle.n0 / 2))
    below = np.where(least > 0, binom.cdf(least - 1, oracle.n0, p), 0.0)
    u = below + rng.uniform(size=len(p)) * (1.0 - below)
    votes = binom.ppf(np.minimum(u, 1.0), oracle.n0, p)
    return np.clip(np.nan_to_num(votes, nan=float(oracle.n0)), least, oracle.n0)
