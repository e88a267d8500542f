"""Benchmark: CERTIFY throughput and memory against the raw forward pass, Cohen's loop and IBM ART.

    python -m rsbench.bench.certify_throughput [--arch lenet cifar_resnet20] [--images 4] [--n 10000]
                                               [--variants ...] [--device cuda] [--memory] [--allocators]

For each architecture (randomly initialised: throughput does not depend on the weights' values; ``resnet50`` takes
3x224x224 inputs and is meant for GPUs; ``vit_tiny_mnist`` and ``vit_tiny_224`` are timm ViTs behind an input layer
that resizes after the noise), on ``--device`` (CUDA when present), in one process,
the variants are interleaved and repeated (this machine varies by 10-30% between processes), and each certifies the
same images with n0 + n noisy samples per image:

- ``forward``: the model alone on pre-drawn noisy batches of ``batch_size`` (the ceiling: no noise, no counting);
- ``cohen``: Cohen et al.'s per-image loop (``x.repeat``, ``randn_like`` per batch, a Python counting loop),
  rewritten here as the reference code's baseline;
- ``art``: IBM ART's ``PyTorchRandomizedSmoothing.certify`` (``sample_size`` = n0; needs the ``bench`` extra);
- ``pipeline``: what ``python -m rsbench`` and ``python -m rsbench.certify`` run, whole:
  :class:`rsbench.certify.pipeline.certification.Certification` on the images as a test set, into a fresh folder (seeds
  per image, records written and flushed row by row, progress, the summary, ``metrics.json`` and the plot); its one-off
  cost per run (everything but the images: measured by running it again on its finished folder) is printed, and
  ``pipeline (images only)`` is its rate without it, what a run of many images approaches;
- ``rsbench``: the pipeline's composition alone, :func:`rsbench.certify.algorithm.groups.certify_images` in fp32 over
  groups of :func:`~rsbench.certify.algorithm.groups.images_together` images (batch_size // min(n0, n): the n0
  selection samples fill whole batches too), and one image at a time; with ``--variants``, also ``bf16`` autocast,
  ``channels_last`` and ``compile`` (torch.compile; its compile time is reported separately);
- ``smooth``: Cohen et al.'s API, :meth:`rsbench.Smooth.certify` one image at a time.

It prints noisy samples per second (median over repeats) and each variant's ratio to the forward pass and to ART.
``--ensemble K`` (default 3; 0 skips it) then times an ensemble of K randomly initialised copies of the architecture
(:class:`rsbench.models.ensemble.Ensemble`, mean logits) against K single certifications of the same images, one
per member: the ensemble draws each noisy sample once and shows it to every member.
``--memory`` certifies one 3x224x224 input at growing n, each in a fresh process, with rsbench (and at small n with
ART, whose host noise array grows with n) and prints each process's peak resident memory. ``--allocators`` instead
measures the forward pass and rsbench under glibc's default malloc and under rsbench's ``GLIBC_TUNABLES`` (each
setting in its own child processes, alternated), and prints the speed-up.
"""

from __future__ import annotations

import argparse
import copy
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rsbench.runs.allocator import GLIBC_TUNABLES, OPT_OUT, reexec_with_fast_allocator
from rsbench.runs.floor import CommandParser

if TYPE_CHECKING:  # torch and the models load after the command line is checked (the command floor)
    import torch
    from torch import nn

    from rsbench.archs import Classifier
    from rsbench.certify.algorithm.smooth import Smooth

NORMALIZE = {"kind": "normalize", "mean": [0.5] * 3, "std": [0.25] * 3}


def default_device(device: str | None) -> str:
    """``device`` as asked for, else ``cuda`` when torch sees a GPU, else ``cpu`` (imports torch)."""
    import torch

    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def timm_vit(shape: tuple[int, int, int], size: int, options: dict[str, int]) -> Classifier:
    """timm's ``vit_tiny_patch16_224`` with ``options``, behind an input layer resizing ``shape`` to ``size``."""
    from rsbench.archs.registry import build_classifier

    network = {"kind": "timm", "name": "vit_tiny_patch16_224", "options": {"img_size": size, **options}}
    return build_classifier("vit_tiny", 10, {"resize": size}, shape[0], network=network, image_shape=list(shape))


