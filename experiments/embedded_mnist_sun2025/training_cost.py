"""The training cost of method=sun2025 relative to Gaussian augmentation, measured on this machine.

    python experiments/embedded_mnist_sun2025/training_cost.py [--repeats 5] [--batch 256] [--sigma 0.5]

Times one loader batch of LeNet training on MNIST-sized images (the embedded subset's first training images) for
Gaussian augmentation and for Sun et al. before its stage epoch (m = 4 noisy copies, 4 optimizer steps) and after it
(each chunk's noise attacked with the sigma's attack_steps), interleaved ``--repeats`` times so that a busy machine
slows all three alike; prints the median seconds per batch and the ratios, and the epoch-weighted ratio of the
authors' CIFAR-10 schedules (stage epoch E of 150). The p_A estimates (100 noisy copies of every training image once,
16 of the kept ones every 10 epochs: forward passes only) come on top: about 0.5 Gaussian epochs' worth per 150 on
CIFAR-10 at the authors' settings (forward ~ 1/3 of forward + backward).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from pathlib import Path

import torch

from rsbench.archs.registry import build_classifier
from rsbench.data.sources import embedded_mnist
from rsbench.methods import GaussianAugmentation, Sun2025
from rsbench.methods.base import Batch, SmoothingModule

STEPS = {0.25: 3, 0.5: 6, 1.0: 4}  # the authors' CIFAR-10 attack_steps
STAGE = {0.25: 60, 0.5: 70, 1.0: 60}  # and stage epochs, of 150


def one_batch(module: SmoothingModule, x: torch.Tensor, y: torch.Tensor, steps: int) -> float:
    """Seconds for one loader batch: ``steps`` chunks, each a loss, backward and optimizer step."""
    optimizer = torch.optim.SGD(module.parameters(), lr=0.01)
    size = len(x) // steps
    start = time.perf_counter()
    for chunk in range(steps):
        part = slice(chunk * size, (chunk + 1) * size)
        out = module.training_loss(Batch(x[part], y[part], torch.arange(size)))
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
    return time.perf_counter() - start


def main() -> None:
    """Print the measured ratios (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--sigma", type=float, default=0.5)
    args = parser.parse_args()
    torch.manual_seed(0)
    data = embedded_mnist(Path("."), True, None, False)
    x = torch.stack([data[i][0] for i in range(args.batch)])
    y = torch.tensor([int(data[i][1]) for i in range(args.batch)])
    net = functools.partial(build_classifier, "lenet", 10, {"kind": "identity"}, 1)
    sgd = functools.partial(torch.optim.SGD, lr=0.01)
    gaussian = GaussianAugmentation(net=net(), sigma=args.sigma, optimizer=sgd).train()
    steps = STEPS[args.sigma]
    before = Sun2025(net=net(), sigma=args.sigma, optimizer=sgd, ds_epoch=10**6, attack_steps=steps).train()
    after = Sun2025(net=net(), sigma=args.sigma, optimizer=sgd, ds_epoch=0, attack_steps=steps).train()
    times: dict[str, list[float]] = {"gaussian": [], "sun2025 before E": [], "sun2025 after E": []}
    for _ in range(args.repeats):
        times["gaussian"].append(one_batch(gaussian, x, y, 1))
        times["sun2025 before E"].append(one_batch(before, x, y, 4))
        times["sun2025 after E"].append(one_batch(after, x, y, 4))
    base = statistics.median(times["gaussian"])
    print(f"LeNet, batch {args.batch}, sigma {args.sigma} (attack_steps {steps}), {torch.get_num_threads()} thread(s):")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:18s} {median:.3f} s per batch (median of {len(values)}), {median / base:.1f}x Gaussian")
    stage = STAGE[args.sigma]
    ratio_before = statistics.median(times["sun2025 before E"]) / base
    ratio_after = statistics.median(times["sun2025 after E"]) / base
    weighted = (stage * ratio_before + (150 - stage) * ratio_after) / 150
    schedule = f"the authors' CIFAR-10 schedule at sigma {args.sigma} (stage epoch {stage} of 150)"
    print(f"  {schedule}: {weighted:.1f}x Gaussian")


if __name__ == "__main__":
    main()
