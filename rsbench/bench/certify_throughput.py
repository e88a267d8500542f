"""Benchmark: CERTIFY throughput against the raw forward pass of the same model at the same batch size.

    python -m rsbench.bench.certify_throughput [--arch lenet cifar_resnet20] [--images 4] [--n 10000]

For each architecture (randomly initialised: throughput does not depend on the weights' values), in one process,
with the two variants interleaved and repeated (this machine varies by 10-30% between runs):

- ``forward``: the model alone on pre-drawn noisy batches of ``batch_size`` (the ceiling: no noise, no counting);
- ``certify``: :meth:`rsbench.Smooth.certify_with_details` on ``images`` test-like images (n0 + n samples each).

It prints noisy samples per second (median over repeats) and the ratio certify / forward: how much of the model's
own throughput certification keeps after drawing noise, counting votes and computing the bound.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from rsbench.allocator import reexec_with_fast_allocator
from rsbench.archs import CifarResNet, Classifier, LeNet
from rsbench.certify.smooth import Smooth

MODELS: dict[str, Callable[[], tuple[nn.Module, tuple[int, int, int]]]] = {
    "lenet": lambda: (Classifier("lenet", LeNet(10), {"kind": "identity"}), (1, 28, 28)),
    "cifar_resnet20": lambda: (
        Classifier("cifar_resnet20", CifarResNet(20, 10), {"kind": "normalize", "mean": [0.5] * 3, "std": [0.25] * 3}),
        (3, 32, 32),
    ),
    "cifar_resnet110": lambda: (
        Classifier(
            "cifar_resnet110", CifarResNet(110, 10), {"kind": "normalize", "mean": [0.5] * 3, "std": [0.25] * 3}
        ),
        (3, 32, 32),
    ),
}


def forward_rate(model: nn.Module, batch: torch.Tensor, samples: int) -> float:
    """Samples per second of ``model`` on ``batch`` (already noisy), for about ``samples`` samples."""
    calls = max(1, samples // batch.shape[0])
    with torch.inference_mode():
        start = time.perf_counter()
        for _ in range(calls):
            model(batch).argmax(dim=1)
        elapsed = time.perf_counter() - start
    return calls * batch.shape[0] / elapsed


def certify_rate(smooth: Smooth, images: torch.Tensor, n0: int, n: int, batch_size: int) -> float:
    """Noisy samples per second of CERTIFY over ``images`` (selection and estimation samples both counted)."""
    start = time.perf_counter()
    for i, image in enumerate(images):
        smooth.certify_with_details(image, n0, n, 0.001, batch_size, seed=i)
    elapsed = time.perf_counter() - start
    return len(images) * (n0 + n) / elapsed


def bench(arch: str, images: int, n0: int, n: int, batch_size: int, repeats: int, sigma: float) -> dict[str, float]:
    """Median throughputs of the forward pass and of CERTIFY for one architecture."""
    torch.manual_seed(0)
    model, shape = MODELS[arch]()
    model.eval()
    xs = torch.rand(images, *shape)
    noisy_batch = xs[0] + sigma * torch.randn(batch_size, *shape)
    smooth = Smooth(model, 10, sigma)
    forward_rate(model, noisy_batch, 2 * batch_size)  # warm-up: allocator, kernels
    smooth.certify_with_details(xs[0], n0, batch_size, 0.001, batch_size)
    rates: dict[str, list[float]] = {"forward": [], "certify": []}
    for _ in range(repeats):
        rates["forward"].append(forward_rate(model, noisy_batch, images * (n0 + n)))
        rates["certify"].append(certify_rate(smooth, xs, n0, n, batch_size))
    return {name: statistics.median(values) for name, values in rates.items()}


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the benchmark for each architecture, print a table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", nargs="+", default=["lenet", "cifar_resnet20"], choices=sorted(MODELS))
    parser.add_argument("--images", type=int, default=4, help="images certified per repeat")
    parser.add_argument("--n0", type=int, default=100)
    parser.add_argument("--n", type=int, default=10_000, help="estimation samples per image")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sigma", type=float, default=0.25)
    args = parser.parse_args(argv)
    allocator = os.environ.get("GLIBC_TUNABLES", "default glibc malloc")
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, allocator: {allocator}\n"
        f"batch {args.batch_size}, n0={args.n0}, n={args.n}, {args.images} images x {args.repeats} repeats (medians)"
    )
    print(f"{'arch':<16} {'forward samples/s':>18} {'certify samples/s':>18} {'certify/forward':>16}")
    for arch in args.arch:
        result = bench(arch, args.images, args.n0, args.n, args.batch_size, args.repeats, args.sigma)
        ratio = result["certify"] / result["forward"]
        print(f"{arch:<16} {result['forward']:>18,.0f} {result['certify']:>18,.0f} {ratio:>16.3f}")


if __name__ == "__main__":
    reexec_with_fast_allocator("rsbench.bench.certify_throughput")
    main()
