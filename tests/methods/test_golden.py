"""Golden tests: one training step of SmoothAdv (PGD, DDN), SmoothMix, CAT-RS, Consistency, Stability and MACER,
and the DDRS sigma search, against numbers produced by the authors' own code.

``tests/golden/<method>.json`` (see its README.md and SOURCE.md) holds, for a tiny float64 model and 3 images, the
random draws the authors' code used and what it computed from them: adversarial images or noise, the loss, the
gradient of every parameter, the BatchNorm buffers after the step, and the DDRS sigmas. Each test rebuilds a case
with rsbench's own module (the real ``SmoothingModule`` subclass, its attack, the DDRS sigma search), feeds the
reference's draws in where rsbench draws them, calls the real loss hook ``training_loss(Batch(...))``, backpropagates
and compares everything the reference recorded. The draws enter at one seam each:

* Gaussian noise: :meth:`rsbench.noise.NoiseMixin.standard_normal` returns the reference's ``z`` (rearranged from
  the reference's noise-major ``[m, B, ...]`` to rsbench's image-major ``[B*m, ...]`` where needed); the mixin
  itself multiplies it by sigma (or by each image's own sigma), so the layout and the scaling stay under test.
* SmoothMix's lambda: ``torch.rand`` returns the reference's ``u`` (rsbench halves it, as the reference does).
* CAT-RS's K: ``Binomial.sample`` returns the reference's ``K`` (rsbench applies ``.long()`` and ``clamp(min=1)``);
  the fake also checks that rsbench asked for ``Bin(M, w)`` with the reference's probabilities ``w``.
* The DDRS sigma search: ``torch.randn`` returns the reference's draw of each ascent step.

Each fake checks the shape and dtype of the request and that every recorded draw is used exactly once.

Tolerance: ``rtol = 1e-12`` with ``atol = 1e-12``, for every float compared. Both sides run in float64; the
reference's own 1- vs 2-thread runs differ by at most 1.8e-15 absolute, and rsbench's different (but mathematically
equal) order of operations measured at most ~7e-15 absolute and 7.2e-14 relative here (AMD EPYC, AVX-512, 1 and 2
threads; the suite passed at 1e-12 on an Intel Xeon too), so 1e-12 leaves a margin of ten over the largest rounding
seen while staying five orders of magnitude below the smallest semantic effect the golden README measured (an exact
instead of PyTorch's ``renorm`` projection moves gradients by 1.3e-7, ``x_adv`` by 5e-8) and the 7e-8 drift a float32
sigma caused in the DDRS search. ``atol`` is for values that are zero in exact
arithmetic: the gradient of ``fc1.bias`` (train-mode BatchNorm removes any bias added before it) is stored as ~1e-16
rounding noise on both sides, where a relative comparison means nothing. Integers (``num_batches_tracked``,
labels, masks) are compared exactly.

No documented rsbench deviation changes any of these cases: SmoothMix's ``mix_step = T`` convention (here
``mix_step < T``), MACER's float64 hinge guards (same images selected: margins 15.2 and 0.027 against gamma = 8),
DDN's extra final clamp (a no-op on the 8-bit grid) and the DDRS ``min_sigma`` floor (never reached) all leave the
numbers unchanged. One interface difference is tested as such: the reference's ``OptimzeSigma`` writes its result
into the caller's ``sig_0``, rsbench's ``optimize_sigma`` returns it and leaves its argument alone. DDN's final
renorm and quantisation of the best delta are a no-op in the golden case (both best deltas lie inside epsilon), so
``tests/methods/test_methods_adversarial.py`` pins them on a hand-checkable case.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from rsbench.certify.algorithm.sigma_search import optimize_sigma
from rsbench.methods import Batch, SmoothingModule
from rsbench.methods.attacks import smoothed_probs
from rsbench.methods.base import StepOutput
from rsbench.methods.catrs import CATRS
from rsbench.methods.consistency import ConsistencyRegularization
from rsbench.methods.ddrs import data_dependent
from rsbench.methods.macer import MACER, robustness_hinge
from rsbench.methods.smoothadv import SmoothAdv
from rsbench.methods.smoothmix import SmoothMix
from rsbench.methods.stability import StabilityTraining
from rsbench.noise import noise_dtype
from tests import golden
from tests.golden import tensor

RTOL = 1e-12
ATOL = 1e-12
SGD = functools.partial(torch.optim.SGD, lr=0.1)  # never stepped: the fixtures record d(loss)/d(parameter)
NO_TRAINER_LOG = "ignore:You are trying to `self.log\\(\\)`"  # DDRS logs its mean sigma; no Trainer is attached


def assert_close(actual: Tensor, expected: Tensor | float, what: str) -> None:
    """``actual`` equals the reference within rtol 1e-12 / atol 1e-12, in float64 (dtype checked too)."""
    expected = torch.as_tensor(expected, dtype=torch.float64)
    torch.testing.assert_close(actual, expected, rtol=RTOL, atol=ATOL, msg=lambda text: f"{what}: {text}")


# ------------------------------------------------------------------------------------------- feeding the draws


class Draws:
    """Stands in for a module's :meth:`~rsbench.noise.NoiseMixin.standard_normal`: returns the recorded draws."""

    def __init__(self, *draws: Tensor) -> None:
        self.pending = list(draws)

    def __call__(self, like: Tensor, generator: torch.Generator | None = None) -> Tensor:
        assert self.pending, "rsbench drew more Gaussian noise than the reference did"
        draw = self.pending.pop(0)
        assert tuple(like.shape) == tuple(draw.shape), f"noise of shape {tuple(like.shape)} asked for"
        assert noise_dtype(like.dtype) == torch.float64, f"noise asked for in {like.dtype}"
        return draw.clone()

    def assert_used(self) -> None:
        assert not self.pending, f"{len(self.pending)} recorded draw(s) unused"


