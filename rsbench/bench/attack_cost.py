"""Benchmark: the attack's cost as a multiple of certification's, on the same images, in one process.

    python -m rsbench.bench.attack_cost --ckpt outputs/.../checkpoints/best.ckpt [--images 10] [--n 10000]
                                        [--steps 20] [--noise 32] [--predict-n 1000] [--repeats 3]

For a trained rsbench checkpoint (or, with ``--arch``, randomly initialised weights, on which every image breaks at
radius 0 and the attack is at its cheapest), the first ``--images`` test images of the embedded MNIST subset are
certified with CERTIFY (n0, n, alpha; :meth:`rsbench.Smooth.certify_batch`, packed as the pipeline packs them) and
then attacked at the radii of the certified-accuracy grid (0, 0.25, ... up to the radius cap) exactly as
``attack=smoothadv`` does (:func:`rsbench.attack.attack_certified`: SmoothAdv PGD with T steps and m noise samples,
then PREDICT with ``--predict-n`` samples, stopping at each image's first success). The two alternate ``--repeats``
times; it prints the seconds of each, per image, and the ratio attack / certification (median over repeats). The
ratio depends on the model: a robust image is attacked at every radius, a broken one only until it breaks.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rsbench.runs.floor import CommandParser

if TYPE_CHECKING:
    import torch
    from torch import nn

    from rsbench.certify.algorithm.smooth import Certificate
    from rsbench.certify.pipeline.records import CertificationRow


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    p = CommandParser("python -m rsbench.bench.attack_cost", description=__doc__.splitlines()[0])
    which = p.add_mutually_exclusive_group()
    which.add_argument("--ckpt", help="an rsbench checkpoint of an embedded-MNIST LeNet (its sigma is used)")
    which.add_argument("--arch", choices=["lenet"], default=None, help="random weights instead of a checkpoint")
    p.add_argument("--sigma", type=float, default=0.5, help="with --arch: the noise level")
    p.add_argument("--images", type=int, default=10)
    p.add_argument("--n0", type=int, default=100)
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--alpha", type=float, default=0.001)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--steps", type=int, default=20, help="T, PGD steps (Salman et al.'s evaluation: 20)")
    p.add_argument("--noise", type=int, default=32, help="m, noise samples of the attack (Salman et al.: 32)")
    p.add_argument("--predict-n", type=int, default=1000, help="PREDICT's samples (Salman et al.: 1,000)")
    p.add_argument("--repeats", type=int, default=3)
    return p.parse_args(argv)


def model(args: argparse.Namespace) -> tuple[nn.Module, float, str]:
    """The base classifier, its sigma, and what it is."""
    import torch

    from rsbench.models.builders import checkpoint

    if args.ckpt:
        subject = checkpoint(args.ckpt, 10, 1)
        return subject.classifier, subject.sigma, f"{args.ckpt} ({subject.description['method']})"
    from rsbench.archs.registry import build_classifier

    torch.manual_seed(0)
    net = build_classifier("lenet", 10, {"kind": "identity", "mean": None, "std": None}, 1)
    return net, args.sigma, "random LeNet"


def certification_rows(
    images: Sequence[tuple[torch.Tensor, int]], certificates: Sequence[Certificate], sigma: float
) -> list[CertificationRow]:
    """The pipeline's rows of ``certificates``, one per image, as the attack reads them."""
    from rsbench.certify.pipeline.records import CertificationRow

    return [
        CertificationRow(
            i, label, c.prediction, c.radius, c.prediction == label, c.seconds, c.count, c.n, c.p_a_lower, sigma
        )
        for i, ((_, label), c) in enumerate(zip(images, certificates, strict=True))
    ]


def run(args: argparse.Namespace) -> dict[str, float]:
    """Median seconds of certification and of the attack over the repeats, and their ratio."""
    import torch

    from rsbench.attack import AttackSettings, attack_certified
    from rsbench.certify.algorithm.caps import fixed_n_cap
    from rsbench.certify.algorithm.smooth import Smooth
    from rsbench.certify.pipeline.metrics import radius_grid
    from rsbench.data.sources import embedded_mnist

    net, sigma, name = model(args)
    test = embedded_mnist(Path("data"), train=False)
    images = [(test[i][0], int(test[i][1])) for i in range(args.images)]
    xs = torch.stack([image for image, _ in images])
    smooth = Smooth(net.eval(), 10, sigma)
    grid = radius_grid(fixed_n_cap(sigma, args.n, args.alpha))
    settings = AttackSettings(num_steps=args.steps, num_noise=args.noise, n=args.predict_n, batch_size=args.batch_size)
    print(
        f"{name}: {args.images} images, CERTIFY n0={args.n0}, n={args.n}, alpha={args.alpha}; SmoothAdv "
        f"T={args.steps}, m={args.noise}, PREDICT n={args.predict_n} at radii {grid}; "
        f"{torch.get_num_threads()} thread(s)"
    )
    certify_times, attack_times = [], []
    for repeat in range(args.repeats):
        start = time.perf_counter()
        certificates = smooth.certify_batch(
            xs, args.n0, args.n, args.alpha, args.batch_size, seeds=list(range(len(xs)))
        )
        certify_times.append(time.perf_counter() - start)
        rows = certification_rows(images, certificates, sigma)
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            outcome = attack_certified(
                smooth, images, rows, settings, grid, Path(out), seed=repeat, certify_alpha=args.alpha
            )
            attack_times.append(time.perf_counter() - start)
        print(
            f"  repeat {repeat + 1}: certification {certify_times[-1]:.1f} s, attack {attack_times[-1]:.1f} s "
            f"({len(outcome.rows)} attacked radii), ratio {attack_times[-1] / certify_times[-1]:.2f}"
        )
    certify, attack = statistics.median(certify_times), statistics.median(attack_times)
    print(
        f"median over {args.repeats}: certification {certify / args.images:.2f} s/image, attack "
        f"{attack / args.images:.2f} s/image: the attack costs {attack / certify:.2f}x certification"
    )
    return {"certify_seconds": certify, "attack_seconds": attack, "ratio": attack / certify}


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print its table."""
    run(parse_args(argv))


if __name__ == "__main__":
    main()
