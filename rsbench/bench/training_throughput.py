"""Benchmark: each method's training steps per second in rsbench against a plain PyTorch loop doing the same steps.

    python -m rsbench.bench.training_throughput [--methods gaussian smoothmix ...] [--layouts contiguous bf16 ...]

Per method (built from its ``conf/method/<name>.yaml`` with ``--dataset``'s recipe at ``--sigma``, at its recipe's
batch size, on synthetic images of the dataset's shape) and per layout, in one process, interleaved and repeated:

- **rsbench**: ``Trainer.fit`` with what a run adds around the step (epoch seeding, the training timer, the layout
  callback, the CSV logger, the method's own logging and metrics);
- **plain loop**: the same module's loss (:meth:`~rsbench.methods.base.SmoothingModule.training_loss`: the same
  model, noise and loss), its own optimizer, ``zero_grad / backward / step`` in a bare ``for`` loop over the same
  loader, with no Trainer, logger or metric;
- for Gaussian also a **hand-written** loop, ``cross_entropy(net(x + sigma * randn), y)``, that shares no rsbench code
  beyond the network.

Layouts: ``contiguous`` (eager NCHW fp32), ``channels_last`` (``train_layout=channels_last``) and ``bf16``
(``trainer.precision=bf16-mixed``: autocast, the noise still fp32); bf16 is left out, with a line saying so, on a CPU
without native bf16 unless asked for. Printed per method and layout: steps per second of each (median over repeats
[min, max]), rsbench's ratio to the plain loop (the median of the per-repeat ratios [min, max]; the goal is >= 0.95),
and the layout's speed-up over contiguous. Each timing covers batches 2 to ``--batches + 1`` of one epoch, loader
included (the first batch, with its one-off costs, is left out).
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rsbench.bench.training_cost import build_method, method_config, quiet_lightning
from rsbench.runs.allocator import reexec_with_fast_allocator
from rsbench.runs.floor import CommandParser

if TYPE_CHECKING:  # torch and Lightning load after the command line is checked (the command floor)
    from torch.utils.data import DataLoader

    from rsbench.methods.base import Batch, SmoothingModule

LAYOUTS = ("contiguous", "channels_last", "bf16")
METHODS = ("gaussian", "stability", "smoothadv", "macer", "consistency", "smoothmix", "catrs")
"""The methods of the CAT-RS authors' Fashion-MNIST table (the cells this benchmark's default recipe trains)."""


@dataclass
class Timings:
    """Seconds per step of one method and layout, one entry per repeat."""

    rsbench: list[float] = field(default_factory=list)
    plain: list[float] = field(default_factory=list)
    hand_written: list[float] = field(default_factory=list)


def precision_context(layout: str) -> contextlib.AbstractContextManager[object]:
    """bf16 autocast on the CPU for ``bf16``, nothing otherwise."""
    import torch

    if layout == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def rsbench_seconds(module: SmoothingModule, loader: DataLoader, batches: int, layout: str, logs: Path) -> float:
    """Seconds per step of ``Trainer.fit`` over ``batches`` batches (after the first), as a run trains."""
    import pytorch_lightning as pl

    from rsbench.bench._training_callbacks import StepClock
    from rsbench.runs.epoch_seed import EpochSeed
    from rsbench.runs.loggers import CSVLogger
    from rsbench.runs.training_clock import TrainingClock
    from rsbench.runs.training_layout import TrainingLayout

    clock = StepClock()
    trainer = pl.Trainer(
        max_epochs=1,
        limit_train_batches=batches + 1,
        limit_val_batches=0,
        logger=CSVLogger(save_dir=str(logs), name="", version=""),
        log_every_n_steps=10,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        precision="bf16-mixed" if layout == "bf16" else "32-true",
        callbacks=[
            EpochSeed(0),
            TrainingClock(),
            TrainingLayout("channels_last" if layout == "channels_last" else "contiguous"),
            clock,
        ],
    )
    trainer.fit(module, train_dataloaders=loader)
    return (clock.end - clock.start) / batches


def plain_steps(module: SmoothingModule, layout: str) -> Callable[[Batch], None]:
    """A plain step of ``module``'s own loss: ``zero_grad``, ``backward``, ``step`` (in chunks, as rsbench steps)."""
    from rsbench.methods.base import Batch

    optimizer = module.optimizer_factory(module.trainable_parameters())
    chunks = module.steps_per_batch

    def step(batch: Batch) -> None:
        size = len(batch.x) // chunks
        for chunk in range(chunks):
            part = slice(chunk * size, (chunk + 1) * size)
            with precision_context(layout):
                loss = module.training_loss(Batch(batch.x[part], batch.y[part], batch.indices[part])).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    return step


def loop_seconds(step: Callable[[Batch], None], loader: DataLoader, batches: int) -> float:
    """Seconds per step of ``step`` in a bare loop over batches 2 to ``batches + 1`` of ``loader``."""
    from rsbench.methods.base import Batch

    start = 0.0
    for index, (x, y, indices) in enumerate(loader):
        if index == 1:
            start = time.perf_counter()
        step(Batch(x, y, indices))
        if index == batches:
            break
    return (time.perf_counter() - start) / batches


