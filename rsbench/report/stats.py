"""Uncertainty of ACR and certified accuracy: over the certified images, over seeds, and paired against a baseline.

Every interval and test comes from scipy or statsmodels; this module only chooses them and handles the degenerate
cases they leave undefined (no variance at all):

- ACR is the mean of the per-image scores ``correct * radius`` (Zhai et al. 2020, Eq. 10), so its standard error over
  images is ``sd / sqrt(N)`` (``scipy.stats.sem``) and its interval the t interval, or a BCa bootstrap
  (``scipy.stats.bootstrap``).
- Certified accuracy at r is a binomial proportion over the images: ``statsmodels`` ``proportion_confint``
  (Clopper-Pearson by default, the exact interval, like the certificate's own bound).
- Two rows certified on the same images are compared image by image: the mean difference of the scores with the
  paired t test (``scipy.stats.ttest_rel``, its interval included) and the Wilcoxon signed-rank test; certified
  accuracy with McNemar's exact test on the discordant images (``statsmodels`` ``mcnemar``).
- Seeds: runs of one setting are summarised by mean and sample sd; two settings with several seeds each are also
  compared by Welch's t test on the per-seed values (``scipy.stats.ttest_ind``).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

MeanInterval = Literal["t", "bootstrap"]
BOOTSTRAP_RESAMPLES = 9999


@dataclass(frozen=True)
class Estimate:
    """A value with its confidence interval [low, high] and, where it has one, its standard error."""

    value: float
    low: float
    high: float
    se: float = math.nan


def mean_interval(scores: ArrayLike, confidence: float = 0.95, method: MeanInterval = "t", seed: int = 0) -> Estimate:
    """The mean of per-image scores (ACR for ``correct * radius``), its SE over images and a confidence interval.

    Args:
        scores: one value per certified image.
        confidence: the coverage of the interval.
        method: ``t``: mean +- t_{N-1} SE with SE = sd / sqrt(N); ``bootstrap``: BCa interval of
            ``scipy.stats.bootstrap`` with 9,999 resamples drawn from ``seed``.
        seed: the bootstrap's random seed (the interval is reproducible).
    """
    values = np.asarray(scores, dtype=np.float64)
    mean = float(np.mean(values))
    if len(values) < 2 or np.all(values == values[0]):
        return Estimate(mean, mean, mean, 0.0 if len(values) >= 2 else math.nan)
    with _nearly_constant_is_fine():
        se = float(stats.sem(values))
    if method == "t":
        low, high = stats.t.interval(confidence, df=len(values) - 1, loc=mean, scale=se)
    elif method == "bootstrap":
        result = stats.bootstrap(
            (values,),
            np.mean,
            confidence_level=confidence,
            n_resamples=BOOTSTRAP_RESAMPLES,
            method="BCa",
            rng=np.random.default_rng(seed),
        )
        low, high = result.confidence_interval
    else:
        raise ValueError(f"interval method must be 't' or 'bootstrap', got {method!r}")
    return Estimate(mean, float(low), float(high), se)


def proportion_interval(successes: float, total: int, confidence: float = 0.95, method: str = "beta") -> Estimate:
    """A binomial proportion with its interval (``statsmodels`` ``proportion_confint``; ``beta``: Clopper-Pearson).

    ``successes`` may be fractional (a mean over seeds times the image count): the interval is then that of one run
    with the same proportion, conservative for a seed average.
    """
    low, high = proportion_confint(successes, total, alpha=1 - confidence, method=method)
    p = successes / total
    return Estimate(p, float(low), float(high), math.sqrt(p * (1 - p) / total))


@dataclass(frozen=True)
class PairedDifference:
    """mean(a - b) over paired images, its paired-t interval, and the paired t and Wilcoxon p-values."""

    difference: float
    low: float
    high: float
    p_value: float
    p_wilcoxon: float


def paired_difference(a: ArrayLike, b: ArrayLike, confidence: float = 0.95) -> PairedDifference:
    """Compare two rows image by image (``a[i]`` and ``b[i]`` belong to the same image).

    Identical rows give difference 0, interval [0, 0] and p = 1; a constant non-zero difference gives p = 0 (the
    limits scipy leaves undefined as nan).
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"paired samples must have the same length, got {x.shape} and {y.shape}")
    d = x - y
    mean = float(np.mean(d))
    if np.all(d == d[0]):
        p = 1.0 if mean == 0 else 0.0
        return PairedDifference(mean, mean, mean, p, p)
    with _nearly_constant_is_fine():
        test = stats.ttest_rel(x, y)
        interval = test.confidence_interval(confidence)
    nonzero = d[d != 0]
    p_wilcoxon = float(stats.wilcoxon(nonzero).pvalue) if len(nonzero) else 1.0
    return PairedDifference(mean, float(interval.low), float(interval.high), float(test.pvalue), p_wilcoxon)


@dataclass(frozen=True)
class McNemar:
    """Certified accuracy of a minus that of b, the discordant image counts and McNemar's exact p-value."""

    difference: float
    only_a: int
    only_b: int
    p_value: float


def mcnemar_test(a: ArrayLike, b: ArrayLike) -> McNemar:
    """McNemar's exact test that two rows certify the same fraction of the same images at a radius.

    Args:
        a: per image, whether row a certifies it (correct with radius >= r).
        b: the same for row b, in the same image order.
    """
    x, y = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if x.shape != y.shape:
        raise ValueError(f"paired samples must have the same length, got {x.shape} and {y.shape}")
    only_a, only_b = int(np.sum(x & ~y)), int(np.sum(~x & y))
    table = [[int(np.sum(x & y)), only_a], [only_b, int(np.sum(~x & ~y))]]
    p = float(mcnemar(table, exact=True).pvalue)
    return McNemar(float(np.mean(x) - np.mean(y)), only_a, only_b, p)


def seed_test(a: ArrayLike, b: ArrayLike) -> float:
    """Welch's t-test p-value between the per-seed values of two settings (nan with fewer than 2 seeds a side)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(x) < 2 or len(y) < 2:
        return math.nan
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        return 1.0 if x[0] == y[0] else 0.0
    with _nearly_constant_is_fine():
        return float(stats.ttest_ind(x, y, equal_var=False).pvalue)


@contextlib.contextmanager
def _nearly_constant_is_fine() -> Iterator[None]:
    """Silence scipy's precision warning for nearly constant samples (two seeds with equal ACR, say).

    The statistic scipy then returns is still right to the precision the report prints.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
        yield


def z_distance(difference: float, *standard_errors: float) -> float:
    """How many standard errors apart two independent estimates are: difference / sqrt(sum of SE^2)."""
    se = math.sqrt(sum(s * s for s in standard_errors if not math.isnan(s)))
    if se == 0:
        return math.nan if difference == 0 else math.copysign(math.inf, difference)
    return difference / se
