"""What one row of a paper's table costs to certify: measured throughput times the samples each design draws.

    python -m rsbench.bench.table_cost [--arch cifar_resnet110 lenet] [--device cuda] [--variants ...]

For each architecture, :func:`rsbench.bench.certify_throughput.bench` measures noisy samples per second of the raw
forward pass, Cohen et al.'s loop and rsbench (fp32, and the speed options asked for) in one process, and the replay
benchmark (:mod:`rsbench.bench.replay`) gives the mean samples per image of fixed-n CERTIFY (n0 + n = 100,100) and
of sequential CERTIFY's default design on the released logs of the architecture's dataset (ResNet-110: CIFAR-10;
LeNet: MNIST and Fashion-MNIST). A table row is one sigma of one method on the whole test set (10,000 images), so

    hours per row = 10,000 * samples per image / samples per second / 3600,

printed per variant for fixed n and for the sequential default, with the median over the dataset's logs and their
range. On a GPU these are GPU-hours; on a CPU they are CPU-hours of this machine, and saying what a GPU would take
needs a GPU's throughput (the README gives the estimate and its source).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence

import numpy as np

from rsbench.bench import certify_throughput, replay
from rsbench.runs.allocator import reexec_with_fast_allocator
from rsbench.runs.floor import CommandParser

DATASETS = {"cifar_resnet110": ("cifar10",), "cifar_resnet20": ("cifar10",), "lenet": ("mnist", "fashion_mnist")}
IMAGES = 10_000


def replay_means(datasets: Sequence[str], design: str, images: int | None, seed: int) -> dict[str, list[float]]:
    """Mean samples per image of fixed n and of ``design`` on each shipped log of ``datasets``."""
    means: dict[str, list[float]] = {"fixed n": [], design: []}
    specs = [spec for spec in replay.shipped_logs() if spec.name.split()[0] in datasets]
    for key, spec in enumerate(specs):
        outcomes, _ = replay.replay(replay.subsample(spec, images, seed), [replay.Candidate(design, design)], key=key)
        means["fixed n"].append(outcomes[0].mean_samples)
        means[design].append(outcomes[1].mean_samples)
    return means


def hours(rate: float, samples: float) -> float:
    """Hours to certify a table row (10,000 images) at ``rate`` samples per second, ``samples`` per image."""
    return IMAGES * samples / rate / 3600


def main(argv: list[str] | None = None) -> int:
    """Measure throughput, replay the logs, print hours per table row."""
    parser = CommandParser("python -m rsbench.bench.table_cost", description=__doc__)
    parser.add_argument("--arch", nargs="+", default=["cifar_resnet110", "lenet"], choices=sorted(DATASETS))
    parser.add_argument("--device", default=None, help="default: cuda if any")
    parser.add_argument("--variants", nargs="*", default=["bf16+channels_last", "compile"])
    parser.add_argument("--images", type=int, default=4, help="images per throughput repeat")
    parser.add_argument("--n", type=int, default=10_000, help="estimation samples per image in the throughput run")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--replay-images", type=int, default=None, help="replay a subset of each log (default: all)")
    parser.add_argument("--design", default="informed", help="the sequential design whose samples are counted")
    args = parser.parse_args(argv)
    args.device = certify_throughput.default_device(args.device)
    import torch

    measured = argparse.Namespace(
        n0=100, n=args.n, batch_size=args.batch_size, sigma=0.25, images=args.images, repeats=args.repeats,
        variants=args.variants, no_art=True, device=args.device, ensemble=0,
    )  # fmt: skip
    device = torch.cuda.get_device_name(args.device) if torch.device(args.device).type == "cuda" else "CPU"
    print(f"torch {torch.__version__}, {device} ({torch.get_num_threads()} threads); hours per table row = "
          f"{IMAGES:,} images x samples per image / samples per second")  # fmt: skip
    for arch in args.arch:
        rates = {name: statistics.median(values) for name, values in certify_throughput.bench(arch, measured).items()}
        means = replay_means(DATASETS[arch], args.design, args.replay_images, seed=0)
        fixed, sequential = statistics.median(means["fixed n"]), means[args.design]
        print(
            f"\n{arch} ({', '.join(DATASETS[arch])} logs: {len(sequential)}; {args.design} draws "
            f"{statistics.median(sequential):,.0f} samples per image, median; {min(sequential):,.0f} to "
            f"{max(sequential):,.0f})"
        )
        print(f"{'variant':<28} {'samples/s':>10} {'fixed n (h)':>12} {args.design + ' (h)':>22}")
        for name, rate in rates.items():
            spread = [hours(rate, s) for s in sequential]
            print(
                f"{name:<28} {rate:>10,.0f} {hours(rate, fixed):>12.2f} {statistics.median(spread):>8.2f} "
                f"[{min(spread):.2f}, {max(spread):.2f}]"
            )
        print(f"fixed n over {args.design}: {fixed / float(np.median(sequential)):.1f}x fewer samples (median log)")
    return 0


if __name__ == "__main__":
    reexec_with_fast_allocator("rsbench.bench.table_cost")
    main()