def hand_written_step(module: SmoothingModule, layout: str) -> Callable[[Batch], None]:
    """Gaussian augmentation written out: ``cross_entropy(net(x + sigma * randn), y)`` with SGD as configured."""
    import torch
    import torch.nn.functional as F

    optimizer = module.optimizer_factory(module.net.parameters())
    net, sigma = module.net, module.sigma

    def step(batch: Batch) -> None:
        with precision_context(layout):
            loss = F.cross_entropy(net(batch.x + sigma * torch.randn(batch.x.shape)), batch.y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def fresh_module(method: str, dataset: str, sigma: float, count: int, layout: str) -> SmoothingModule:
    """The method's module on a freshly initialised network (seed 0), in ``layout``."""
    import torch

    from rsbench.methods.catrs import CATRS

    torch.manual_seed(0)
    module = build_method(method_config(method, dataset, "recipe", sigma), sigma)
    if isinstance(module, CATRS) and module.soft_label == "teacher":
        # the teacher's soft labels are computed once before training; a training step only looks rows up
        module.soft_labels = torch.full((count, module.net.num_classes), 1 / module.net.num_classes)
    if layout == "channels_last":
        module.to(memory_format=torch.channels_last)
    return module


def time_method(
    method: str, dataset: str, sigma: float, layout: str, batches: int, timings: Timings, logs: Path
) -> None:
    """One repeat of ``method`` in ``layout``: rsbench, the plain loop (and for Gaussian the hand-written one)."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    cfg = method_config(method, dataset, "recipe", sigma)
    batch = int(cfg.dataset.batch_size)
    shape = tuple(int(size) for size in cfg.dataset.image_shape)
    count = batch * (batches + 1)
    data = TensorDataset(torch.rand(count, *shape), torch.randint(0, 10, (count,)), torch.arange(count))
    loader = DataLoader(data, batch_size=batch)
    timings.rsbench.append(
        rsbench_seconds(fresh_module(method, dataset, sigma, count, "contiguous"), loader, batches, layout, logs)
    )
    module = fresh_module(method, dataset, sigma, count, layout)
    module.train()
    timings.plain.append(loop_seconds(plain_steps(module, layout), loader, batches))
    if method == "gaussian":
        module = fresh_module(method, dataset, sigma, count, layout)
        timings.hand_written.append(loop_seconds(hand_written_step(module, layout), loader, batches))


def spread(values: Sequence[float]) -> str:
    """``median [min, max]`` with two decimals."""
    return f"{statistics.median(values):.2f} [{min(values):.2f}, {max(values):.2f}]"


def rates(seconds: Sequence[float]) -> list[float]:
    """Steps per second of each repeat."""
    return [1 / value for value in seconds]


def report_lines(
    results: dict[tuple[str, str], Timings], methods: Sequence[str], layouts: Sequence[str]
) -> Iterator[str]:
    """The table: steps/s of rsbench and the plain loop, their ratio, and the layout's speed-up over contiguous."""
    columns = ("rsbench steps/s", "plain loop steps/s", "rsbench / plain", "x contiguous")
    yield f"{'method':<12} {'layout':<14} " + " ".join(f"{column:>22}" for column in columns)
    for method in methods:
        for layout in layouts:
            timing = results[(method, layout)]
            ratios = [plain / ours for ours, plain in zip(timing.rsbench, timing.plain, strict=True)]
            base = results[(method, "contiguous")].rsbench if "contiguous" in layouts else timing.rsbench
            speedup = [contiguous / ours for ours, contiguous in zip(timing.rsbench, base, strict=True)]
            yield (
                f"{method:<12} {layout:<14} {spread(rates(timing.rsbench)):>22} {spread(rates(timing.plain)):>22} "
                f"{spread(ratios):>22} {spread(speedup):>22}"
            )
            if timing.hand_written:
                yield f"{'':<12} {'':<14} {'hand-written Gaussian loop:':>22} {spread(rates(timing.hand_written)):>22}"


def main(argv: Sequence[str] | None = None) -> None:
    """Time every method in every layout and print the table."""
    parser = CommandParser("python -m rsbench.bench.training_throughput", description=__doc__)
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument(
        "--layouts", nargs="+", default=None, choices=LAYOUTS, help="default: all the CPU runs natively"
    )
    parser.add_argument("--dataset", default="fashion_mnist")
    parser.add_argument("--sigma", type=float, default=0.25)
    parser.add_argument("--batches", type=int, default=4, help="timed loader batches per repeat (after the first)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    import torch

    native_bf16 = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    layouts = args.layouts or [layout for layout in LAYOUTS if layout != "bf16" or native_bf16]
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU {torch.backends.cpu.get_cpu_capability()}"
        f" (native bf16: {'yes' if native_bf16 else 'no'}); {args.dataset} recipe, sigma={args.sigma}, each method at "
        f"its recipe's batch size, {args.batches} timed batches x {args.repeats} repeats, interleaved"
    )
    if "bf16" not in layouts and not args.layouts:
        print(
            "bf16 left out: this CPU has no native bf16 (AVX-512 BF16 or AMX), where autocast is emulated "
            "(--layouts bf16 times it anyway)"
        )
    results = {(method, layout): Timings() for method in args.methods for layout in layouts}
    with tempfile.TemporaryDirectory(prefix="rsbench-bench-") as logs:
        for _ in range(args.repeats):
            for method in args.methods:
                for layout in layouts:
                    time_method(
                        method, args.dataset, args.sigma, layout, args.batches, results[(method, layout)], Path(logs)
                    )
    for line in report_lines(results, args.methods, layouts):
        print(line)


if __name__ == "__main__":
    reexec_with_fast_allocator("rsbench.bench.training_throughput")
    quiet_lightning()
    main()
