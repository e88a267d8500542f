"""Benchmark: the cost of denoised smoothing, CERTIFY's samples/s with a denoiser against the classifier alone.

    python -m rsbench.bench.denoised_throughput [--arch lenet] [--images 2] [--n 2000] [--dncnn 17x64 5x16]
                                                [--diffusion-path DIR] [--device cuda]

For one architecture (randomly initialised: throughput does not depend on the weights' values), on ``--device``
(CUDA when present), in one process, the variants are interleaved and repeated, and each certifies the same images
with :meth:`rsbench.Smooth.certify_batch` (n0 + n noisy samples per image, packed as ``CertifyCallback`` does):

- ``classifier``: the classifier alone (the baseline);
- ``+ dncnn DxW``: behind a DnCNN of depth D and width W (Salman et al.'s is 17x64), as ``method=denoiser`` trains;
- ``+ diffusion (tiny)``: behind a small random ``diffusers`` UNet2DModel (2 levels of 32 and 64 channels, one
  ResNet block each) with one-shot denoising at t* (``model=diffusion``), when ``diffusers`` is installed;
- ``+ diffusion (DIR)``: behind the saved diffusion model at ``--diffusion-path`` (real sizes; meant for GPUs).

It prints noisy samples per second (median over repeats), each variant's ratio to the classifier alone, and what
certifying a 10,000-image test set with n0 = 100, n = 100,000 (Cohen et al.'s protocol) would take at that rate.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rsbench.bench.certify_throughput import MODELS, default_device, synchronize
from rsbench.runs.floor import CommandParser

if TYPE_CHECKING:
    from torch import nn

    from rsbench.archs.diffusion import DiffusionDenoiser

TEST_SET_SAMPLES = 10_000 * (100 + 100_000)  # a 10,000-image test set (CIFAR-10's) at Cohen's n0 = 100, n = 100,000


def tiny_diffusion(shape: tuple[int, int, int], sigma: float) -> DiffusionDenoiser:
    """A small random UNet2DModel and a 1000-step linear DDPM schedule, as one-shot denoiser at sigma."""
    from diffusers import DDPMScheduler, UNet2DModel

    from rsbench.archs.diffusion import DiffusionDenoiser

    channels, size, _ = shape
    unet: Any = UNet2DModel(  # (diffusers' lazy module hides its types from mypy)
        sample_size=size,
        in_channels=channels,
        out_channels=channels,
        layers_per_block=1,
        block_out_channels=(32, 64),
        down_block_types=("DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D"),
        norm_num_groups=8,
    )
    scheduler: Any = DDPMScheduler(num_train_timesteps=1000)
    return DiffusionDenoiser(unet.eval(), scheduler.alphas_cumprod, sigma)


def variants(args: argparse.Namespace) -> tuple[dict[str, nn.Module], tuple[int, int, int]]:
    """The base classifiers to certify: the classifier alone and behind each denoiser."""
    from rsbench.archs.denoiser import DenoisedClassifier, DnCNN
    from rsbench.archs.diffusion import load_diffusion

    classifier, shape = MODELS[args.arch]()
    models: dict[str, nn.Module] = {"classifier": classifier}
    for spec in args.dncnn:
        depth, width = (int(v) for v in spec.split("x"))
        models[f"+ dncnn {spec}"] = DenoisedClassifier(DnCNN(shape[0], depth, width), classifier)
    try:
        models["+ diffusion (tiny)"] = DenoisedClassifier(tiny_diffusion(shape, args.sigma), classifier, 10)
    except ImportError:
        print("  diffusers is not installed (pip install -e '.[diffusion]'): skipping the diffusion denoiser")
    if args.diffusion_path:
        denoiser = load_diffusion(args.diffusion_path, args.sigma)
        models[f"+ diffusion ({args.diffusion_path})"] = DenoisedClassifier(denoiser, classifier, 10)
    return models, shape


def bench(args: argparse.Namespace) -> dict[str, float]:
    """Median noisy samples per second of each variant."""
    import torch

    from rsbench.certify.algorithm.smooth import Smooth

    torch.manual_seed(0)
    models, shape = variants(args)
    xs = torch.rand(args.images, *shape, device=args.device)
    packing = max(1, args.batch_size // min(args.n0, args.n))
    seeds = list(range(args.images))

    def certifier(model: nn.Module) -> Callable[[], None]:
        smooth = Smooth(model.eval().to(args.device), 10, args.sigma)

        def certify() -> None:
            for first in range(0, len(xs), packing):
                part = slice(first, first + packing)
                smooth.certify_batch(xs[part], args.n0, args.n, 0.001, args.batch_size, seeds=seeds[part])

        return certify

    runs = {name: certifier(model) for name, model in models.items()}
    for run in runs.values():  # warm-up
        run()
    rates: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():
            synchronize(args.device)
            start = time.perf_counter()
            run()
            synchronize(args.device)
            rates[name].append(len(xs) * (args.n0 + args.n) / (time.perf_counter() - start))
    return {name: statistics.median(values) for name, values in rates.items()}


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, run the benchmark and print the table."""
    parser = CommandParser("python -m rsbench.bench.denoised_throughput", description=__doc__)
    parser.add_argument("--arch", default="lenet", choices=sorted(MODELS))
    parser.add_argument("--images", type=int, default=2)
    parser.add_argument("--n0", type=int, default=100)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=400)
    parser.add_argument("--sigma", type=float, default=0.25)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dncnn", nargs="*", default=["17x64", "5x16"], help="DnCNN depth x width, e.g. 17x64")
    parser.add_argument("--diffusion-path", default=None, help="a saved diffusers UNet2DModel + DDPMScheduler")
    parser.add_argument("--device", default=None, help="default: cuda if any")
    args = parser.parse_args(argv)
    args.device = default_device(args.device)
    import torch

    print(
        f"{args.arch} on {args.device} ({torch.get_num_threads()} threads), {args.images} images, "
        f"n0={args.n0}, n={args.n}, batch {args.batch_size}, median of {args.repeats}"
    )
    rates = bench(args)
    baseline = rates["classifier"]
    print(f"{'variant':<28} {'samples/s':>12} {'x classifier':>13} {'10k images at n=100k':>22}")
    for name, rate in rates.items():
        hours = TEST_SET_SAMPLES / rate / 3600
        print(f"{name:<28} {rate:>12,.0f} {rate / baseline:>13.3f} {hours:>20,.1f} h")


if __name__ == "__main__":
    main()
