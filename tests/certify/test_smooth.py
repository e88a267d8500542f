"""Deterministic unit tests of ``Smooth`` (certify_theory.md §4 items 1-5 and 8) and of its API."""

import inspect
import math
import re
import warnings

import numpy as np
import pytest
import torch
from scipy.stats import chi2, kstest, norm
from torch import nn

from rsbench import Smooth
from rsbench.certify import Certificate
from rsbench.certify.algorithm import smooth as smooth_module
from rsbench.certify.algorithm.bounds import clopper_pearson_lower, min_certify_samples, min_predict_samples, radius_cap
from rsbench.certify.algorithm.seeding import ESTIMATION, SELECTION, derive_seed, make_generator
from tests.classifiers import Recorder

SHAPE = (3, 8, 8)
D = math.prod(SHAPE)


def one_hot_logits(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    return nn.functional.one_hot(labels.long(), num_classes).float()


class Constant:
    """Base classifier that always answers ``label``."""

    def __init__(self, label: int, num_classes: int) -> None:
        self.label, self.num_classes = label, num_classes

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        return one_hot_logits(torch.full((batch.shape[0],), self.label), self.num_classes)


class FirstRowsProbe:
    """Answers class 0 for the first ``first`` rows it is ever shown and class 1 for every later row."""

    def __init__(self, first: int) -> None:
        self.first, self.seen = first, 0

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        rows = torch.arange(self.seen, self.seen + batch.shape[0])
        self.seen += batch.shape[0]
        return one_hot_logits((rows >= self.first).long(), 2)


class VoteSequence:
    """Replays a prescribed sequence of votes, one per noisy row, whatever the input."""

    def __init__(self, votes: list[int], num_classes: int) -> None:
        self.votes, self.num_classes, self.used = torch.tensor(votes), num_classes, 0

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        labels = self.votes[self.used : self.used + batch.shape[0]]
        assert labels.shape[0] == batch.shape[0], "more rows queried than votes prescribed"
        self.used += batch.shape[0]
        return one_hot_logits(labels, self.num_classes)


class HalfSpace(nn.Module):
    """f(z) = [z_0 > threshold] on the first pixel: P(f(x + eps) = 1) = Phi((x_0 - threshold) / sigma)."""

    def __init__(self, threshold: float = 0.5) -> None:
        super().__init__()
        self.threshold = threshold

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = z.flatten(1)[:, 0] - self.threshold
        return torch.stack([-h, h], dim=1)


class ModeProbe(nn.Module):
    """A model with BatchNorm and Dropout that records every submodule's ``training`` flag inside ``forward``."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(D)
        self.drop = nn.Dropout(0.5)
        self.frozen = nn.BatchNorm1d(D)
        self.head = nn.Linear(D, 2)
        self.modes_seen: list[dict[str, bool]] = []

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        self.modes_seen.append({name: module.training for name, module in self.named_modules()})
        return self.head(self.frozen(self.drop(self.bn(z.flatten(1)))))


class PermutedLabels:
    """``base`` with its classes renamed: the logit of new class j is the old logit of class ``perm[j]``."""

    def __init__(self, base, perm: list[int]) -> None:
        self.base, self.perm = base, torch.tensor(perm)

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        return self.base(batch)[:, self.perm]


def assert_unrelated(a: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> None:
    """The noise in two equally shaped sets of noisy rows is neither shared nor correlated."""
    noise_a, noise_b = (a - x).double().flatten(), (b - x).double().flatten()
    assert (noise_a == noise_b).double().mean() < 1e-4
    correlation = np.corrcoef(noise_a.numpy(), noise_b.numpy())[0, 1]
    assert abs(correlation) < 5 / math.sqrt(noise_a.numel())


def image(seed: int = 0) -> torch.Tensor:
    return torch.rand(SHAPE, generator=torch.Generator().manual_seed(seed))


def point_with_p_one(p_one: float, sigma: float, threshold: float = 0.5) -> torch.Tensor:
    """An image whose first pixel makes ``HalfSpace(threshold)`` vote class 1 with probability ``p_one``."""
    x = image()
    x.view(-1)[0] = threshold + sigma * norm.ppf(p_one)
    return x


# --------------------------------------------------------------------------------------------------------- CERTIFY


@pytest.mark.parametrize(("n", "alpha", "sigma"), [(100_000, 1e-3, 0.25), (1000, 0.05, 0.5), (20, 1e-2, 1.0)])
def test_constant_classifier_certifies_the_cap(n, alpha, sigma):
    smooth = Smooth(Constant(3, num_classes=5), num_classes=5, sigma=sigma)
    prediction, radius = smooth.certify(torch.zeros(1, 2, 2), n0=10, n=n, alpha=alpha, batch_size=max(n, 10))
    assert prediction == 3
    assert radius == pytest.approx(sigma * norm.ppf(alpha ** (1 / n)), rel=1e-12, abs=0)
    assert radius == radius_cap(sigma, n, alpha)


@pytest.mark.parametrize("n", [1, 10])
def test_lower_bound_of_exactly_one_half_certifies_radius_zero(n, monkeypatch):
    """Cohen's rule certifies when pA_lower >= 1/2, so a bound of exactly 1/2 gives radius 0, not an abstention.

    At alpha = 2^-n, n of n votes put the bound on 1/2 in exact arithmetic (alpha^(1/n)); the float64 bound from
    scipy may land within an ulp on either side depending on the CPU's libm, so the rule itself is tested with a
    bound of exactly 0.5, and the bound's value only to 1e-12.
    """
    alpha = 2.0**-n
    assert clopper_pearson_lower(n, n, alpha) == pytest.approx(0.5, rel=1e-12)
    monkeypatch.setattr(smooth_module, "clopper_pearson_lower", lambda count, trials, alpha: 0.5)
    assert Smooth(Constant(1, 2), 2, 0.25).certify(image(), 5, n, alpha, 16) == (1, 0.0)


def test_selection_comes_first_and_is_used():
    """The probe votes 0 on the first n0 rows and 1 afterwards. CERTIFY must take the class from the (first) n0
    selection samples and count it in the n fresh ones, where it never occurs: it abstains. Taking the argmax of
    the estimation counts instead would certify class 1 at the cap."""
    n0, n = 100, 1000
    smooth = Smooth(FirstRowsProbe(first=n0), num_classes=2, sigma=0.25)
    cert = smooth.certify_with_details(image(), n0=n0, n=n, alpha=1e-3, batch_size=300)
    assert cert.selected == 0
    assert cert.count == 0
    assert cert.prediction == Smooth.ABSTAIN
    assert cert.radius == 0.0
    assert smooth.base_classifier.seen == n0 + n


def test_selection_batches_precede_estimation_batches():
    recorder = Recorder(Constant(0, 2))
    Smooth(recorder, num_classes=2, sigma=0.25).certify(image(), n0=70, n=250, alpha=1e-3, batch_size=100)
    assert recorder.sizes == [70, 100, 100, 50]


def test_selection_and_estimation_use_their_own_seeded_streams():
    """With a seed, the first n0 rows CERTIFY queries are exactly the SELECTION stream's samples and the next n the
    ESTIMATION stream's (reproduced through the public ``sample_counts``), and the probe still abstains."""
    n0, n, seed, x = 50, 200, derive_seed(7, 3), image()
    certifying = Recorder(Constant(0, 2))
    Smooth(certifying, num_classes=2, sigma=0.5).certify(x, n0, n, 1e-3, batch_size=64, seed=seed)

    reference = Recorder(Constant(0, 2))
    smooth = Smooth(reference, num_classes=2, sigma=0.5)
    smooth.sample_counts(x, n0, 64, make_generator("cpu", seed, SELECTION))
    smooth.sample_counts(x, n, 64, make_generator("cpu", seed, ESTIMATION))
    assert torch.equal(certifying.inputs, reference.inputs)

    probe = Smooth(FirstRowsProbe(first=n0), num_classes=2, sigma=0.5)
    cert = probe.certify_with_details(x, n0, n, 1e-3, batch_size=64, seed=seed)
    assert (cert.selected, cert.count, cert.prediction) == (0, 0, Smooth.ABSTAIN)


@pytest.mark.parametrize(("p_one", "sigma", "alpha"), [(0.9, 0.25, 1e-3), (0.7, 0.5, 0.05), (0.999, 1.0, 1e-2)])
def test_radius_is_never_rounded(p_one, sigma, alpha):
    """The radius is sigma * Phi^-1(CP lower bound of the reported count), bit for bit (no 3-digit rounding)."""
    smooth = Smooth(HalfSpace(), num_classes=2, sigma=sigma)
    x, n = point_with_p_one(p_one, sigma), 2000
    cert = smooth.certify_with_details(x, n0=100, n=n, alpha=alpha, batch_size=500, seed=11)
    assert cert.prediction == 1
    assert 0 < cert.count < n  # a real mix of votes, not the cap
    p_lower = clopper_pearson_lower(cert.count, n, alpha)
    assert cert.p_a_lower == p_lower
    assert cert.radius == sigma * norm.ppf(p_lower)
    assert smooth.certify(x, n0=100, n=n, alpha=alpha, batch_size=500, seed=11) == (cert.prediction, cert.radius)


def test_certificate_records_its_inputs():
    cert = Smooth(Constant(1, 2), 2, 0.5).certify_with_details(image(), n0=5, n=30, alpha=0.01, batch_size=8, seed=1)
    assert isinstance(cert, Certificate)
    assert (cert.prediction, cert.selected, cert.count) == (1, 1, 30)
    assert (cert.n0, cert.n, cert.alpha, cert.sigma) == (5, 30, 0.01, 0.5)
    assert cert.p_a_lower == pytest.approx(0.01 ** (1 / 30), rel=1e-12)
    assert cert.seconds >= 0
    assert not cert.abstained


def test_renaming_classes_renames_the_prediction_only():
    """The label cannot leak: permuting the base classifier's classes permutes the answer, radius unchanged."""
    sigma, perm = 0.5, [2, 0, 1]  # new class j = old class perm[j], so old class 1 becomes new class 2
    base = HalfSpace()
    three_class = lambda z: torch.cat([base(z), torch.full((z.shape[0], 1), -1e9)], dim=1)  # noqa: E731
    x = point_with_p_one(0.8, sigma)
    plain = Smooth(three_class, 3, sigma).certify(x, 100, 1000, 1e-3, 256, seed=5)
    renamed = Smooth(PermutedLabels(three_class, perm), 3, sigma).certify(x, 100, 1000, 1e-3, 256, seed=5)
    assert plain[0] == 1
    assert renamed == (perm.index(1), plain[1])
    assert Smooth(PermutedLabels(three_class, perm), 3, sigma).predict(x, 1000, 1e-3, 256, seed=5) == 2


# --------------------------------------------------------------------------------------------------------- PREDICT


@pytest.mark.parametrize(
    ("count_a", "count_b", "expected"),
    [(520, 480, Smooth.ABSTAIN), (560, 440, 2), (440, 560, 3), (480, 520, Smooth.ABSTAIN)],
)
def test_predict_top_two_test(count_a, count_b, expected):
    """Class 2 gets ``count_a`` of n=1000 votes and class 3 the rest; the p-values are 0.217 and 1.65e-4 (§1.2)."""
    votes = [2] * count_a + [3] * count_b
    np.random.default_rng(0).shuffle(votes)
    classifier = VoteSequence(votes, num_classes=4)
    assert Smooth(classifier, 4, 0.25).predict(image(), n=1000, alpha=1e-3, batch_size=300) == expected
    assert classifier.used == 1000


def test_predict_uses_only_the_top_two_counts():
    """(400, 360, 240): the third class does not dilute the test; 400 vs 360 gives p = 0.166 > 0.05 -> abstain."""
    votes = [0] * 400 + [1] * 360 + [2] * 240
    assert Smooth(VoteSequence(votes, 3), 3, 0.25).predict(image(), 1000, 0.05, 1000) == Smooth.ABSTAIN
    votes = [0] * 420 + [1] * 340 + [2] * 240  # 420 vs 340: p = 0.0045
    assert Smooth(VoteSequence(votes, 3), 3, 0.25).predict(image(), 1000, 0.05, 1000) == 0


# ----------------------------------------------------------------------------------------------------- noise sanity


def record_certify(x, sigma=0.5, n0=200, n=1000, batch_size=300, seed=None) -> Recorder:
    recorder = Recorder(Constant(0, 2))
    Smooth(recorder, num_classes=2, sigma=sigma).certify(x, n0, n, 1e-3, batch_size, seed=seed)
    return recorder


def test_every_noisy_input_is_distinct():
    """All n0 + n rows differ, so none is shared between selection and estimation or between batches."""
    n0, n = 200, 1000
    rows = record_certify(image(), n0=n0, n=n, seed=3).inputs.flatten(1)
    assert rows.shape == (n0 + n, D)
    assert torch.unique(rows, dim=0).shape[0] == n0 + n
    selection, estimation = rows[:n0], rows[n0:]
    assert torch.cdist(selection, estimation).min() > 0


def test_noise_has_mean_zero_and_std_sigma():
    """(input - x) over 1200 * 192 coordinates: mean within 5 SE of 0, std within 5 SE of sigma."""
    sigma, x = 0.5, image()
    noise = (record_certify(x, sigma=sigma, seed=4).inputs - x).double()
    count = noise.numel()
    assert abs(noise.mean().item()) < 5 * sigma / math.sqrt(count)
    assert noise.std().item() == pytest.approx(sigma, abs=5 * sigma / math.sqrt(2 * count))
    per_pixel_mean = noise.mean(dim=0)  # a noise pattern reused across rows would not average out
    assert per_pixel_mean.abs().max().item() < 5 * sigma / math.sqrt(noise.shape[0])


def test_noise_norm_is_chi_square():
    """||input - x||^2 / sigma^2 over the 1200 rows is chi-square(d) with d = 192 (KS test, p > 1e-4)."""
    sigma, x = 0.25, image(1)
    noise = (record_certify(x, sigma=sigma, seed=5).inputs - x).double().flatten(1)
    statistic = (noise.pow(2).sum(dim=1) / sigma**2).numpy()
    assert kstest(statistic, chi2(D).cdf).pvalue > 1e-4
    assert statistic.mean() == pytest.approx(D, rel=0.02)
    wrong_scale = kstest(statistic / 1.1**2, chi2(D).cdf).pvalue  # the test would see a 10% error in sigma
    assert wrong_scale < 1e-4


def test_noise_coordinates_are_standard_normal():
    sigma, x = 0.5, image(2)
    noise = (record_certify(x, sigma=sigma, seed=6).inputs - x).double().flatten()
    assert kstest((noise / sigma).numpy()[::7], "norm").pvalue > 1e-4


def test_same_seed_same_samples():
    x = image()
    assert torch.equal(record_certify(x, seed=123).inputs, record_certify(x, seed=123).inputs)


def test_different_seeds_different_samples():
    x = image()
    first = record_certify(x, seed=derive_seed(123, 0)).inputs
    for other in (record_certify(x, seed=derive_seed(123, 1)).inputs, record_certify(x, seed=124).inputs):
        assert_unrelated(first, other, x)


def test_unseeded_calls_draw_fresh_noise():
    x = image()
    assert_unrelated(record_certify(x).inputs, record_certify(x).inputs, x)


def test_selection_and_estimation_streams_differ_for_one_seed():
    """With n0 = n, the selection rows are not the estimation rows (not even shifted or scaled versions of them)."""
    x, n = image(), 256
    rows = record_certify(x, n0=n, n=n, seed=9).inputs
    assert_unrelated(rows[:n], rows[n:], x)


def test_predict_draws_its_own_stream():
    x, seed = image(), 17
    certify_rows = record_certify(x, n0=100, n=100, batch_size=100, seed=seed).inputs
    recorder = Recorder(Constant(0, 2))
    Smooth(recorder, 2, 0.5).predict(x, 100, 0.05, 100, seed=seed)
    assert recorder.inputs.shape == (100, *SHAPE)
    assert_unrelated(recorder.inputs, certify_rows[:100], x)
    assert_unrelated(recorder.inputs, certify_rows[100:], x)


@pytest.mark.filterwarnings("ignore:CERTIFY with n=1 ")
@pytest.mark.parametrize(
    ("n0", "n", "batch_size"),
    [(100, 1000, 400), (100, 1000, 1000), (100, 1000, 5000), (1, 1, 1), (100, 25_000, 512), (64, 128, 64)],
)
def test_batches_never_exceed_batch_size(n0, n, batch_size):
    """Memory depends on batch_size only: every batch has min(batch_size, rows left) rows, in the fewest calls."""
    recorder = Recorder(Constant(0, 2))
    Smooth(recorder, 2, 0.25).certify(torch.zeros(1, 1, 1), n0, n, 1e-3, batch_size)
    selection_calls, estimation_calls = math.ceil(n0 / batch_size), math.ceil(n / batch_size)
    assert len(recorder.sizes) == selection_calls + estimation_calls
    selection, estimation = recorder.sizes[:selection_calls], recorder.sizes[selection_calls:]
    assert max(selection) == min(batch_size, n0)
    assert max(estimation) == min(batch_size, n)
    assert sum(selection) == n0
    assert sum(estimation) == n


def test_predict_batches_never_exceed_batch_size():
    recorder = Recorder(Constant(0, 2))
    Smooth(recorder, 2, 0.25).predict(torch.zeros(1, 1, 1), 1001, 1e-3, 250)
    assert recorder.sizes == [250, 250, 250, 250, 1]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_noise_is_float32(dtype):
    """Whatever the input dtype, the classifier sees fp32 rows whose noise is not on a bf16/fp16 grid."""
    x = image().to(dtype)
    recorder = Recorder(Constant(0, 2))
    Smooth(recorder, 2, 0.25).certify(x, 10, 100, 1e-3, 64, seed=1)
    assert {b.dtype for b in recorder.batches} == {torch.float32}
    rows = recorder.inputs
    assert (rows.to(torch.bfloat16).float() != rows).float().mean() > 0.9
    assert (rows.half().float() != rows).float().mean() > 0.9


def test_noisy_inputs_are_not_clamped():
    x = torch.zeros(SHAPE)
    x[0] = 1.0  # one channel at the top edge, the others at the bottom edge
    rows = record_certify(x, sigma=0.25, n0=10, n=100, seed=2).inputs
    assert (rows[:, 1:] < 0).float().mean() == pytest.approx(0.5, abs=0.05)
    assert (rows[:, 0] > 1).float().mean() == pytest.approx(0.5, abs=0.05)
    assert rows.min() < -0.5
    assert rows.max() > 1.5


# ----------------------------------------------------------------------------------------------------- eval mode


def test_sampling_runs_in_eval_mode_and_restores_every_submodule():
    model = ModeProbe()
    model.train()
    model.frozen.eval()  # deliberately left in eval while its parent trains
    running_mean = model.bn.running_mean.clone()
    Smooth(model, 2, 0.25).certify(image(), 10, 100, 1e-3, 32)
    Smooth(model, 2, 0.25).predict(image(), 100, 1e-3, 32)
    assert len(model.modes_seen) == 1 + 4 + 4
    assert all(not any(modes.values()) for modes in model.modes_seen)
    assert model.training
    assert model.bn.training
    assert model.drop.training
    assert model.head.training
    assert not model.frozen.training
    assert torch.equal(model.bn.running_mean, running_mean)  # BatchNorm statistics were not updated


def test_eval_model_stays_in_eval():
    model = ModeProbe().eval()
    Smooth(model, 2, 0.25).certify(image(), 10, 100, 1e-3, 100)
    assert not any(module.training for module in model.modules())


def test_modes_are_restored_when_the_classifier_raises():
    class Failing(ModeProbe):
        def forward(self, z):
            super().forward(z)
            raise RuntimeError("boom")

    model = Failing().train()
    with pytest.raises(RuntimeError, match="boom"):
        Smooth(model, 2, 0.25).certify(image(), 10, 100, 1e-3, 32)
    assert all(module.training for module in model.modules())


# ------------------------------------------------------------------------------------------------------- warnings


def test_certify_warns_below_min_samples_and_abstains():
    alpha = 1e-3
    n = min_certify_samples(alpha) - 1  # 9: even 9 of 9 votes give 0.001^(1/9) = 0.464 < 1/2
    smooth = Smooth(Constant(0, 2), 2, 0.25)
    with pytest.warns(UserWarning, match=rf"n={n}\b.*n >= {n + 1}"):
        assert smooth.certify(image(), 10, n, alpha, 100) == (Smooth.ABSTAIN, 0.0)


def test_certify_at_min_samples_does_not_warn_and_certifies():
    alpha = 1e-3
    n = min_certify_samples(alpha)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prediction, radius = Smooth(Constant(0, 2), 2, 0.25).certify(image(), 10, n, alpha, 100)
    assert prediction == 0
    assert radius == pytest.approx(0.25 * norm.ppf(alpha ** (1 / n)), rel=1e-12)


def test_predict_warns_below_min_samples_and_abstains():
    alpha = 1e-3
    n = min_predict_samples(alpha) - 1  # 10: 2 * 0.5^10 = 0.002 > alpha
    with pytest.warns(UserWarning, match=rf"n={n}\b"):
        assert Smooth(Constant(0, 2), 2, 0.25).predict(image(), n, alpha, 100) == Smooth.ABSTAIN


def test_predict_at_min_samples_does_not_warn_and_predicts():
    n = min_predict_samples(1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Smooth(Constant(1, 2), 2, 0.25).predict(image(), n, 1e-3, 100) == 1


# ------------------------------------------------------------------------------------------------- bad arguments

GOOD = {"n0": 10, "n": 100, "alpha": 1e-3, "batch_size": 50}


@pytest.mark.parametrize(
    ("override", "pattern"),
    [
        ({"n0": 0}, r"n0.*\b0"),
        ({"n": 0}, r"\bn must.*\b0"),
        ({"batch_size": 0}, r"batch_size.*\b0"),
        ({"n0": -5}, r"n0.*-5"),
        ({"n": 2.5}, r"\bn must.*2\.5"),
        ({"alpha": 1.5}, r"alpha.*1\.5"),
        ({"alpha": 0.0}, r"alpha.*0\.0"),
        ({"alpha": -0.01}, r"alpha.*-0\.01"),
    ],
)
def test_certify_rejects_bad_arguments(override, pattern):
    recorder = Recorder(Constant(0, 2))
    with pytest.raises(ValueError, match=pattern):
        Smooth(recorder, 2, 0.25).certify(image(), **{**GOOD, **override})
    assert recorder.batches == []  # validated before any sampling


@pytest.mark.parametrize(
    ("override", "pattern"),
    [({"n": 0}, r"\bn must.*\b0"), ({"batch_size": 0}, r"batch_size.*\b0"), ({"alpha": 1.5}, r"alpha.*1\.5")],
)
def test_predict_rejects_bad_arguments(override, pattern):
    kwargs = {"n": 100, "alpha": 1e-3, "batch_size": 50, **override}
    with pytest.raises(ValueError, match=pattern):
        Smooth(Recorder(Constant(0, 2)), 2, 0.25).predict(image(), **kwargs)


@pytest.mark.parametrize("sigma", [0.0, -0.25, float("nan"), float("inf")])
def test_bad_sigma_rejected_at_construction(sigma):
    with pytest.raises(ValueError, match=rf"sigma.*{sigma!r}"):
        Smooth(Recorder(Constant(0, 2)), 2, sigma)


@pytest.mark.parametrize("num_classes", [1, 0, -3])
def test_fewer_than_two_classes_rejected(num_classes):
    with pytest.raises(ValueError, match=rf"num_classes.*{num_classes}"):
        Smooth(Recorder(Constant(0, 2)), num_classes, 0.25)


@pytest.mark.parametrize("logits_shape", [(3,), (3, 5), (3, 1, 2)])
def test_wrong_logits_shape_is_reported(logits_shape):
    smooth = Smooth(lambda batch: torch.zeros(logits_shape), num_classes=2, sigma=0.25)
    with pytest.raises(ValueError, match=rf"shape {re.escape(str(logits_shape))}.*\[batch, 2\]"):
        smooth.certify(image(), 3, 100, 1e-3, 3)


# ------------------------------------------------------------------------------------------------------------ API


def test_abstain_constant():
    assert Smooth.ABSTAIN == -1


def test_public_import():
    import rsbench
    from rsbench.certify import Smooth as CertifySmooth

    assert rsbench.Smooth is CertifySmooth is Smooth


def test_cohen_signature():
    parameters = list(inspect.signature(Smooth.certify).parameters)
    assert parameters[:6] == ["self", "x", "n0", "n", "alpha", "batch_size"]
    assert list(inspect.signature(Smooth.predict).parameters)[:5] == ["self", "x", "n", "alpha", "batch_size"]
    assert list(inspect.signature(Smooth.__init__).parameters)[1:4] == ["base_classifier", "num_classes", "sigma"]


def test_certify_returns_an_int_and_a_float():
    result = Smooth(Constant(1, 2), 2, 0.25).certify(image(), 10, 100, 1e-3, 64)
    assert isinstance(result, tuple)
    prediction, radius = result
    assert type(prediction) is int
    assert type(radius) is float
    assert Smooth(FirstRowsProbe(10), 2, 0.25).certify(image(), 10, 100, 1e-3, 64) == (Smooth.ABSTAIN, 0.0)


def test_nn_module_and_plain_callable_agree():
    """The same function as an nn.Module and as a lambda gives the same certificate for the same seed."""
    module, x = HalfSpace(), point_with_p_one(0.9, 0.25)
    as_module = Smooth(module, 2, 0.25).certify(x, 100, 1000, 1e-3, 300, seed=8)
    as_callable = Smooth(lambda z: module(z), 2, 0.25).certify(x, 100, 1000, 1e-3, 300, seed=8)
    assert as_module == as_callable
    assert as_module[0] == 1