def feed_randn(monkeypatch: pytest.MonkeyPatch, draws: Sequence[Tensor]) -> list[Tensor]:
    """Make ``torch.randn`` return ``draws`` in order (the DDRS search's eps); returns the list still pending."""
    pending = list(draws)

    def randn(*size: Any, dtype: torch.dtype | None = None, **kwargs: Any) -> Tensor:
        shape = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else tuple(size)
        assert pending, "rsbench drew more noise than the reference did"
        assert shape == tuple(pending[0].shape), shape
        assert dtype == torch.float64, dtype
        return pending.pop(0).clone()

    monkeypatch.setattr(torch, "randn", randn)
    return pending


def feed_rand(monkeypatch: pytest.MonkeyPatch, u: Tensor) -> list[Tensor]:
    """Make ``torch.rand`` return ``u`` once (SmoothMix's ``torch.rand(B)``); returns the list still pending."""
    pending = [u]

    def rand(*size: Any, dtype: torch.dtype | None = None, **kwargs: Any) -> Tensor:
        assert pending, "rsbench drew more uniforms than the reference did"
        assert tuple(size) == tuple(u.shape), size
        assert dtype == torch.float64, dtype
        return pending.pop().clone()

    monkeypatch.setattr(torch, "rand", rand)
    return pending


def feed_binomial(monkeypatch: pytest.MonkeyPatch, k: Tensor, total: int, probs: Tensor) -> list[Tensor]:
    """Make ``Binomial(total, probs).sample()`` return ``k``, checking ``total`` and ``probs`` (CAT-RS's K)."""
    pending = [k]

    def sample(self: torch.distributions.Binomial, sample_shape: Sequence[int] = ()) -> Tensor:
        assert pending, "rsbench sampled K more often than the reference did"
        assert bool((self.total_count == total).all()), self.total_count
        # w = (hits among M) / M with M = 4: exact in float32, the dtype rsbench samples in
        torch.testing.assert_close(self.probs.double(), probs, rtol=RTOL, atol=ATOL)
        return pending.pop().to(self.probs.dtype)

    monkeypatch.setattr(torch.distributions.Binomial, "sample", sample)
    return pending


def spy(monkeypatch: pytest.MonkeyPatch, module: nn.Module, name: str) -> list[tuple[tuple[Any, ...], Any]]:
    """Record the arguments and the result of every call of ``module.<name>``."""
    calls: list[tuple[tuple[Any, ...], Any]] = []
    original: Callable[..., Any] = getattr(module, name)

    def recorded(*args: Any) -> Any:
        result = original(*args)
        calls.append((args, result))
        return result

    monkeypatch.setattr(module, name, recorded)
    return calls


