"""The noise mixin: pixel-space Gaussian noise, fp32, on the input's device, per-example sigma, copies grouped."""

from __future__ import annotations

import math

import pytest
import torch

from rsbench.noise import NoiseMixin, check_sigma


class Noisy(NoiseMixin):
    def __init__(self, sigma: float) -> None:
        self.sigma = sigma


def test_noise_has_the_requested_scale_and_is_not_clamped() -> None:
    torch.manual_seed(0)
    x = torch.full((64, 3, 8, 8), 0.5)
    noisy = Noisy(0.5).add_noise(x)
    noise = noisy - x
    assert noise.mean().abs() < 0.02
    assert noise.std().item() == pytest.approx(0.5, rel=0.03)
    assert noisy.min() < 0  # never clamped to [0, 1]
    assert noisy.max() > 1


def test_noise_is_float32_even_for_low_precision_inputs() -> None:
    x = torch.rand(4, 1, 5, 5).to(torch.bfloat16)
    assert Noisy(0.25).sample_noise(x).dtype == torch.float32
    assert Noisy(0.25).add_noise(x).dtype == torch.float32
    assert Noisy(0.25).sample_noise(x.double()).dtype == torch.float64


def test_generator_makes_noise_reproducible() -> None:
    x = torch.rand(2, 1, 4, 4)
    a = Noisy(0.3).add_noise(x, generator=torch.Generator().manual_seed(1))
    b = Noisy(0.3).add_noise(x, generator=torch.Generator().manual_seed(1))
    c = Noisy(0.3).add_noise(x, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_per_example_sigma_scales_each_example() -> None:
    torch.manual_seed(0)
    x = torch.zeros(3, 1, 64, 64)
    sigma = torch.tensor([0.1, 1.0, 2.0])
    stds = Noisy(0.5).add_noise(x, sigma=sigma).flatten(1).std(dim=1)
    assert torch.allclose(stds, sigma, rtol=0.05)


def test_per_example_sigma_must_match_the_batch() -> None:
    with pytest.raises(ValueError, match=r"shape \[3\]"):
        Noisy(0.5).add_noise(torch.zeros(3, 1, 2, 2), sigma=torch.ones(2))


def test_noisy_copies_are_grouped_by_image_and_independent() -> None:
    torch.manual_seed(0)
    x = torch.stack([torch.zeros(1, 16, 16), torch.ones(1, 16, 16)])
    copies = Noisy(0.1).noisy_copies(x, 4)
    assert copies.shape == (8, 1, 16, 16)
    per_image = copies.view(2, 4, -1).mean(dim=2)
    assert torch.allclose(per_image[0], torch.zeros(4), atol=0.05)
    assert torch.allclose(per_image[1], torch.ones(4), atol=0.05)
    assert not torch.equal(copies[0], copies[1])


def test_noisy_copies_repeat_per_example_sigma() -> None:
    torch.manual_seed(0)
    copies = Noisy(0.5).noisy_copies(torch.zeros(2, 1, 32, 32), 3, sigma=torch.tensor([0.1, 1.0]))
    stds = copies.flatten(1).std(dim=1)
    assert torch.allclose(stds, torch.tensor([0.1] * 3 + [1.0] * 3), rtol=0.1)


def test_fill_noisy_reuses_the_buffer() -> None:
    buffer = torch.empty(5, 1, 4, 4)
    x = torch.rand(1, 4, 4)
    out = Noisy(0.2).fill_noisy(buffer, x, torch.Generator().manual_seed(0))
    assert out.data_ptr() == buffer.data_ptr()
    assert (out - x).std().item() == pytest.approx(0.2, rel=0.3)
    with pytest.raises(ValueError, match="float32 or float64"):
        Noisy(0.2).fill_noisy(torch.empty(2, 1, 4, 4, dtype=torch.bfloat16), x)


@pytest.mark.parametrize("bad", [0, -0.25, math.inf, math.nan, "0.5", True])
def test_bad_sigma_is_refused_with_its_value(bad: object) -> None:
    with pytest.raises(ValueError, match="sigma must be"):
        Noisy(bad)  # type: ignore[arg-type]


def test_bad_per_example_sigma_is_refused() -> None:
    with pytest.raises(ValueError, match=r"-1\.0"):
        check_sigma(torch.tensor([0.5, -1.0]))


def test_copies_must_be_positive() -> None:
    with pytest.raises(ValueError, match="num_copies"):
        Noisy(0.5).noisy_copies(torch.zeros(1, 1, 2, 2), 0)
