"""Bounds on a Bernoulli mean from vote counts, vectorised over images: fixed-time and time-uniform.

Sequential CERTIFY (:mod:`rsbench.certify.algorithm.designs`) bounds pA, the probability that the base classifier votes
for the selected class, from ``k`` of ``n`` votes, for many images at once (the replay benchmark) or one image (the
pipeline). Two kinds of bound live here, both computed in float64 on the CPU:

- **Clopper-Pearson** (fixed time): the one-sided (1 - a) bounds ``Beta(k, n-k+1)`` quantile at ``a`` and
  ``Beta(k+1, n-k)`` quantile at ``1 - a``, exactly :func:`rsbench.certify.algorithm.bounds.clopper_pearson_lower` (and
  the statsmodels ``proportion_confint(method="beta")`` Cohen et al. call), for arrays. Valid at one sample size fixed
  in advance.
- **Betting confidence sequence** (time uniform). Bet on the votes at a mixture of odds: the capital of a bettor who
  starts with 1 and bets as the Bayes mixture ``pi`` over the vote probability q is, after ``k`` of ``n`` votes,

      W_n(m) = M(k, n) / (m^k (1-m)^(n-k)),   M(k, n) = integral of q^k (1-q)^(n-k) d pi(q),

  the likelihood ratio of the mixture against pA = m (Robbins' method of mixtures). Under pA = m it is a nonnegative
  martingale started at 1, so by Ville's inequality P(exists n: W_n(pA) >= 1/a) <= a, and
  {m : W_n(m) < 1/a} is a (1 - a) confidence sequence: it holds at every n at once, hence at any stopping time,
  however the stopping rule looks at the data. This is the betting capital process K_t(m) = prod_i (1 + lambda_i
  (X_i - m)) of Waudby-Smith and Ramdas ("Estimating means of bounded random variables by betting", JRSS-B 2024)
  with the bet lambda_i = (q_i - m) / (m (1 - m)) placed at the mixture's predictive probability q_i; for {0, 1}
  votes it depends on the counts only, so it can be simulated with binomial increments. Voráček ("Treatment of
  statistical estimation problems in randomized smoothing", 2024; vvoracek/RS_conf_seq, ``thresholds.py``) tests
  "robust at r?" with the Krichevsky-Trofimov bet q_i = (k_i + 1/2) / (n_i + 1), the mixture over Beta(1/2, 1/2).
  Since log W_n(m) is convex in m with its minimum (<= 0) at k/n, the set is an interval; its ends are found by
  bisection, and every end is rounded outwards.

Priors are finite mixtures of Beta(a, b) densities (:class:`BetaMixture`); mass near 1 (small b) makes the bound
almost as tight as Clopper-Pearson for images whose every vote is right, which are the images that cost the most.

The prior may be any distribution fixed before the first estimation vote: W_n(m) is a martingale under pA = m for
every such prior, so Ville's inequality holds conditionally on it. CERTIFY's n0 selection votes are drawn before
and independently of the estimation votes, so the mixture updated by them (its posterior given k0 of n0 votes,
``prior_votes``) is such a prior: M(k, n | k0, n0) = M(k0 + k, n0 + n) / M(k0, n0), and the selection votes are no
evidence (the likelihood in W_n counts the estimation votes only). This is the image-specific prior of Cullen,
Montague and Rubinstein ("Halt Fast! Early stopping for certified robustness", arXiv 2606.27694), who predict it with
a meta-learner; here it comes from votes CERTIFY draws anyway. It concentrates the bets near the image's own vote
probability, so the wealth that a prior spread over (0, 1) spends on alternatives far from it (the ones that would
be decided within the first few samples, before the first look) is kept for the looks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import betaln
from scipy.stats import beta

BISECTION_STEPS = 64  # halves [0, 1] to below 1e-19: the bound is exact to float64 resolution


def _counts(successes: np.ndarray | int, trials: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    k = np.asarray(successes, dtype=np.float64)
    n = np.broadcast_to(np.asarray(trials, dtype=np.float64), k.shape)
    if np.any(k < 0) or np.any(k > n) or np.any(n < 1):
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes!r} of {trials!r}")
    return k, n


def cp_lower(successes: np.ndarray | int, trials: np.ndarray | int, alpha: float) -> np.ndarray:
    """One-sided (1 - alpha) Clopper-Pearson lower bounds, elementwise: Beta(k, n-k+1)'s alpha-quantile, 0 at k = 0."""
    k, n = _counts(successes, trials)
    with np.errstate(invalid="ignore"):
        bound = beta.ppf(alpha, np.maximum(k, 1), n - k + 1)
    return np.where(k == 0, 0.0, bound)


def cp_upper(successes: np.ndarray | int, trials: np.ndarray | int, alpha: float) -> np.ndarray:
    """One-sided (1 - alpha) Clopper-Pearson upper bounds: the Beta(k+1, n-k) (1 - alpha)-quantile, 1 at k = n."""
    k, n = _counts(successes, trials)
    with np.errstate(invalid="ignore"):
        bound = beta.isf(alpha, k + 1, np.maximum(n - k, 1))
    return np.where(k == n, 1.0, bound)


