"""Where a certification run's time goes: cProfile of the users' path (``Certification.run``) on CIFAR ResNet-20.

    OMP_NUM_THREADS=2 python experiments/certify_throughput/profile_pipeline.py [--images 10] [--n 2000]

The benchmark's model and settings (``rsbench.bench.certify_throughput``: randomly initialised CIFAR ResNet-20, n0 =
100, batch 1,000), one warm-up run on one image, then the profiled run into a fresh folder. Prints the share of the
run's time spent in the network's forward pass, in drawing the noise, and in everything else, then the top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile

import torch

from rsbench.bench.certify_throughput import MODELS
from rsbench.certify.pipeline.certification import Certification, Subject
from rsbench.certify.pipeline.settings import CertifySettings


def main() -> None:
    """Profile one certification run and print where its time went."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=10)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--arch", default="cifar_resnet20", choices=sorted(MODELS))
    args = parser.parse_args()
    torch.manual_seed(0)
    model, shape = MODELS[args.arch]()
    model.eval()
    images = [(x, 0) for x in torch.rand(args.images, *shape)]
    settings = CertifySettings.from_keys(n0=100, n=args.n, alpha=0.001, batch_size=1000)
    subject = Subject(model, 10, 0.25, {"method": "bench", "dataset": "random", "arch": args.arch})
    with tempfile.TemporaryDirectory() as folder:
        Certification(settings, folder).run(subject, images[:1])  # warm-up
    profile = cProfile.Profile()
    with tempfile.TemporaryDirectory() as folder:
        profile.enable()
        Certification(settings, folder).run(subject, images)
        profile.disable()
    stats = pstats.Stats(profile)
    total = stats.total_tt  # type: ignore[attr-defined]
    entries = stats.stats  # type: ignore[attr-defined]
    # cumulative time of the network's outermost forward call, and the noise draws' own time
    network = max(cumulative for (_, _, name), (_, _, _, cumulative, _) in entries.items() if name == "_call_impl")
    noise = sum(own for (_, _, name), (_, _, own, _, _) in entries.items() if "normal_" in name)
    print(f"{args.arch}, {args.images} images, n0=100, n={args.n}, batch 1000, {torch.get_num_threads()} threads:")
    rest = (total - network - noise) / total
    print(f"  run {total:.2f} s: network forward {network / total:.1%}, noise {noise / total:.1%}, else {rest:.1%}")
    text = io.StringIO()
    pstats.Stats(profile, stream=text).strip_dirs().sort_stats("tottime").print_stats(12)
    print(text.getvalue())


if __name__ == "__main__":
    main()
