"""Statistical coverage of CERTIFY and PREDICT with an analytic base classifier (certify_theory.md §4 items 6, 7, 9).

A linear base classifier f(z) = [w.z + b > 0] with unit w is its own smoothed classifier: at signed distance m from
the hyperplane, P(f(x + eps) = 1) = Phi(m / sigma) and the exact robust radius of g at x is |m|. So every
certificate can be graded exactly: it *fails* iff it names the wrong class or a radius above |m| (abstaining never
fails). Cohen et al.'s guarantee says a failure happens with probability <= alpha. Each test runs T independent
certifications (seeded with ``derive_seed`` so the outcome is deterministic), counts failures, and tests
H0 "failure rate <= alpha" with a one-sided binomial test; H0 is rejected (the test fails) only at p < 1e-3.
Where the exact failure probability is computable from the binomial distribution of the votes, the observed rate is
also compared with it (two-sided, p >= 1e-3), which catches an over-conservative certifier as well.
"""

import numpy as np
import pytest
import torch
from scipy.stats import binom, binomtest, norm

from rsbench import Smooth
from rsbench.certify import Certificate
from rsbench.certify.algorithm.bounds import certified_radius, clopper_pearson_lower
from rsbench.certify.algorithm.seeding import ESTIMATION, derive_seed, make_generator
from tests.classifiers import Linear
from tests.stats import ALPHA, N0, P_FLAG, N, agreement_p_value, lower_bounds, soundness_p_value

SIGMA = 0.25


class EstimationArgmaxSmooth(Smooth):
    """A deliberately broken CERTIFY: it picks the class from the estimation counts it then bounds (no selection).

    The top count of n is biased upwards, so at a tie it certifies about twice as often as alpha allows.
    """

    def certify_with_details(self, x, n0, n, alpha, batch_size, *, seed=None):
        generator = None if seed is None else make_generator(self.device_for(x), seed, ESTIMATION)
        counts = self.sample_counts(x, n, batch_size, generator)
        selected = int(counts.argmax())
        count = int(counts[selected])
        p_a_lower = clopper_pearson_lower(count, n, alpha)
        certified = p_a_lower >= 0.5
        return Certificate(
            prediction=selected if certified else self.ABSTAIN,
            radius=certified_radius(p_a_lower, self.sigma) if certified else 0.0,
            p_a_lower=p_a_lower,
            count=count,
            selected=selected,
            n0=n0,
            n=n,
            alpha=alpha,
            sigma=self.sigma,
            seconds=0.0,
        )


def linear_problem(margin: float, shape: tuple[int, ...], seed: int) -> tuple[Linear, torch.Tensor]:
    """A random unit normal w and an image x in [0,1]^shape at signed distance ``margin`` from {w.z + b = 0}."""
    generator = torch.Generator().manual_seed(seed)
    w = torch.randn(shape, generator=generator, dtype=torch.float64)
    w /= w.norm()
    x = torch.rand(shape, generator=generator, dtype=torch.float64)
    b = margin - float((w * x).sum())
    return Linear(w, b), x.float()


def margin_for(p_one: float, sigma: float = SIGMA) -> float:
    """The signed distance m at which P(f(x + eps) = 1) = Phi(m / sigma) = p_one."""
    return float(sigma * norm.ppf(p_one))


