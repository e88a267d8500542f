"""Golden tests of Sun et al. (ICML 2025) against numbers produced by the authors' own code (eth-sri/acr-weakness).

``tests/golden/sun2025.json`` (SOURCE.md) was made by running the authors' ``code/train.py`` (``main``, ``train``,
``_chunk_minibatch``, ``radius_PGD``) and ``code/train_utils.py`` (``p_correct``) unmodified on the tiny float64 model
of the other golden fixtures, with pre-drawn noise injected for ``torch.randn_like``:

* ``radius_pgd_l2`` / ``radius_pgd_linf``: one optimizer step of ``train`` with the attack on (m = 4 noise copies, 3
  attack steps of size 0.5, sigma 0.5): the attacked noise, the loss, every parameter's gradient, the BatchNorm
  buffers after the step and the forward passes. The rows' first misclassified attack iterate covers every branch
  (the starting noise, steps 1 and 2, and never: the unevaluated final iterate).
* ``schedule_threshold0.5`` / ``schedule_threshold0.1``: ``main`` over 3 / 4 epochs on the 3 images with
  ``--ds_hard --ds_epoch 1 / 2 --dataset_weight --dataset_weight_epoch 1 / 2 --adv``: every p_A estimate the reference
  made (its draws, the BatchNorm state it ran in, the float32 confidences), the hard-sample decision (the kept
  images), the data weights handed to ``WeightedRandomSampler`` (including the clip of p_A to 0.75), and which epochs
  estimate, attack and draw with replacement.

Tolerances: ``rtol = atol = 1e-12`` on float64 values, as ``tests/methods/test_golden.py`` (the same model and the same
reasoning: both sides float64, rounding measured there at <= 7e-15); confidences, kept images and forward passes are
compared exactly (they are exact float32 fractions and integers).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch
from torch import Tensor
from torch.utils.data import TensorDataset

from rsbench.methods.sun2025 import Sun2025, dataset_weights, hard_sample_mask, p_correct
from tests import golden
from tests.golden import tensor
from tests.methods.test_golden import Draws, assert_close, assert_step_matches, record_forwards, run_step

SGD = functools.partial(torch.optim.SGD, lr=0.1)
FIXTURE = "sun2025"


def module_for(net: torch.nn.Module, hp: dict[str, Any], **options: Any) -> Sun2025:
    """A Sun2025 module with a case's hyperparameters."""
    return Sun2025(net=net, sigma=hp["sigma"], optimizer=SGD, num_noise=hp["num_noise_vec_m"], **options)


@pytest.mark.parametrize(
    ("case_name", "attacker"), [("radius_pgd_l2", "pgd_radius_l2"), ("radius_pgd_linf", "pgd_radius_linf")]
)
def test_attack_and_training_step_match_the_reference(
    monkeypatch: pytest.MonkeyPatch, case_name: str, attacker: str
) -> None:
    """The attacked noise, the loss over the m copies, every gradient, BN buffers and forward passes."""
    fixture = golden.load(FIXTURE)
    case = golden.case(fixture, case_name)
    hp = case["hyperparameters"]
    net = golden.tiny_model(fixture)
    module = module_for(
        net,
        hp,
        ds_hard=True,
        ds_epoch=0,
        attacker=attacker,
        epsilon=hp["epsilon_step_size"],
        attack_steps=hp["attack_steps"],
    )
    assert module.adv_active(0)
    attacked: list[Tensor] = []
    from rsbench.methods import sun2025

    original = sun2025.radius_pgd_noise

    def spy(*args: Any) -> Tensor:
        out = original(*args)
        attacked.append(out)
        return out

    monkeypatch.setattr(sun2025, "radius_pgd_noise", spy)
    passes = record_forwards(net)
    z = golden.image_major(tensor(case["random_draws"]["z"]))
    out = run_step(module, golden.inputs(fixture), tensor(case["labels"]), Draws(z))
    (noise,) = attacked
    assert_close(noise, golden.image_major(tensor(case["outputs"]["noise_attacked"])), "attacked noise")
    assert_step_matches(net, out, passes, case)


def schedule_cases() -> list[str]:
    return [c["name"] for c in golden.load(FIXTURE)["cases"] if c["name"].startswith("schedule")]


