"""Certification at scale: packed batches, autocast and channels-last, sequential CERTIFY, sharding over ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import binomtest, norm
from torch import nn

from rsbench import Smooth
from rsbench.certify.algorithm.designs import run_design
from rsbench.certify.algorithm.seeding import derive_seed
from rsbench.certify.algorithm.sequential import LookSchedule, certify_group, certify_sequential
from rsbench.certify.pipeline.records import read_rows
from rsbench.certify.pipeline.settings import CertifySettings, Protocol, SequentialSchedule
from rsbench.errors import ConfigError, ProtocolMismatchError
from rsbench.runs.run import run
from tests.classifiers import Linear, Recorder
from tests.helpers import QUIET, ROOT, compose_config


class Brightness10(nn.Module):
    """Votes by the image's mean brightness (class = round(10 * mean)) and keeps the dtype each forward computed in."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(()))
        self.dtypes: list[torch.dtype] = []

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        logits = nn.functional.linear(z.flatten(1)[:, :1] * 0 + 1, torch.ones(1, 1) * self.scale)  # autocast probe
        self.dtypes.append(logits.dtype)
        target = (z.flatten(1).mean(dim=1) * 10).round().clamp(0, 9).long()
        return nn.functional.one_hot(target, 10).float()


def linear_at_margin(margin: float, dim: int = 16, seed: int = 0) -> tuple[Linear, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    w = torch.randn(dim, generator=generator, dtype=torch.float64)
    w /= w.norm()
    x = torch.rand(dim, generator=generator, dtype=torch.float64)
    return Linear(w, margin - float(w @ x)), x.float().view(1, 1, dim)


def test_packed_batches_give_each_image_its_own_counts() -> None:
    images = torch.stack([torch.full((1, 4, 4), v) for v in (0.1, 0.5, 0.9)])
    smooth = Smooth(Recorder(Brightness10()), 10, sigma=0.001)
    counts = smooth.sample_counts_batch(images, 70, batch_size=100)  # images straddle the batch boundaries
    assert counts.tolist()[0][1] == 70
    assert counts.tolist()[1][5] == 70
    assert counts.tolist()[2][9] == 70
    assert counts.sum() == 210


def test_packing_does_not_change_any_certificate() -> None:
    """When n0 and n divide the batch, packing draws exactly the same noise for every image."""
    model, x = linear_at_margin(0.3)
    xs = torch.cat([x, x + 0.01, x - 0.01]).unsqueeze(1)[:, 0]
    smooth = Smooth(model, 2, sigma=0.25)
    seeds = [derive_seed(7, i) for i in range(3)]
    packed = smooth.certify_batch(xs, 100, 500, 0.001, batch_size=500, seeds=seeds)
    alone = [smooth.certify_with_details(x, 100, 500, 0.001, 500, seed=s) for x, s in zip(xs, seeds, strict=True)]
    assert [(c.prediction, c.radius, c.count) for c in packed] == [(c.prediction, c.radius, c.count) for c in alone]


def test_autocast_runs_the_network_in_bf16_on_fp32_noise() -> None:
    recorder = Recorder(Brightness10())
    Smooth(recorder, 10, 0.25, precision="bf16").sample_counts(torch.rand(1, 4, 4), 50, 50)
    assert recorder.batches[0].dtype == torch.float32  # the noise and the noisy input stay fp32
    assert recorder.model.dtypes[0] == torch.bfloat16  # the network ran under autocast
    with pytest.raises(ValueError, match="precision must be one of"):
        Smooth(recorder, 10, 0.25, precision="int8")  # type: ignore[arg-type]


def test_channels_last_buffers_hold_gaussian_noise_around_the_image() -> None:
    recorder = Recorder(Brightness10())
    x = torch.rand(3, 8, 8)
    Smooth(recorder, 10, 0.25, channels_last=True).sample_counts(x, 400, 400, torch.Generator().manual_seed(0))
    batch = recorder.batches[0]
    assert batch.is_contiguous(memory_format=torch.channels_last)
    noise = batch - x
    assert noise.mean().abs() < 0.01
    assert noise.std().item() == pytest.approx(0.25, rel=0.02)


def test_channels_last_draws_the_same_noise_as_the_default_layout_for_one_channel_images() -> None:
    """With one channel, NCHW and NHWC are the same memory order, so the seeded noise lands on the same pixels: only a
    network's arithmetic can differ (for three channels the samples are placed differently: same law, other draws)."""
    batches = {}
    for channels in (1, 3):
        x = torch.rand(channels, 8, 8)
        for channels_last in (False, True):
            recorder = Recorder(Brightness10())
            smooth = Smooth(recorder, 10, 0.25, channels_last=channels_last)
            smooth.sample_counts(x, 300, 300, torch.Generator().manual_seed(0))
            batches[channels, channels_last] = recorder.batches[0]
    assert torch.equal(batches[1, False], batches[1, True])  # the very same floats: nothing is computed differently
    assert not torch.equal(batches[3, False], batches[3, True])


def test_look_schedule() -> None:
    assert LookSchedule(1000, 2.0, 100_000).looks() == [1000, 2000, 4000, 8000, 16000, 32000, 64000, 100000]
    assert LookSchedule(100, 10.0, 100).looks() == [100]
    with pytest.raises(ValueError, match="growth"):
        LookSchedule(10, 1.0, 100)
    with pytest.raises(ValueError, match="first"):
        LookSchedule(200, 2.0, 100)


def test_sequential_stops_early_on_an_always_right_classifier() -> None:
    model, x = linear_at_margin(5.0)  # pA = Phi(20): every vote is right
    smooth = Smooth(model, 2, sigma=0.25)
    cert = certify_sequential(
        smooth, x, 100, 0.001, 1000, radius_cap=0.75, schedule=LookSchedule(1000, 2.0, 100_000), seed=0
    )
    assert cert.prediction == 1
    assert cert.radius == pytest.approx(0.75)  # certified up to the cap
    assert cert.n <= 8000  # (alpha/8)^(1/n) >= Phi(3) needs n >= 6,700: the 4th look, not 100,000
    fixed = smooth.certify_with_details(x, 100, 100_000, 0.001, 1000, seed=0)
    assert fixed.radius > 0.75  # the fixed-n certificate is larger, at 12x the samples


class ThreeWay(nn.Module):
    """Votes for the largest of the first three pixels: under noise at x = 0, each class gets 1/3 of the votes."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return z.flatten(1)[:, :3]


def test_sequential_abstains_early_when_no_class_has_half_the_votes() -> None:
    cert = certify_sequential(
        Smooth(ThreeWay(), 3, 0.25),
        torch.zeros(1, 1, 3),
        100,
        0.001,
        1000,
        radius_cap=1.0,
        schedule=LookSchedule(1000, 2.0, 100_000),
        seed=3,
    )
    assert cert.prediction == Smooth.ABSTAIN
    assert cert.n == 1000  # the first look already rules out pA >= 1/2


def test_sequential_stops_when_the_next_grid_radius_is_out_of_reach() -> None:
    model, x = linear_at_margin(0.1)  # pA = Phi(0.4) = 0.655: radius about 0.1 < 0.25, the first grid step
    cert = certify_sequential(
        Smooth(model, 2, 0.25), x, 100, 0.001, 1000, radius_cap=1.0, schedule=LookSchedule(1000, 2.0, 100_000), seed=1
    )
    assert 0.0 < cert.radius < 0.25
    assert cert.n < 100_000


@pytest.mark.parametrize(("p_a", "trials"), [(0.6, 1500), (0.9, 1500), (0.5, 1500)])
def test_sequential_certificates_hold_with_probability_one_minus_alpha(p_a: float, trials: int) -> None:
    """Same check as the fixed-n coverage tests: failures (wrong class, or radius above the true one) <= alpha."""
    sigma, alpha = 0.25, 0.05
    margin = sigma * float(norm.ppf(p_a))
    model, x = linear_at_margin(margin, seed=11)
    smooth = Smooth(model, 2, sigma)
    schedule = LookSchedule(50, 2.0, 800)
    failures = 0
    for trial in range(trials):
        cert = certify_sequential(smooth, x, 50, alpha, 800, radius_cap=2.0, schedule=schedule, seed=trial)
        if cert.prediction != Smooth.ABSTAIN and (cert.prediction != int(margin > 0) or cert.radius > abs(margin)):
            failures += 1
    assert binomtest(failures, trials, alpha, alternative="greater").pvalue >= 1e-3, failures / trials


@pytest.mark.parametrize("design", ["looks", "betting", "informed", "adaptive"])
@pytest.mark.parametrize("p_a", [0.5, 0.6, 0.8413447, 0.9])  # 0.8413447: just below the target r = sigma
def test_every_design_holds_through_the_real_pipeline(design: str, p_a: float) -> None:
    """The coverage test of every design on real Gaussian noise through a linear network, many images at once.

    2,000 certifications of the same image (independent seeds) as one group: at most alpha = 0.05 of them may name
    the wrong class or a radius above the exact one, |m| (one-sided binomial test, flagged at p < 1e-3).
    """
    sigma, alpha, trials = 0.25, 0.05, 2000
    margin = sigma * float(norm.ppf(p_a))
    model, x = linear_at_margin(margin, seed=11)
    smooth = Smooth(model, 2, sigma)
    settings = SequentialSchedule(design=design, radius_cap=0.5)
    made = settings.make(sigma, Protocol(n0=50, n=1000, alpha=alpha))
    xs = x.expand(trials, *x.shape[1:]).contiguous()
    certificates = certify_group(smooth, xs, 50, 4000, made, seeds=[derive_seed(5, t) for t in range(trials)])
    wrong = [
        c.prediction != Smooth.ABSTAIN and (c.prediction != int(margin > 0) or c.radius > abs(margin))
        for c in certificates
    ]
    assert binomtest(sum(wrong), trials, alpha, alternative="greater").pvalue >= 1e-3, sum(wrong) / trials
    assert all(c.n <= max(made.looks()) for c in certificates)


def test_the_pipeline_decides_with_the_replay_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """certify_group hands its real vote counts to run_design; the same counts replayed give the same decisions."""
    import rsbench.certify.algorithm.sequential as sequential

    seen: list[tuple[int, list[int], list[int]]] = []
    chosen: list = []
    original = sequential.run_design

    def spy(design, images, counts_at, selection=None):
        def recording(samples, running):
            counts = counts_at(samples, running)
            seen.append((samples, list(running), list(counts)))
            return counts

        chosen.append(selection)
        return original(design, images, recording, selection)

    monkeypatch.setattr(sequential, "run_design", spy)
    model, x = linear_at_margin(0.2)
    smooth = Smooth(model, 2, sigma=0.25)
    design = SequentialSchedule().make(0.25, Protocol(n=20_000))
    xs = torch.cat([x, x + 0.05, x - 0.3])
    certificates = certify_group(smooth, xs, 100, 1000, design, seeds=[1, 2, 3])
    recorded = {(samples, i): c for samples, running, counts in seen for i, c in zip(running, counts, strict=True)}
    replayed = run_design(
        design, 3, lambda samples, running: np.array([recorded[samples, i] for i in running]), chosen[0]
    )
    assert [c.n for c in certificates] == list(replayed.samples)
    assert [c.radius for c in certificates] == pytest.approx(list(replayed.radius), abs=0)
    assert [c.p_a_lower for c in certificates] == list(replayed.lower)


def test_an_image_gets_the_same_certificate_alone_or_in_a_group() -> None:
    """Each image's streams are its own and chunking keeps them (C*H*W a multiple of 16): grouping changes nothing."""
    model, x = linear_at_margin(0.15)
    smooth = Smooth(model, 2, sigma=0.25)
    design = SequentialSchedule().make(0.25, Protocol(n=10_000))
    xs = torch.cat([x, x + 0.1, x - 0.2, x + 0.02])
    together = certify_group(smooth, xs, 100, 700, design, seeds=[4, 5, 6, 7])
    alone = [certify_group(smooth, xs[i : i + 1], 100, 700, design, seeds=[4 + i])[0] for i in range(4)]
    assert [(c.prediction, c.radius, c.count, c.n) for c in together] == [
        (c.prediction, c.radius, c.count, c.n) for c in alone
    ]


def test_an_unreachable_radius_cap_is_refused_naming_the_most_that_can_be_certified() -> None:
    """Issue 21: radius_cap=1.0 at sigma 0.25 (n = 100,000) drew every sample of every image and said nothing."""
    looks = r"radius_cap=1 cannot be reached at sigma=0.25 .*\(design=looks\) .* is 0\.936 .*<= 0\.936 "
    with pytest.raises(ConfigError, match=looks):
        CertifySettings.from_keys(mode="sequential", design="looks", radius_cap=1.0).check_reachable(0.25)
    with pytest.raises(ConfigError, match=r"radius_cap=1 cannot be reached .*\(design=informed\) .* is 0\.94"):
        CertifySettings.from_keys(mode="sequential", radius_cap=1.0).check_reachable(0.25)
    with pytest.raises(ConfigError, match=r"certify\.radius_target=1\.2 cannot be reached"):
        CertifySettings.from_keys(mode="sequential", radius_target=1.2).check_reachable(0.25)
    CertifySettings.from_keys(mode="sequential", radius_cap=0.9).check_reachable(0.25)
    CertifySettings.from_keys(mode="sequential").check_reachable(0.25)  # null: the largest reachable grid radius
    CertifySettings.from_keys(radius_cap=1.0).check_reachable(0.25)  # the standard mode has no radius cap


def certify_checkpoint(checkpoint: Path, output_dir: Path, *overrides: str) -> None:
    run(
        compose_config(
            *QUIET, "experiment=smoke", "train=false", f"ckpt_path={checkpoint}", *overrides, output_dir=output_dir
        )
    )


def test_sequential_mode_end_to_end(smoke_checkpoint: Path, tmp_path: Path) -> None:
    """The first design (#6), still selectable by name: its looks, its cap, no design parameters in its protocol."""
    certify_checkpoint(
        smoke_checkpoint,
        tmp_path,
        "certify.mode=sequential",
        "certify.design=looks",
        "certify.radius_cap=0.5",
        "certify.n=4000",
        "certify.first_look=200",
        "certify.alpha=0.001",
    )
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    rows = read_rows(tmp_path / "certify.tsv")
    assert metrics["mode"] == "sequential"
    assert metrics["design"] == "looks"
    assert list(metrics["certified_accuracy"]) == ["0.0", "0.25", "0.5"]  # the grid stops at the configured cap
    assert max(r.radius for r in rows) <= 0.5
    assert all(r.n in (200, 400, 800, 1600, 3200, 4000) for r in rows)
    assert metrics["mean_samples"] == pytest.approx(np.mean([r.n for r in rows]))
    assert "design" not in json.loads((tmp_path / "certify_protocol.json").read_text())


def test_sequential_default_design_end_to_end(smoke_checkpoint: Path, tmp_path: Path) -> None:
    """certify=sequential runs the informed design; metrics and protocol record it; the default cap is reachable."""
    # (the certify=sequential preset keeps the dataset's subset, every 5th image; 8 of them are enough here)
    certify_checkpoint(smoke_checkpoint, tmp_path, "certify=sequential", "certify.n=2000", "certify.max_images=8")
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    protocol = json.loads((tmp_path / "certify_protocol.json").read_text())
    rows = read_rows(tmp_path / "certify.tsv")
    assert (metrics["mode"], metrics["design"], protocol["design"]) == ("sequential", "informed", "informed")
    # smoke's alpha = 0.01: 2,000 of 2,000 votes certify at most 0.69 at sigma 0.25, so the design stops at 0.5
    assert protocol["radius_cap"] == metrics["radius_cap"] == 0.5
    assert list(metrics["certified_accuracy"]) == ["0.0", "0.25", "0.5"]
    assert protocol["looks"][0] == 100
    assert protocol["looks"][-1] == 2000
    assert all(r.n in protocol["looks"] for r in rows)
    assert max(r.radius for r in rows) <= 0.5


def test_packed_and_low_precision_options_end_to_end(smoke_checkpoint: Path, tmp_path: Path) -> None:
    certify_checkpoint(smoke_checkpoint, tmp_path / "fp32")
    certify_checkpoint(
        smoke_checkpoint,
        tmp_path / "fast",
        "certify.precision=bf16",
        "certify.channels_last=true",
        "certify.images_per_batch=4",
    )
    exact = read_rows(tmp_path / "fp32" / "certify.tsv")
    fast = read_rows(tmp_path / "fast" / "certify.tsv")
    assert [r.idx for r in fast] == [r.idx for r in exact]
    agree = np.mean([abs(a.count - b.count) <= 0.02 * a.n for a, b in zip(exact, fast, strict=True)])
    assert agree >= 0.75  # bf16 is another classifier, but a close one
    metrics = json.loads((tmp_path / "fast" / "metrics.json").read_text())
    assert (metrics["precision"], metrics["channels_last"], metrics["compile"]) == ("bf16", True, False)
    protocol = json.loads((tmp_path / "fast" / "certify_protocol.json").read_text())
    assert (protocol["precision"], protocol["channels_last"], protocol["compile"]) == ("bf16", True, False)
    # rows drawn in another memory layout are not continued under the default one (the seeds place noise differently)
    with pytest.raises(ProtocolMismatchError, match="channels_last: stored True, requested False"):
        certify_checkpoint(smoke_checkpoint, tmp_path / "fast", "certify.precision=bf16", "certify.images_per_batch=4")


@pytest.mark.slow  # 30-60 s on a quiet 2-core machine: make test-all
def test_ddp_training_and_sharded_certification_match_one_process(tmp_path: Path) -> None:
    """Two CPU processes (gloo) train, then each certifies its share; the merged rows equal a one-process run."""
    env = {**os.environ, "RSBENCH_KEEP_ALLOCATOR": "1"}
    ddp = tmp_path / "ddp"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rsbench",
            "experiment=smoke",
            "trainer=ddp",
            "trainer.accelerator=cpu",
            "trainer.devices=2",
            "logger=none",
            "trainer.enable_progress_bar=false",
            f"hydra.run.dir={ddp}",
        ],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    assert (ddp / "checkpoints" / "best.ckpt").is_file()
    assert [p.name for p in ddp.glob("certify*.tsv")] == ["certify.tsv"]  # the shards were merged
    single = tmp_path / "single"
    certify_checkpoint(ddp / "checkpoints" / "best.ckpt", single)
    key = lambda r: (r.idx, r.label, r.predict, r.radius, r.count, r.n)  # noqa: E731
    assert [key(r) for r in read_rows(ddp / "certify.tsv")] == [key(r) for r in read_rows(single / "certify.tsv")]
    merged = json.loads((ddp / "metrics.json").read_text())
    assert merged["acr"] == pytest.approx(json.loads((single / "metrics.json").read_text())["acr"])