def lenet() -> tuple[nn.Module, tuple[int, int, int]]:
    """A random LeNet for 1x28x28 images."""
    from rsbench.archs import Classifier, LeNet

    return Classifier("lenet", LeNet(10), {"kind": "identity"}), (1, 28, 28)


def cifar_resnet(depth: int) -> tuple[nn.Module, tuple[int, int, int]]:
    """A random CIFAR ResNet of ``depth`` layers for 3x32x32 images."""
    from rsbench.archs import CifarResNet, Classifier

    return Classifier(f"cifar_resnet{depth}", CifarResNet(depth, 10), NORMALIZE), (3, 32, 32)


def resnet50() -> tuple[nn.Module, tuple[int, int, int]]:
    """A random ImageNet ResNet-50 for 3x224x224 images."""
    from rsbench.archs import Classifier
    from rsbench.archs.resnet import imagenet_resnet50

    return Classifier("resnet50", imagenet_resnet50(1000), NORMALIZE), (3, 224, 224)


MODELS: dict[str, Callable[[], tuple[nn.Module, tuple[int, int, int]]]] = {
    "lenet": lenet,
    "cifar_resnet20": lambda: cifar_resnet(20),
    "cifar_resnet110": lambda: cifar_resnet(110),
    "resnet50": resnet50,
    # timm ViTs (pip install 'rsbench[pretrained]'): the embedded-MNIST study's (28 -> 32, patch 8, width 64, depth 3)
    # and the frontier's ViT-Tiny/16 on CIFAR-sized images resized to 224 inside the model
    "vit_tiny_mnist": lambda: (
        timm_vit((1, 28, 28), 32, {"patch_size": 8, "embed_dim": 64, "depth": 3, "num_heads": 2}),
        (1, 28, 28),
    ),
    "vit_tiny_224": lambda: (timm_vit((3, 32, 32), 224, {}), (3, 32, 32)),
}
OPTIONS = ("bf16", "channels_last", "bf16+channels_last", "compile")


def cohen_counts(model: nn.Module, x: torch.Tensor, num: int, batch_size: int, sigma: float) -> np.ndarray:
    """Cohen et al.'s ``Smooth._sample_noise``: repeat the image, add fresh noise, count votes in a Python loop."""
    import torch

    counts = np.zeros(10, dtype=int)
    with torch.no_grad():
        remaining = num
        while remaining > 0:
            this_batch = min(batch_size, remaining)
            remaining -= this_batch
            batch = x.repeat((this_batch, 1, 1, 1))
            noise = torch.randn_like(batch) * sigma
            predictions = model(batch + noise).argmax(1)
            for index in predictions.cpu().numpy():
                counts[index] += 1
    return counts


@dataclass(frozen=True)
class OneOff:
    """What a variant spent once per run, outside its images: the pipeline's protocol, summary, plot.

    Measured by running it again on its finished folder; the bench takes that rerun out of the variant's time.
    """

    seconds: float