@pytest.fixture
def one_thread():
    """Big noise batches on a shared 2-core machine run faster on one intra-op thread; restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def certify_trials(smooth: Smooth, x: torch.Tensor, trials: int, key: int, n: int = N, batch_size: int = N):
    return [
        smooth.certify_with_details(x, N0, n, ALPHA, batch_size, seed=derive_seed(key, trial))
        for trial in range(trials)
    ]


def is_failure(cert: Certificate, true_class: int, margin: float) -> bool:
    """A certificate fails iff it names the wrong class or claims more than the exact robust radius |m|."""
    return not cert.abstained and (cert.prediction != true_class or cert.radius > abs(margin))


def exact_failure_rate(margin: float, n0: int = N0, n: int = N, alpha: float = ALPHA, sigma: float = SIGMA) -> float:
    """P(failure) of Cohen's CERTIFY for the linear classifier, from the binomial laws of the two vote counts.

    Selection picks the wrong class with probability s (ties go to class 0, like ``argmax``); the wrong class then
    fails if it certifies at all, the right class fails if its radius exceeds |m|.
    """
    p_true = float(norm.cdf(abs(margin) / sigma))
    true_class = int(margin > 0)
    s = binom.cdf(n0 // 2 if true_class == 1 else (n0 - 1) // 2, n0, p_true)
    lower = lower_bounds(n, alpha)
    certifies = lower >= 0.5
    too_far = certifies & (sigma * norm.ppf(lower) > abs(margin))
    k = np.arange(n + 1)
    return float(s * binom.pmf(k, n, 1 - p_true)[certifies].sum() + (1 - s) * binom.pmf(k, n, p_true)[too_far].sum())


def tie_certify_rate(n: int = N, alpha: float = ALPHA) -> float:
    """P(a fixed class certifies) when its votes are Bin(n, 1/2): the exact failure rate of a sound CERTIFY at a tie."""
    k_min = int(np.argmax(lower_bounds(n, alpha) >= 0.5))
    return float(binom.sf(k_min - 1, n, 0.5))


def predict_rates(p_one: float, n: int = N, alpha: float = ALPHA) -> tuple[float, float]:
    """Exact P(PREDICT returns class 0) and P(returns class 1) when class 1 gets Bin(n, p_one) of the votes."""
    k = np.arange(n + 1)
    p_values = np.array([binomtest(max(i, n - i), n, 0.5).pvalue for i in k])
    pmf = binom.pmf(k, n, p_one)
    rejects = p_values <= alpha
    return float(pmf[rejects & (k < n - k)].sum()), float(pmf[rejects & (k > n - k)].sum())


# ---------------------------------------------------------------------------------------------- CERTIFY coverage


@pytest.mark.parametrize(
    ("p_one", "trials", "key"),
    [(0.6, 3000, 1), (0.9, 3000, 2), (0.99, 3000, 3), (0.1, 2000, 4)],  # p_one = 0.1: class 0 is right, pA = 0.9
)
def test_certify_coverage_linear(p_one, trials, key):
    """Failure rate <= alpha (one-sided binomial test) and equal to the exact rate 0.048/0.049/0.029 (two-sided).

    With n=1000, alpha=0.05, T=3000 a sound certifier fails about 145 times (sd 12); the test flags >= ~190.
    """
    margin = margin_for(p_one)
    classifier, x = linear_problem(margin, (32,), seed=key)
    certs = certify_trials(Smooth(classifier, 2, SIGMA), x, trials, key=key)
    failures = sum(is_failure(cert, int(margin > 0), margin) for cert in certs)
    assert soundness_p_value(failures, trials) >= P_FLAG, failures / trials
    assert agreement_p_value(failures, trials, exact_failure_rate(margin)) >= P_FLAG, failures / trials
    certified = sum(not cert.abstained for cert in certs)
    assert certified / trials > 0.9  # it is not sound by abstaining: pA >= 0.6 certifies almost always at n=1000


@pytest.mark.usefixtures("one_thread")
def test_certify_coverage_cifar_sized_input():
    """The same check through a 3x32x32 input (d = 3072) with fewer trials, plus the noise scale: pooled over all
    estimation samples, the votes for the true class must match pA = 0.9 (a 5% error in sigma moves it by 0.011,
    about 11 standard errors at T = 100)."""
    trials, p_one = 100, 0.9
    margin = margin_for(p_one)
    classifier, x = linear_problem(margin, (3, 32, 32), seed=5)
    certs = certify_trials(Smooth(classifier, 2, SIGMA), x, trials, key=5, batch_size=400)
    failures = sum(is_failure(cert, 1, margin) for cert in certs)
    assert soundness_p_value(failures, trials) >= P_FLAG
    assert agreement_p_value(failures, trials, exact_failure_rate(margin)) >= P_FLAG
    assert all(cert.selected == 1 for cert in certs)
    votes = sum(cert.count for cert in certs)
    assert agreement_p_value(votes, trials * N, p_one) >= P_FLAG, votes / (trials * N)


# ------------------------------------------------------------------------------- selection/estimation independence


def tie_failures(smooth_class: type[Smooth], trials: int, key: int) -> int:
    """At a tie (x on the hyperplane, both classes 1/2) every certificate that does not abstain is wrong."""
    classifier, x = linear_problem(0.0, (32,), seed=key)
    return sum(not cert.abstained for cert in certify_trials(smooth_class(classifier, 2, SIGMA), x, trials, key=key))


def test_tie_real_certifier_is_sound():
    """Independent selection: failure rate = P(Bin(1000, 1/2) >= 527) = 0.047 <= alpha."""
    trials = 3000
    failures = tie_failures(Smooth, trials, key=6)
    assert soundness_p_value(failures, trials) >= P_FLAG, failures / trials
    assert agreement_p_value(failures, trials, tie_certify_rate()) >= P_FLAG, failures / trials


def test_tie_catches_certifier_that_selects_from_estimation():
    """The same check has power: reusing the estimation counts for selection fails at 2 * 0.047 = 0.094 > alpha,
    and the one-sided binomial test rejects it (p < 1e-3) with the very same trials budget."""
    trials = 3000
    failures = tie_failures(EstimationArgmaxSmooth, trials, key=6)
    assert soundness_p_value(failures, trials) < P_FLAG, failures / trials
    assert agreement_p_value(failures, trials, 2 * tie_certify_rate()) >= P_FLAG, failures / trials


@pytest.mark.slow
@pytest.mark.parametrize(("smooth_class", "sound"), [(Smooth, True), (EstimationArgmaxSmooth, False)])
def test_tie_at_the_notes_scale(smooth_class, sound):
    """certify_theory.md §4.7 at T = 20,000: about 0.045 (independent selection) vs 0.094 (estimation argmax)."""
    trials = 20_000
    failures = tie_failures(smooth_class, trials, key=7)
    assert (soundness_p_value(failures, trials) >= P_FLAG) == sound, failures / trials
    assert agreement_p_value(failures, trials, tie_certify_rate() * (1 if sound else 2)) >= P_FLAG


# ---------------------------------------------------------------------------------------------- PREDICT coverage


def predict_trials(p_one: float, trials: int, key: int) -> np.ndarray:
    classifier, x = linear_problem(margin_for(p_one), (32,), seed=key)
    smooth = Smooth(classifier, 2, SIGMA)
    return np.array([smooth.predict(x, N, ALPHA, N, seed=derive_seed(key, trial)) for trial in range(trials)])


def test_predict_rarely_returns_the_minority_class():
    """p = (0.45, 0.55): P(PREDICT returns class 0) <= alpha; it returns class 1 at the exact rate 0.880."""
    trials = 2000
    predictions = predict_trials(0.55, trials, key=8)
    minority = int((predictions == 0).sum())
    assert soundness_p_value(minority, trials) >= P_FLAG, minority / trials
    assert agreement_p_value(int((predictions == 1).sum()), trials, predict_rates(0.55)[1]) >= P_FLAG


def test_predict_at_a_tie_abstains_except_with_probability_alpha():
    """At a tie any answer is wrong: P(not abstain) <= alpha, and equals the exact rate 0.046 of the two-sided test."""
    trials = 2000
    predictions = predict_trials(0.5, trials, key=9)
    answered = int((predictions != Smooth.ABSTAIN).sum())
    assert soundness_p_value(answered, trials) >= P_FLAG, answered / trials
    assert agreement_p_value(answered, trials, sum(predict_rates(0.5))) >= P_FLAG, answered / trials