@pytest.mark.parametrize("case_name", schedule_cases())
def test_p_correct_estimates_match_the_reference(case_name: str) -> None:
    """Each p_A estimate: the fraction of the N noisy copies labelled correctly, as float32, in eval mode."""
    fixture = golden.load(FIXTURE)
    case = golden.case(fixture, case_name)
    x, labels = golden.inputs(fixture), tensor(case["labels"])
    for call in case["outputs"]["p_correct"]:
        net = golden.tiny_model(fixture)
        state = {golden._local(k): tensor(v) for k, v in call["buffers_at_call"].items()}
        net.load_state_dict(state, strict=False)
        module = module_for(net, case["hyperparameters"])
        positions = torch.arange(3) if call["valid_mask"] is None else tensor(call["valid_mask"])
        n = call["N"]
        z = tensor(call["z"]).view(n, len(positions), 1, 4, 4)  # x.repeat(N, 1, 1, 1): noise-major
        draws = Draws(golden.image_major(z))
        module.standard_normal = draws  # type: ignore[method-assign]
        net.train()
        counts = module.count_correct(x[positions], labels[positions], n)
        draws.assert_used()
        assert net.training, "count_correct must restore the module's mode"
        confidences = p_correct(counts, n)
        assert confidences.dtype == torch.float32
        assert torch.equal(confidences.double(), tensor(call["confidences"])), f"p_A of epoch {call['called_at_epoch']}"


@pytest.mark.parametrize("case_name", schedule_cases())
def test_hard_samples_and_data_weights_match_the_reference(case_name: str) -> None:
    """The kept images (p_A >= t on float32 p_A) and the weights handed to WeightedRandomSampler."""
    case = golden.case(golden.load(FIXTURE), case_name)
    hp, outputs = case["hyperparameters"], case["outputs"]
    ds_call, *weight_calls = outputs["p_correct"]
    kept = hard_sample_mask(tensor(ds_call["confidences"]).float(), hp["ds_threshold"])
    assert kept.nonzero().flatten().tolist() == tensor(outputs["subsets"][0]).tolist()
    samplers = [s for s in outputs["samplers"] if s["kind"] == "WeightedRandomSampler"]
    # the reference recomputes its weights at the update epochs and reuses them (a new sampler) in between
    for call in weight_calls:
        weights = dataset_weights(tensor(call["confidences"]).float(), call["N"])
        epoch = call["called_at_epoch"]
        sampler = samplers[epoch - hp["ds_epoch"]]
        assert_close(weights, tensor(sampler["weights"]), f"data weights of epoch {epoch}")
        assert sampler["num_samples"] == 3
        assert sampler["replacement"]


@pytest.mark.parametrize("case_name", schedule_cases())
def test_epoch_plan_follows_the_reference_schedule(monkeypatch: pytest.MonkeyPatch, case_name: str) -> None:
    """Which epochs estimate (with which N, on which images), attack, shuffle or draw with replacement and weights."""
    fixture = golden.load(FIXTURE)
    case = golden.case(fixture, case_name)
    hp, outputs = case["hyperparameters"], case["outputs"]
    module = module_for(
        golden.tiny_model(fixture),
        {**hp, "num_noise_vec_m": 1},
        ds_epoch=hp["ds_epoch"],
        ds_threshold=hp["ds_threshold"],
        ds_num_samples=hp["ds_N0"],
        dataset_weight_epoch=hp["dataset_weight_epoch"],
        dataset_weight_samples=hp["num_noise_dataset_weight"],
    )
    images = TensorDataset(golden.inputs(fixture), tensor(case["labels"]))
    monkeypatch.setattr(module, "_training_images", lambda: images)
    expected_calls = list(outputs["p_correct"])

    def estimate(dataset: Any, positions: Tensor, num_samples: int, epoch: int) -> Tensor:
        call = expected_calls.pop(0)
        assert (epoch, num_samples) == (call["called_at_epoch"], call["N"])
        mask = list(range(3)) if call["valid_mask"] is None else tensor(call["valid_mask"]).tolist()
        assert positions.tolist() == mask
        return (tensor(call["confidences"]) * num_samples).round().long()

    monkeypatch.setattr(module, "_estimate", estimate)
    samplers = [s for s in outputs["samplers"] if s["kind"] == "WeightedRandomSampler"]
    for train_call in outputs["train_calls"]:
        epoch = train_call["epoch"]
        assert module.adv_active(epoch) == train_call["adv_active"], f"attack in epoch {epoch}"
        plan = module.epoch_plan(epoch)
        if epoch < hp["ds_epoch"]:
            assert not plan.replacement
            assert plan.weights is None
            continue
        assert plan.replacement
        assert plan.weights is not None
        expected = torch.zeros(3, dtype=torch.float64)
        kept = tensor(outputs["subsets"][0])
        expected[kept] = tensor(samplers[epoch - hp["ds_epoch"]]["weights"])
        assert_close(plan.weights, expected, f"draw weights of epoch {epoch} (0 for a discarded image)")
    assert not expected_calls, f"{len(expected_calls)} reference estimate(s) never made"