def make_variants(
    model: nn.Module, shape: tuple[int, ...], args: argparse.Namespace
) -> dict[str, Callable[[torch.Tensor], object]]:
    """Each variant as a function certifying a batch of images (``[K, C, H, W]``)."""
    import torch

    from rsbench.certify.algorithm.groups import images_together
    from rsbench.certify.algorithm.seeding import derive_seed
    from rsbench.certify.algorithm.smooth import Smooth

    n0, n, batch, sigma = args.n0, args.n, args.batch_size, args.sigma
    device = next(model.parameters()).device
    noisy_batch = torch.rand(*shape, device=device) + sigma * torch.randn(batch, *shape, device=device)

    def forward(xs: torch.Tensor) -> None:
        with torch.inference_mode():
            for _ in range(len(xs) * (n0 + n) // batch):
                model(noisy_batch).argmax(dim=1)

    def cohen(xs: torch.Tensor) -> None:
        model.eval()
        for x in xs:
            cohen_counts(model, x, n0, batch, sigma)
            cohen_counts(model, x, n, batch, sigma)

    def smooth_api(xs: torch.Tensor) -> None:
        smooth = Smooth(model, 10, sigma)
        for i, x in enumerate(xs):
            smooth.certify(x, n0, n, ALPHA, batch, seed=derive_seed(0, i))

    variants: dict[str, Callable[[torch.Tensor], object]] = {"forward": forward, "cohen": cohen}
    if not args.no_art:
        try:
            variants["art"] = make_art(model, shape, args)
        except ImportError:
            print("  ART is not installed (pip install -e '.[bench]'): skipping it")
            args.no_art = True
    packing = images_together(batch, n0, n)  # what the pipeline does by default
    variants["pipeline"] = _pipeline_variant(model, args)
    variants["rsbench"] = _rsbench_variant(Smooth(model, 10, sigma), packing, args)
    variants["rsbench (1 image at a time)"] = _rsbench_variant(Smooth(model, 10, sigma), 1, args)
    variants["smooth"] = smooth_api
    for option in args.variants:
        variants.update(_option_variant(option, model, shape, packing, args))
    return variants


ALPHA = 0.001  # the failure probability every variant certifies at


def _rsbench_variant(smooth: Smooth, per_batch: int, args: argparse.Namespace) -> Callable[[torch.Tensor], None]:
    """rsbench's certification of ``per_batch`` images together (:func:`certify_images`), seeded per image."""
    from rsbench.certify.algorithm.groups import certify_images
    from rsbench.certify.algorithm.seeding import derive_seed

    def certify(xs: torch.Tensor) -> None:
        for first in range(0, len(xs), per_batch):
            chunk = xs[first : first + per_batch]
            seeds = [derive_seed(0, i) for i in range(first, first + len(chunk))]
            for _ in certify_images(
                smooth, chunk, seeds, n0=args.n0, n=args.n, alpha=ALPHA, batch_size=args.batch_size
            ):
                pass

    return certify


def _pipeline_variant(model: nn.Module, args: argparse.Namespace) -> Callable[[torch.Tensor], OneOff]:
    """The run's certification pipeline into a temporary folder; returns its one-off cost (a rerun on the folder)."""
    from rsbench.certify.pipeline.certification import Certification, Subject
    from rsbench.certify.pipeline.settings import CertifySettings

    settings = CertifySettings.from_keys(n0=args.n0, n=args.n, alpha=ALPHA, batch_size=args.batch_size)
    subject = Subject(model, 10, args.sigma, {"method": "bench", "dataset": "random", "arch": "bench"})

    def pipeline(xs: torch.Tensor) -> OneOff:
        images = [(x, 0) for x in xs.cpu()]
        with tempfile.TemporaryDirectory() as folder:
            Certification(settings, folder).run(subject, images)
            # the same run again finds every image certified: what is left is the run's one-off cost
            start = time.perf_counter()
            Certification(settings, folder).run(subject, images)
            return OneOff(time.perf_counter() - start)

    return pipeline


def _option_variant(
    option: str, model: nn.Module, shape: tuple[int, ...], packing: int, args: argparse.Namespace
) -> dict[str, Callable[[torch.Tensor], object]]:
    """The variant of ``--variants`` option ``option``: ``compile`` (after its warm-up), or a precision / layout."""
    import torch

    from rsbench.certify.algorithm.smooth import Smooth

    sigma, batch = args.sigma, args.batch_size
    if option == "compile":
        compiled = torch.compile(model)
        start = time.perf_counter()
        Smooth(compiled, 10, sigma).sample_counts(torch.rand(*shape), batch, batch)
        print(f"  torch.compile warm-up: {time.perf_counter() - start:.1f} s")
        return {"rsbench+compile": _rsbench_variant(Smooth(compiled, 10, sigma), packing, args)}
    precision = "bf16" if "bf16" in option else "fp32"
    last = "channels_last" in option
    converted = copy.deepcopy(model).to(memory_format=torch.channels_last) if last else model
    smooth = Smooth(converted, 10, sigma, precision=precision, channels_last=last)  # type: ignore[arg-type]
    return {f"rsbench+{option}": _rsbench_variant(smooth, packing, args)}


def make_art(model: nn.Module, shape: tuple[int, ...], args: argparse.Namespace) -> Callable[[torch.Tensor], object]:
    """ART's randomized-smoothing estimator around the same model (selection with sample_size = n0 draws)."""
    from art.estimators.certification.randomized_smoothing import PyTorchRandomizedSmoothing
    from torch import nn

    estimator = PyTorchRandomizedSmoothing(
        model=model,
        loss=nn.CrossEntropyLoss(),
        input_shape=shape,
        nb_classes=10,
        device_type="gpu" if next(model.parameters()).is_cuda else "cpu",
        sample_size=args.n0,
        scale=args.sigma,
        alpha=0.001,
    )
    return lambda xs: estimator.certify(xs.cpu().numpy(), n=args.n, batch_size=args.batch_size)


def synchronize(device: str) -> None:
    """Wait for the device's queued work, so that a GPU timing covers the kernels it launched."""
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def bench(arch: str, args: argparse.Namespace) -> dict[str, list[float]]:
    """Noisy samples per second of each variant for one architecture, one value per repeat (interleaved)."""
    import torch

    torch.manual_seed(0)
    model, shape = MODELS[arch]()
    model.eval().to(args.device)
    xs = torch.rand(args.images, *shape, device=args.device)
    variants = make_variants(model, shape, args)
    for run in variants.values():  # warm-up: allocator, kernels, ART's graph
        run(xs[:1])
    rates: dict[str, list[float]] = {name: [] for name in variants}
    one_off: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        for name, run in variants.items():
            synchronize(args.device)
            start = time.perf_counter()
            result = run(xs)
            synchronize(args.device)
            seconds = time.perf_counter() - start
            if isinstance(result, OneOff):  # the rerun that measured it is not part of the variant
                seconds -= result.seconds
                images_only = len(xs) * (args.n0 + args.n) / (seconds - result.seconds)
                rates.setdefault(f"{name} (images only)", []).append(images_only)
                one_off.setdefault(name, []).append(result.seconds)
            rates[name].append(len(xs) * (args.n0 + args.n) / seconds)
    for name, values in one_off.items():
        print(
            f"{arch}: {name}'s one-off cost per run (protocol, summary, metrics.json, plot): "
            f"{statistics.median(values):.2f} s (median; {min(values):.2f} to {max(values):.2f})"
        )
    return rates


def ensemble_cost(arch: str, args: argparse.Namespace) -> tuple[float, float]:
    """Median seconds to certify the images with an ensemble of ``args.ensemble`` members, and with each member alone.

    Both certify the same images with rsbench's packing; the two are alternated ``args.repeats`` times.
    """
    import torch

    from rsbench.certify.algorithm.groups import images_together
    from rsbench.certify.algorithm.smooth import Smooth
    from rsbench.models.ensemble import Ensemble

    members = []
    for seed in range(args.ensemble):
        torch.manual_seed(seed)
        member, shape = MODELS[arch]()
        members.append(member.eval().to(args.device))
    xs = torch.rand(args.images, *shape, device=args.device)
    packing = images_together(args.batch_size, args.n0, args.n)

    def certify(smooth: Smooth) -> None:
        _rsbench_variant(smooth, packing, args)(xs)

    ensemble = Smooth(Ensemble(members, "logits"), 10, args.sigma)
    singles = [Smooth(member, 10, args.sigma) for member in members]
    timings: dict[str, list[float]] = {"ensemble": [], "singles": []}
    certify(ensemble)  # warm-up
    for _ in range(args.repeats):
        for name, runs in (("ensemble", [ensemble]), ("singles", singles)):
            synchronize(args.device)
            start = time.perf_counter()
            for smooth in runs:
                certify(smooth)
            synchronize(args.device)
            timings[name].append(time.perf_counter() - start)
    return statistics.median(timings["ensemble"]), statistics.median(timings["singles"])


def memory_probe(implementation: str, n: int, batch_size: int, sigma: float) -> None:
    """Certify one 3x224x224 input with ``implementation`` (rsbench or art) at ``n``; print this process's peak RSS."""
    import torch
    from torch import nn

    from rsbench.certify.algorithm.smooth import Smooth

    layers = [nn.Conv2d(3, 8, 7, stride=8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10)]
    model = nn.Sequential(*layers).eval()
    x = torch.rand(3, 224, 224)
    start = time.perf_counter()
    if implementation == "rsbench":
        Smooth(model, 10, sigma).certify_with_details(x, 100, n, 0.001, batch_size, seed=0)
    else:
        args = argparse.Namespace(n0=100, n=n, sigma=sigma, batch_size=batch_size)
        make_art(model, (3, 224, 224), args)(x.unsqueeze(0))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux
    print(f"{implementation} n={n:,}: peak resident memory {peak / 2**30:.2f} GiB, {time.perf_counter() - start:.1f} s")


def memory_scaling(args: argparse.Namespace) -> None:
    """Peak memory of certifying one 3x224x224 input, each in a fresh process: rsbench at growing n, ART at small n."""
    print(f"\npeak memory of a process certifying one 3x224x224 input (tiny conv net, batch {args.batch_size}):")
    runs = [("rsbench", n) for n in (1_000, 10_000, 100_000)]
    runs += [] if args.no_art else [("art", n) for n in (1_000, 4_000)]
    for implementation, n in runs:
        command = [sys.executable, "-m", "rsbench.bench.certify_throughput", "--memory-probe", implementation]
        command += ["--n", str(n), "--batch-size", str(args.batch_size), "--sigma", str(args.sigma)]
        result = subprocess.run(command, capture_output=True, text=True, check=True)
        print("  " + result.stdout.strip().splitlines()[-1])


def rate_probe(arch: str, args: argparse.Namespace) -> None:
    """Print ``forward <samples/s> rsbench <samples/s>`` for one pass over the images (a child of ``--allocators``)."""
    import torch

    torch.manual_seed(0)
    model, shape = MODELS[arch]()
    model.eval()
    xs = torch.rand(args.images, *shape)
    args.no_art, args.variants = True, []
    variants = make_variants(model, shape, args)
    rates = []
    for name in ("forward", "rsbench"):
        variants[name](xs[:1])  # warm-up
        start = time.perf_counter()
        variants[name](xs)
        rates.append(f"{name} {len(xs) * (args.n0 + args.n) / (time.perf_counter() - start):.1f}")
    print(" ".join(rates))


def allocator_comparison(arch: str, args: argparse.Namespace) -> None:
    """Forward and rsbench throughput under glibc's default malloc and under ``GLIBC_TUNABLES``, in child processes.

    glibc reads its tunables only at process start, so each setting needs its own process; the two settings
    alternate ``args.repeats`` times so that drifts of the machine's load hit both alike.
    """
    settings = {"default glibc malloc": None, "GLIBC_TUNABLES": GLIBC_TUNABLES}
    rates: dict[str, dict[str, list[float]]] = {name: {"forward": [], "rsbench": []} for name in settings}
    command = [sys.executable, "-m", "rsbench.bench.certify_throughput", "--rate-probe", arch]
    command += ["--images", str(args.images), "--n0", str(args.n0), "--n", str(args.n)]
    command += ["--batch-size", str(args.batch_size), "--sigma", str(args.sigma)]
    for _ in range(args.repeats):
        for name, tunables in settings.items():
            env = {key: value for key, value in os.environ.items() if key != "GLIBC_TUNABLES"}
            env[OPT_OUT] = "1"
            if tunables is not None:
                env["GLIBC_TUNABLES"] = tunables
            words = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout.split()
            for variant, value in zip(words[::2], words[1::2], strict=True):
                rates[name][variant].append(float(value))
    print(f"\n{arch}, allocator (child processes alternated {args.repeats} times, medians):")
    print(f"{'allocator':<22} {'forward/s':>10} {'rsbench/s':>10}")
    medians = {name: {v: statistics.median(r) for v, r in values.items()} for name, values in rates.items()}
    for name, values in medians.items():
        print(f"{name:<22} {values['forward']:>10,.0f} {values['rsbench']:>10,.0f}")
    fast, slow = medians["GLIBC_TUNABLES"], medians["default glibc malloc"]
    print(f"{'speed-up':<22} {fast['forward'] / slow['forward']:>9.2f}x {fast['rsbench'] / slow['rsbench']:>9.2f}x")


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the benchmark for each architecture, print a table."""
    parser = CommandParser("python -m rsbench.bench.certify_throughput", description=__doc__)
    parser.add_argument("--arch", nargs="+", default=["lenet", "cifar_resnet20"], choices=sorted(MODELS))
    parser.add_argument("--images", type=int, default=4, help="images certified per repeat")
    parser.add_argument("--n0", type=int, default=100)
    parser.add_argument("--n", type=int, default=10_000, help="estimation samples per image")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sigma", type=float, default=0.25)
    parser.add_argument("--device", default=None, help="default: cuda if any")
    parser.add_argument("--variants", nargs="*", default=[], choices=OPTIONS, help="rsbench options to add")
    parser.add_argument("--no-art", action="store_true", help="skip ART (not installed: pip install -e '.[bench]')")
    parser.add_argument("--ensemble", type=int, default=3, help="members of the ensemble timed against them (0: skip)")
    parser.add_argument("--memory", action="store_true", help="also show memory against n on a 3x224x224 input")
    parser.add_argument(
        "--allocators", action="store_true", help="compare glibc's default malloc with GLIBC_TUNABLES instead"
    )
    parser.add_argument("--memory-probe", choices=["rsbench", "art"], help=argparse.SUPPRESS)
    parser.add_argument("--rate-probe", choices=sorted(MODELS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.device = default_device(args.device)
    if args.memory_probe:
        memory_probe(args.memory_probe, args.n, args.batch_size, args.sigma)
        return
    if args.rate_probe:
        rate_probe(args.rate_probe, args)
        return
    if args.allocators:
        for arch in args.arch:
            allocator_comparison(arch, args)
        return
    import torch

    allocator = os.environ.get("GLIBC_TUNABLES", "default glibc malloc")
    print(
        f"torch {torch.__version__} on {args.device}, {torch.get_num_threads()} threads, allocator: {allocator}\n"
        f"batch {args.batch_size}, n0={args.n0}, n={args.n}, {args.images} images x {args.repeats} repeats (medians)"
    )
    for arch in args.arch:
        rates = bench(arch, args)
        results = {name: statistics.median(values) for name, values in rates.items()}
        cohen = results["cohen"]
        art = results.get("art", float("nan"))
        print(f"\n{arch}:\n{'variant':<28} {'samples/s':>10} {'x forward [range]':>22} {'x cohen':>8} {'x ART':>7}")
        for name, rate in results.items():
            # the ratio to the forward pass of the same repeat (interleaved: a drift of the machine hits both)
            ratios = [r / f for r, f in zip(rates[name], rates["forward"], strict=True)]
            spread = f"{statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}]"
            print(f"{name:<28} {rate:>10,.0f} {spread:>22} {rate / cohen:>8.3f} {rate / art:>7.2f}")
        if args.ensemble > 1:
            together, alone = ensemble_cost(arch, args)
            print(
                f"ensemble of {args.ensemble} (mean logits): {together:.2f} s; {args.ensemble} single certifications: "
                f"{alone:.2f} s; ensemble / singles = {together / alone:.3f} (same {args.images} images, medians)"
            )
    if args.memory:
        memory_scaling(args)


if __name__ == "__main__":
    reexec_with_fast_allocator("rsbench.bench.certify_throughput")
    main()
