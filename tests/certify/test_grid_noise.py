"""Grid noise (Voráček and Hein 2023): exact discretised Gaussian noise, and the forged certificate it prevents."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import chisquare, norm
from torch import nn

from rsbench import Smooth
from rsbench.archs import Classifier, LeNet
from rsbench.certify.algorithm.grid_noise import GridSmooth, grid_noise, grid_thresholds
from rsbench.certify.pipeline.certification import Certification, Subject
from rsbench.certify.pipeline.settings import CertifySettings

SIGMA = 0.5
S = 2.0**-7  # the shift of the attacked image: 1/128 per pixel
D = 784  # 28 x 28 pixels


class RoundingReader(nn.Module):
    """A base classifier that reads float32 rounding: class 1 when some pixel is tiny but finer than the grid s 2^-24.

    With x = 0 the noisy pixel is the float noise itself, whose mantissa is full: about 2/3 of the pixels within s/2
    of 0 are not multiples of 2^-31. With x' = s, a pixel within s/2 of 0 is s + eps computed exactly (Sterbenz),
    a multiple of ulp(s/2) = 2^-31: class 1 never happens. A float32 artefact, not a geometric property of the input.
    """

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        flat = z.flatten(1)
        fine = (flat.abs() < S / 2) & (torch.frac(flat * 2.0**31) != 0)
        hit = fine.any(dim=1).float()
        return torch.stack([1 - hit, hit], dim=1)


def test_grid_noise_draws_the_discretised_gaussian() -> None:
    levels, sigma = 255, 0.02  # about 5 grid steps per sigma, so every bin is well filled
    draws = grid_noise((200_000,), levels, sigma, torch.device("cpu"), torch.Generator().manual_seed(0)).numpy()
    support = np.arange(-20, 21)
    edges = (np.append(support - 0.5, support[-1] + 0.5)) / (levels * sigma)
    expected = np.diff(norm.cdf(edges))
    expected = np.append(expected, 1 - expected.sum())  # the tails beyond +-20
    observed = np.append([(draws == j).sum() for j in support], (np.abs(draws) > 20).sum())
    assert chisquare(observed, expected * len(draws) / expected.sum()).pvalue >= 1e-3
    support_size, thresholds = grid_thresholds(levels, 1.0)
    assert support_size == 2550  # 10 sigma of 255 steps
    assert thresholds[support_size] == pytest.approx(2**62 * norm.cdf(0.5 / 255), rel=1e-12)


def test_grid_noise_refuses_images_off_the_grid() -> None:
    smooth = GridSmooth(RoundingReader(), 2, SIGMA)
    with pytest.raises(ValueError, match="needs images on the grid k/255"):
        smooth.sample_counts(torch.full((1, 28, 28), 0.3 / 255), 10, 10)
    with pytest.raises(ValueError, match=r"certify\.noise_grid must be an integer >= 1"):
        GridSmooth(RoundingReader(), 2, SIGMA, levels=0)


def test_float_noise_forges_a_certificate_that_grid_noise_does_not() -> None:
    x, attacked = torch.zeros(1, 28, 28), torch.full((1, 28, 28), S)
    distance = S * D**0.5  # 0.22
    float_noise = Smooth(RoundingReader(), 2, SIGMA)
    forged = float_noise.certify_with_details(x, 100, 2000, 0.001, 1000, seed=0)
    assert forged.prediction == 1
    assert forged.radius > 2 * distance  # "class 1 for every input within 0.7" ...
    at_attacked = float_noise.sample_counts(attacked, 2000, 1000, torch.Generator().manual_seed(1))
    assert at_attacked[1] == 0  # ... yet the smoothed classifier says class 0 at distance 0.22, with certainty
    # On the grid, the network sees only multiples of 1/255: the rounding it read is gone, class 1 never happens, and
    # the certificate of x holds at every 8-bit image near it (here x' = 1/255 per pixel, at distance 0.11).
    grid = GridSmooth(RoundingReader(), 2, SIGMA)
    sound = grid.certify_with_details(x, 100, 2000, 0.001, 1000, seed=0)
    assert (sound.prediction, sound.count) == (0, 2000)
    nearby = grid.sample_counts(torch.full((1, 28, 28), 1 / 255), 2000, 1000, torch.Generator().manual_seed(1))
    assert nearby[0] == 2000


def test_the_pipeline_certifies_with_grid_noise_and_records_it(tmp_path: Path) -> None:
    settings = CertifySettings.from_keys(n0=16, n=300, alpha=0.01, batch_size=100, noise_grid=255)
    images = [(torch.randint(0, 256, (1, 28, 28)).float() / 255, 0) for _ in range(3)]
    subject = Subject(Classifier("lenet", LeNet(2), {"kind": "identity"}), 2, 0.25, {"method": "test"})
    outcome = Certification(settings, tmp_path).run(subject, images)
    assert outcome.summary is not None
    assert outcome.summary["num_images"] == 3
    assert json.loads((tmp_path / "certify_protocol.json").read_text())["noise_grid"] == 255
    with pytest.raises(ValueError, match=r"certify\.noise_grid=255 needs sigma_mode=fixed"):
        CertifySettings.from_keys(noise_grid=255, sigma_mode="data_dependent")
    with pytest.raises(ValueError, match=r"certify\.noise_grid must be an integer >= 1"):
        CertifySettings.from_keys(noise_grid=0)