@dataclass(frozen=True)
class BetaMixture:
    """A prior over the vote probability: weights[i] * Beta(a[i], b[i]).

    Attributes:
        a, b: the Beta shape parameters (> 0), one per component.
        weights: the mixture weights (> 0, summing to 1).
    """

    a: tuple[float, ...] = (0.5,)
    b: tuple[float, ...] = (0.5,)
    weights: tuple[float, ...] = (1.0,)

    def __post_init__(self) -> None:
        if not len(self.a) == len(self.b) == len(self.weights) >= 1:
            raise ValueError(f"a, b and weights need one entry per component, got {self.a}, {self.b}, {self.weights}")
        if min(*self.a, *self.b, *self.weights) <= 0 or not np.isclose(sum(self.weights), 1.0):
            raise ValueError(f"need a, b, weights > 0 and weights summing to 1, got {self}")

    def log_predictive(
        self, successes: np.ndarray, trials: np.ndarray, prior_votes: tuple[np.ndarray, np.ndarray] | None = None
    ) -> np.ndarray:
        """log M(k, n | k0, n0) = log M(k0 + k, n0 + n) - log M(k0, n0): the posterior mixture's marginal.

        The mixture updated by ``prior_votes`` = (k0 of n0), votes drawn independently of the k of n (Bayes' rule
        maps a mixture of Beta(a, b) to a mixture of Beta(a + k0, b + n0 - k0) with reweighted components); with
        no ``prior_votes``, :meth:`log_marginal`.
        """
        if prior_votes is None:
            return self.log_marginal(successes, trials)
        k0, n0 = (np.asarray(v, dtype=np.float64) for v in prior_votes)
        k, n = np.asarray(successes, dtype=np.float64), np.asarray(trials, dtype=np.float64)
        return self.log_marginal(k + k0, n + n0) - self.log_marginal(k0, n0)

    def log_marginal(self, successes: np.ndarray, trials: np.ndarray) -> np.ndarray:
        """log M(k, n): the log-probability the mixture gives to any one sequence with k successes in n trials."""
        k, n = np.asarray(successes, dtype=np.float64), np.asarray(trials, dtype=np.float64)
        total: np.ndarray | None = None
        for a, b, w in zip(self.a, self.b, self.weights, strict=True):
            term = math.log(w) - float(betaln(a, b)) + betaln(k + a, n - k + b)
            total = term if total is None else np.logaddexp(total, term)
        assert total is not None
        return np.asarray(total)


def log_wealth(prior: BetaMixture, successes: np.ndarray, trials: np.ndarray, m: np.ndarray) -> np.ndarray:
    """log W_n(m) = log M(k, n) - k log m - (n - k) log(1 - m), elementwise (+inf where m is impossible)."""
    k, n = _counts(successes, trials)
    return prior.log_marginal(k, n) - log_likelihood(k, n, np.asarray(m, dtype=np.float64))


def log_likelihood(k: np.ndarray, n: np.ndarray, m: np.ndarray) -> np.ndarray:
    """log(m^k (1 - m)^(n - k)), elementwise, with 0 log 0 = 0 (-inf where m makes the counts impossible)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(k > 0, k * np.log(m), 0.0) + np.where(n > k, (n - k) * np.log1p(-m), 0.0)


def betting_lower(
    prior: BetaMixture,
    successes: np.ndarray,
    trials: np.ndarray,
    alpha: float,
    prior_votes: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """The lower end of the betting confidence sequence at level alpha: inf {m : W_n(m) < 1/alpha}.

    Valid simultaneously for every n (and so at a data-dependent stopping time) with probability >= 1 - alpha.
    The bisection keeps the largest m it has seen with W_n(m) >= 1/alpha, so the bound is never rounded up.

    Args:
        prior: the mixture the bettor bets with.
        successes: votes for the class among ``trials``.
        trials: votes drawn.
        alpha: the level.
        prior_votes: ``(k0, n0)``: votes drawn independently of these (the selection votes) that update the prior
            to its posterior before the first bet (:meth:`BetaMixture.log_predictive`); they are no evidence.
    """
    k, n = _counts(successes, trials)
    threshold = np.log(1.0 / alpha)
    log_marginal = prior.log_predictive(k, n, prior_votes)
    low, high = np.zeros_like(k), k / n  # W is decreasing on [0, k/n], W(k/n) <= 1 < 1/alpha
    for _ in range(BISECTION_STEPS):
        middle = (low + high) / 2
        rejected = log_marginal - log_likelihood(k, n, middle) >= threshold
        low, high = np.where(rejected, middle, low), np.where(rejected, high, middle)
    return np.where(k == 0, 0.0, low)


def betting_upper(
    prior: BetaMixture,
    successes: np.ndarray,
    trials: np.ndarray,
    alpha: float,
    prior_votes: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """The upper end of the betting confidence sequence at level alpha: sup {m : W_n(m) < 1/alpha}."""
    k, n = _counts(successes, trials)
    mirrored = None
    if prior_votes is not None:  # the prior of 1 - q is updated by the votes against the class
        mirrored = (np.asarray(prior_votes[1]) - np.asarray(prior_votes[0]), np.asarray(prior_votes[1]))
    return 1.0 - betting_lower(_mirrored(prior), n - k, n, alpha, mirrored)


def _mirrored(prior: BetaMixture) -> BetaMixture:
    """The prior of 1 - q: Beta(a, b) becomes Beta(b, a)."""
    return BetaMixture(a=prior.b, b=prior.a, weights=prior.weights)