def record_forwards(net: nn.Module) -> list[tuple[str, int]]:
    """Record the mode and row count of every forward pass of ``net``."""
    passes: list[tuple[str, int]] = []
    net.register_forward_pre_hook(lambda m, args: passes.append(("train" if m.training else "eval", len(args[0]))))
    return passes


def merged(passes: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """Consecutive eval-mode passes merged into one (rows summed); train-mode passes kept one by one.

    Eval-mode BatchNorm treats rows independently, so the reference's m forwards of B rows (SmoothMix) and
    rsbench's one forward of B*m rows are the same computation; each train-mode pass is one BN batch and counts.
    """
    out: list[tuple[str, int]] = []
    for mode, rows in passes:
        if mode == "eval" and out and out[-1][0] == "eval":
            out[-1] = ("eval", out[-1][1] + rows)
        else:
            out.append((mode, rows))
    return out


def golden_passes(case: dict[str, Any]) -> list[tuple[str, int]]:
    return merged([(p["mode"], p["rows"]) for p in case["forward_passes"]])


# ----------------------------------------------------------------------------------------------- one step


def run_step(module: SmoothingModule, x: Tensor, labels: Tensor, draws: Draws, sigma: Any = None) -> StepOutput:
    """The method's real loss hook on the 3 images with the recorded noise, then ``backward()``."""
    module.standard_normal = draws  # type: ignore[method-assign]
    module.zero_grad(set_to_none=True)
    out = module.training_loss(Batch(x, labels, torch.arange(len(x)), sigma))
    out.loss.backward()
    draws.assert_used()
    return out


def assert_step_matches(net: nn.Module, out: StepOutput, passes: list[tuple[str, int]], case: dict[str, Any]) -> None:
    """Loss, every parameter's gradient, BN buffers after the step, and the forward passes, as the reference."""
    expected = case["outputs"]
    assert_close(out.loss.detach(), expected["loss"], "loss")
    grads = golden.gradients(net)
    for name, value in expected["grads"].items():
        assert_close(grads[name], tensor(value), f"gradient of {name}")
    assert_buffers(net, expected["buffers_after"])
    assert merged(passes) == golden_passes(case), "forward passes (mode, rows)"


def assert_buffers(net: nn.Module, expected: dict[str, Any]) -> None:
    """The BatchNorm running statistics and the number of train-mode updates, as the reference's after the step."""
    buffers = golden.bn_buffers(net)
    for name, value in expected.items():
        if name == "bn.num_batches_tracked":
            assert int(buffers[name]) == int(tensor(value)), "number of train-mode BatchNorm updates"
        else:
            assert_close(buffers[name], tensor(value), name)


def setup(name: str, case_name: str) -> tuple[dict[str, Any], dict[str, Any], nn.Module, Tensor, Tensor]:
    """``(fixture, case, tiny float64 model, images, labels)`` of a golden case."""
    fixture = golden.load(name)
    case = golden.case(fixture, case_name)
    return fixture, case, golden.tiny_model(fixture), golden.inputs(fixture), tensor(case["labels"])


# --------------------------------------------------------------------------------------------------- fixtures


@pytest.mark.parametrize("name", ["smoothadv", "smoothmix", "catrs", "consistency", "stability", "macer"])
def test_fixture_noise_is_z_times_sigma_and_the_layouts_invert(name: str) -> None:
    fixture = golden.load(name)
    for case in fixture["cases"]:
        draws = case["random_draws"]
        sigma = case["hyperparameters"]["sigma"]
        z = tensor(draws["z"])
        # one IEEE multiplication, exactly rounded on every machine: the float64 product the reference computed
        assert torch.equal(tensor(draws["noise"]), z * sigma)
        if z.dim() == 5:  # [m, B, ...] noise-major: row j*B + i of the reference is copy j of image i
            m = z.shape[0]
            rows = golden.image_major(z)
            assert torch.equal(rows[1 * m + 0], z[0, 1])  # rsbench's row i*m + j: image 1, copy 0
            assert torch.equal(golden.noise_major(rows, m), z)


# -------------------------------------------------------------------------------------------------- SmoothAdv


def smoothadv_module(net: nn.Module, hp: dict[str, Any]) -> SmoothAdv:
    return SmoothAdv(
        net=net,
        sigma=hp["sigma"],
        optimizer=SGD,
        epsilon=hp["epsilon"],
        num_steps=hp["num_steps"],
        num_noise=hp["num_noise_vec_m"],
        attack=hp["attack"].lower(),
        ddn_gamma=hp.get("gamma", 0.05),
    )


SMOOTHADV_CASES = ["pgd_eps0.25", "pgd_eps1.0", "ddn_eps1.0"]


@pytest.mark.parametrize("case_name", SMOOTHADV_CASES)
def test_smoothadv_matches_the_reference(monkeypatch: pytest.MonkeyPatch, case_name: str) -> None:
    """PGD_L2 at eps 0.25 and 1.0 and DDN (cosine step, mode vote, 8-bit grid), then CE over the B*m rows."""
    _, case, net, x, labels = setup("smoothadv", case_name)
    module = smoothadv_module(net, case["hyperparameters"])
    attacks = spy(monkeypatch, module, "adversarial")
    passes = record_forwards(net)
    out = run_step(module, x, labels, Draws(tensor(case["random_draws"]["z"])))  # image-major, as rsbench
    (args, x_adv), *others = attacks
    assert not others
    assert torch.equal(args[2], tensor(case["random_draws"]["noise"]))  # z * sigma (one exactly rounded product)
    assert_close(x_adv, tensor(case["outputs"]["x_adv"]), "x_adv")
    assert_step_matches(net, out, passes, case)


@pytest.mark.filterwarnings(NO_TRAINER_LOG)
@pytest.mark.parametrize("case_name", SMOOTHADV_CASES)
def test_ddrs_smoothadv_with_every_sigma_at_one_half_matches_the_reference(
    monkeypatch: pytest.MonkeyPatch, case_name: str
) -> None:
    """method=ddrs, base smoothadv: the per-example sigma vector (0.5 for each image) reproduces SmoothAdv exactly."""
    _, case, net, x, labels = setup("smoothadv", case_name)
    hp = case["hyperparameters"]
    module = ddrs_smoothadv(net, hp, sigma_init=hp["sigma"])
    passes = record_forwards(net)
    sigma = module.example_sigma(x, labels, torch.arange(3))
    assert isinstance(sigma, Tensor)  # the per-example path, not the module's float sigma
    assert_close(sigma, torch.full((3,), hp["sigma"]), "per-example sigma")
    out = run_step(module, x, labels, Draws(tensor(case["random_draws"]["z"])), sigma)
    assert_step_matches(net, out, passes, case)


def ddrs_smoothadv(net: nn.Module, hp: dict[str, Any], **settings: Any) -> SmoothingModule:
    """rsbench's DDRS module around SmoothAdv with the case's attack settings and no sigma-search step (K = 0)."""
    base_args = {
        "epsilon": hp["epsilon"],
        "num_steps": hp["num_steps"],
        "num_noise": hp["num_noise_vec_m"],
        "attack": hp["attack"].lower(),
    }
    options = {"sigma_iters": 0, "sigma_lr": 0.1} | settings
    return data_dependent("smoothadv", net=net, sigma=hp["sigma"], optimizer=SGD, base_args=base_args, **options)


@pytest.mark.filterwarnings(NO_TRAINER_LOG)
def test_ddrs_smoothadv_scales_each_images_noise_by_its_own_sigma(monkeypatch: pytest.MonkeyPatch) -> None:
    """Different per-example sigmas: image i's m noise copies are z * sigma_i, in the attack and in the loss.

    Each image's adversarial example must also be the one a plain SmoothAdv module at that image's sigma finds (the
    attack runs in eval mode, so images do not interact there).
    """
    _, case, net, x, labels = setup("smoothadv", "pgd_eps1.0")
    hp = case["hyperparameters"]
    m = hp["num_noise_vec_m"]
    z = tensor(case["random_draws"]["z"])
    sigmas = torch.tensor([0.25, 0.5, 1.0], dtype=torch.float64)
    module = ddrs_smoothadv(net, hp)
    module.sigma_memory = sigmas.clone()
    sigma = module.example_sigma(x, labels, torch.arange(3))
    assert_close(sigma, sigmas, "per-example sigma from the memory")
    attacks = spy(monkeypatch, module, "adversarial")
    inputs: list[Tensor] = []
    net.register_forward_pre_hook(lambda mod, args: inputs.append(args[0].detach().clone()) if mod.training else None)
    run_step(module, x, labels, Draws(z), sigma)
    (args, x_adv), *_ = attacks
    expected_noise = z * sigmas.repeat_interleave(m).view(-1, 1, 1, 1)  # rows i*m .. i*m+m-1 scaled by sigma_i
    assert torch.equal(args[2], expected_noise)  # single IEEE products and sums below: exact on every machine
    (loss_input,) = inputs  # the one train-mode forward: x_adv + the same noise
    assert torch.equal(loss_input, x_adv.repeat_interleave(m, dim=0) + expected_noise)
    for image, image_sigma in enumerate(sigmas.tolist()):
        assert_close(x_adv[image], x_adv_at(hp, x, labels, z, image_sigma)[image], f"x_adv of image {image}")
    assert (x_adv[0] - x_adv_at(hp, x, labels, z, 1.0)[0]).abs().max() > 1e-3  # sigma really moves the attack


def x_adv_at(hp: dict[str, Any], x: Tensor, labels: Tensor, z: Tensor, sigma: float) -> Tensor:
    """The adversarial images a plain SmoothAdv module at the scalar ``sigma`` finds with the draws ``z``."""
    plain = smoothadv_module(golden.tiny_model(golden.load("smoothadv")), hp | {"sigma": sigma})
    plain.standard_normal = Draws(z)  # type: ignore[method-assign]
    return plain.adversarial(x, labels, plain.noise_copies(x, hp["num_noise_vec_m"]))


# -------------------------------------------------------------------------------------------------- SmoothMix


@pytest.mark.parametrize("case_name", ["mix_step0_warmup1.0", "mix_step1_warmup1.0", "mix_step1_warmup0.5"])
def test_smoothmix_matches_the_reference(monkeypatch: pytest.MonkeyPatch, case_name: str) -> None:
    """Unrestricted adversary, x_init (mix_step 0/1; at warmup 0.5 the maxnorm_s renorm is active), mixup, mask.

    B = 3 images with m = 2 copies each: the reference's noise-major rows are regrouped image-major for rsbench.
    """
    _, case, net, x, labels = setup("smoothmix", case_name)
    hp = case["hyperparameters"]
    module = SmoothMix(
        net=net,
        sigma=hp["sigma"],
        optimizer=SGD,
        num_steps=hp["num_steps"],
        num_noise=hp["num_noise_vec_m"],
        step_size=hp["alpha_step_size"],
        eta=hp["eta"],
        mix_step=hp["mix_step"],
        maxnorm=hp["maxnorm"],
        warmup=round(1 / hp["warmup_v"]),  # epoch 0: warmup_v = min(1, 1 / warmup)
    )
    assert module.warmup_value() == hp["warmup_v"]
    assert module.warmup_value() * module.maxnorm_s == pytest.approx(hp["effective_maxnorm_s"], rel=RTOL)
    draws = case["random_draws"]
    pending = feed_rand(monkeypatch, tensor(draws["u"]))
    iterates = spy(monkeypatch, module, "adversary")
    passes = record_forwards(net)
    out = run_step(module, x, labels, Draws(golden.image_major(tensor(draws["z"]))))
    assert not pending
    (_, (x_init, x_adv)), *_ = iterates
    assert_close(x_init, tensor(case["outputs"]["x_init"]), "x_init")
    assert_close(x_adv, tensor(case["outputs"]["x_adv"]), "x_adv")
    diagnostics = case["diagnostics"]
    m = hp["num_noise_vec_m"]
    assert_close(smoothed_probs(out.logits.detach(), m), tensor(diagnostics["clean_avg_softmax"]), "clean F_hat")
    mask = tensor(diagnostics["mixup_mask_per_image"])  # [argmax F_hat(x_init) == y]: margins >= 0.05
    assert (smoothed_probs(out.logits.detach(), m).argmax(dim=1) == labels).long().tolist() == mask.tolist()
    assert out.terms["mix_mask"].item() == pytest.approx(mask.double().mean().item(), rel=RTOL)
    assert_step_matches(net, out, passes, case)


# ----------------------------------------------------------------------------------------------------- CAT-RS


def catrs_module(net: nn.Module, case: dict[str, Any], **changes: Any) -> CATRS:
    hp = case["hyperparameters"]
    settings = {
        "num_noise": hp["num_noise_vec_M"],
        "epsilon": hp["epsilon"],
        "num_steps": hp["num_steps"],
        "lbd": hp["lbd"],
        "confidence_mask": hp["confidence_mask"],
    } | changes
    module = CATRS(net=net, sigma=hp["sigma"], optimizer=SGD, **settings)
    module.soft_labels = tensor(case["soft_labels_pb"])  # the teacher's y_hat of images 0..2, looked up by index
    return module


def catrs_step(monkeypatch: pytest.MonkeyPatch, case_name: str, **changes: Any) -> tuple[Any, ...]:
    _, case, net, x, labels = setup("catrs", case_name)
    module = catrs_module(net, case, **changes)
    draws = case["random_draws"]
    total = case["hyperparameters"]["num_noise_vec_M"]
    pending = feed_binomial(monkeypatch, tensor(draws["K"]), total, tensor(case["outputs"]["binomial_probs"]))
    searches = spy(monkeypatch, module, "adversarial_noise")
    passes = record_forwards(net)
    out = run_step(module, x, labels, Draws(golden.image_major(tensor(draws["z"]))))
    assert not pending
    (_, adv_noise), *_ = searches
    return case, net, out, passes, adv_noise


@pytest.mark.parametrize("case_name", ["K_below_M", "K_equals_M"])
def test_catrs_matches_the_reference(monkeypatch: pytest.MonkeyPatch, case_name: str) -> None:
    """KL_PGD noise at epsilon 1.0, bottom-K CE / M, max-KL high term where K+ = M, two BN updates.

    K_below_M (K = [0, 2, 3] -> K+ = [1, 2, 3]): no image takes the high term, so the adversarial noise enters the
    step only through the second train-mode forward's BatchNorm statistics (``buffers_after``); K_equals_M
    (K = [0, 4, 1]): image 1 takes it, so the adversarial noise enters the loss and every gradient.
    B = 3 images with M = 4 copies each, regrouped from the reference's noise-major rows.
    """
    case, net, out, passes, adv_noise = catrs_step(monkeypatch, case_name)
    outputs = case["outputs"]
    assert_close(adv_noise, golden.image_major(tensor(outputs["adv_noises"])), "adversarial noise")
    assert_close(out.terms["loss_low"].detach(), outputs["loss_low_mean"], "L_low averaged over images")
    assert_step_matches(net, out, passes, case)


def test_catrs_adversarial_noise_enters_the_reference_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    """The K_equals_M golden pins the noise search: without it (epsilon 0) loss and gradients move far off."""
    case, net, out, _, _ = catrs_step(monkeypatch, "K_equals_M", epsilon=0.0)
    high_term = case["outputs"]["loss"] - case["outputs"]["loss_low_mean"]
    assert high_term > 0.1  # lbd * mean(max_j KL * [K+ == M]) of the reference
    assert abs(out.loss.item() - case["outputs"]["loss"]) > 1e-2
    reference = tensor(case["outputs"]["grads"]["fc2.weight"])
    assert (golden.gradients(net)["fc2.weight"] - reference).abs().max() > 1e-3


# ----------------------------------------------------------------------------------------------- Consistency


def test_consistency_matches_the_reference() -> None:
    """CE over the m*B rows + lbd * mean KL(p_bar || p_i) + eta * H(p_bar), p_bar not detached, one BN batch."""
    _, case, net, x, labels = setup("consistency", "consistency_m2")
    hp = case["hyperparameters"]
    module = ConsistencyRegularization(
        net, hp["sigma"], SGD, num_noise=hp["num_noise_vec_m"], lbd=hp["lbd"], eta=hp["eta"]
    )
    passes = record_forwards(net)
    out = run_step(module, x, labels, Draws(golden.image_major(tensor(case["random_draws"]["z"]))))
    outputs = case["outputs"]
    assert_close(out.terms["cross_entropy"].detach(), outputs["loss_xent"], "cross-entropy")
    regularizer = hp["lbd"] * out.terms["consistency_kl"] + hp["eta"] * out.terms["entropy"]
    assert_close(regularizer.detach(), outputs["loss_consistency"], "consistency + entropy")
    assert_step_matches(net, out, passes, case)


# ------------------------------------------------------------------------------------------------- Stability


def test_stability_matches_the_reference() -> None:
    """CE(f(x)) + lbd * H(softmax(f(x)), f(x + eps)): two train-mode passes (clean first), target not detached."""
    _, case, net, x, labels = setup("stability", "stability")
    hp = case["hyperparameters"]
    module = StabilityTraining(net, hp["sigma"], SGD, lbd=hp["lbd"])
    passes = record_forwards(net)
    out = run_step(module, x, labels, Draws(tensor(case["random_draws"]["z"])))
    assert_close(out.terms["cross_entropy"].detach(), case["outputs"]["loss_xent"], "cross-entropy")
    assert_close(out.terms["stability"].detach(), case["outputs"]["loss_stab"], "stability term")
    assert_step_matches(net, out, passes, case)


# ----------------------------------------------------------------------------------------------------- MACER


def test_macer_matches_the_reference() -> None:
    """Image 0 correct but beyond the hinge (|gap| 15.2 > gamma 8), image 1 in it, image 2 misclassified."""
    _, case, net, x, labels = setup("macer", "macer_k8")
    hp = case["hyperparameters"]
    module = MACER(
        net, hp["sigma"], SGD, num_noise=hp["gauss_num_k"], lbd=hp["lbd"], gamma=hp["gamma"], beta=hp["beta"]
    )
    passes = record_forwards(net)
    out = run_step(module, x, labels, Draws(tensor(case["random_draws"]["z"])))
    outputs, diagnostics = case["outputs"], case["diagnostics"]
    assert_close(out.terms["classification"], outputs["classification_loss_per_input"], "classification / B")
    assert_close(out.terms["robustness"], outputs["robustness_loss_per_input"], "robustness / B")
    grouped = out.logits.detach().view(3, hp["gauss_num_k"], -1)
    _, keep = robustness_hinge(grouped, labels, hp["beta"], hp["gamma"])
    beta_probs = torch.softmax(hp["beta"] * grouped, dim=2).mean(dim=1)
    assert_close(beta_probs, tensor(diagnostics["beta_avg_softmax"]), "mean softmax(beta * logits)")
    top1_correct = (beta_probs.argmax(dim=1) == labels).tolist()
    assert top1_correct == tensor(diagnostics["top1_correct"]).bool().tolist() == [True, True, False]
    assert keep.tolist() == tensor(diagnostics["in_hinge"]).bool().tolist() == [False, True, False]
    assert_step_matches(net, out, passes, case)


# -------------------------------------------------------------------------------------------- DDRS sigma search


def ddrs_case(case_name: str) -> tuple[dict[str, Any], dict[str, Any], Tensor, Tensor]:
    fixture = golden.load("ddrs_sigma")
    case = golden.case(fixture, case_name)
    return fixture, case, golden.inputs(fixture), tensor(case["random_draws"]["z"])


@pytest.mark.parametrize(
    ("case_name", "train"), [("optimize_sigma_eval_mode", False), ("optimize_sigma_train_mode", True)]
)
def test_sigma_search_matches_optimize_sigma(monkeypatch: pytest.MonkeyPatch, case_name: str, train: bool) -> None:
    """OptimzeSigma after each of K = 4 steps; in train mode BN batch statistics couple the images' sigmas.

    Like the reference's outputs (it was rerun with K = t + 1 on the same draws), rsbench is run once per t.
    Unlike the reference, rsbench returns the new sigma instead of writing it into the caller's ``sig_0``.
    """
    fixture, case, x, z = ddrs_case(case_name)
    hp = case["hyperparameters"]
    sig_0 = tensor(hp["sig_0"])
    after = tensor(case["outputs"]["sigma_after_step"])
    for step in range(hp["K_steps"]):
        net = golden.tiny_model(fixture).train(train)
        passes = record_forwards(net)
        pending = feed_randn(monkeypatch, list(z[: step + 1]))
        start = sig_0.clone()
        sigma = optimize_sigma(
            net, x, start, iterations=step + 1, lr=hp["alpha_step_size"], samples=hp["n_samples"], clamp=(0.02, 0.98)
        )
        assert not pending
        assert torch.equal(start, sig_0)
        assert_close(sigma, after[step], f"sigma after {step + 1} step(s)")
        assert passes == [("train" if train else "eval", 3 * hp["n_samples"])] * (step + 1)
    assert_buffers(net, case["outputs"]["buffers_after"])  # after the K = 4 run
    if train:  # image 0's first step has both scores clamped, so alone it would be alpha * gap / 2 exactly ...
        gap = float(torch.special.ndtri(torch.tensor(0.98, dtype=torch.float64)) * 2)  # Phi^-1(.98) - Phi^-1(.02)
        assert tensor(case["diagnostics"]["clamp_active_per_step"])[0, 0].tolist() == [1, 1]
        # ... but the batch statistics couple it to the other images' radius terms: 0.20456 instead of 0.20537
        assert abs(float(after[0, 0] - sig_0[0]) - hp["alpha_step_size"] * gap / 2) > 5e-4


def test_sigma_search_with_the_ddsmoothing_clamp_matches_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ddsmoothing``'s optimize_isotropic_dds differs from OptimzeSigma only by its clamp, [0.001, 0.999]."""
    fixture, case, x, z = ddrs_case("ddsmoothing_isotropic_l2_train_mode")
    hp = case["hyperparameters"]
    net = golden.tiny_model(fixture)
    feed_randn(monkeypatch, list(z))
    sigma = optimize_sigma(
        net,
        x,
        tensor(hp["sig_0"]),
        iterations=hp["iterations"],
        lr=hp["learning_rate"],
        samples=hp["samples"],
        clamp=tuple(hp["prob_clamp"]),
    )
    assert_close(sigma, tensor(case["outputs"]["sigma"]), "sigma after 4 steps")
    assert_buffers(net, case["outputs"]["buffers_after"])
    # the clamp matters here: OptimzeSigma's [0.02, 0.98] (the train-mode case, same draws) ends elsewhere
    other = tensor(golden.case(golden.load("ddrs_sigma"), "optimize_sigma_train_mode")["outputs"]["sigma_after_step"])
    assert (other[-1] - sigma).abs().max() > 1e-3


@pytest.mark.filterwarnings(NO_TRAINER_LOG)
def test_ddrs_module_searches_sigma_in_train_mode_as_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """The DDRS training module (Algorithm 2) runs OptimzeSigma with the network in train mode, memory in and out."""
    fixture, case, x, z = ddrs_case("optimize_sigma_train_mode")
    hp = case["hyperparameters"]
    net = golden.tiny_model(fixture)
    module = data_dependent(
        "gaussian",
        net=net,
        sigma=0.5,
        optimizer=SGD,
        sigma_iters=hp["K_steps"],
        sigma_lr=hp["alpha_step_size"],
        sigma_samples=hp["n_samples"],
    )
    module.sigma_memory = tensor(hp["sig_0"])  # each image's sigma_0, as the memory would hold it
    pending = feed_randn(monkeypatch, list(z))
    sigma = module.example_sigma(x, torch.zeros(3, dtype=torch.long), torch.arange(3))
    assert not pending
    final = tensor(case["outputs"]["sigma_after_step"])[-1]
    assert isinstance(sigma, Tensor)
    assert_close(sigma, final, "sigma after 4 steps")
    assert_close(module.sigma_memory, final, "the memory after the batch")
    assert_buffers(net, case["outputs"]["buffers_after"])
