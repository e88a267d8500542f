"""Benchmark: training cost per image of every method, as a ratio to Gaussian augmentation (the ratio of epoch times).

    python -m rsbench.bench.training_cost [--methods gaussian ...] [--arch lenet] [--dataset mnist_embedded]

Each method is built from its own ``conf/method/<name>.yaml`` (with the recipe of ``--dataset`` and ``--sigma``),
on the same architecture and the same synthetic images, each at the batch size its recipe trains with (MACER on
Fashion-MNIST and CIFAR-10: 64, as the authors' scripts; ``--batch-size N`` puts every method at N); the methods are
interleaved and repeated in one process. Printed per method: the median time per loader batch, the ratio of seconds
per training image to Gaussian's (equal batch sizes: the ratio of batch times), and how many forward and backward
passes (in images, per image of the batch) the method needs. For methods that step the optimizer once per chunk
(``steps_per_batch = m``), a loader batch includes all m steps, so the ratio is the ratio of epoch times.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import statistics
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf, open_dict

from rsbench.runs.allocator import reexec_with_fast_allocator
from rsbench.runs.cli import config_dir
from rsbench.runs.floor import CommandParser

if TYPE_CHECKING:  # torch and Lightning load after the command line is checked (the command floor)
    import torch
    from torch.utils.data import DataLoader

    from rsbench.methods.base import SmoothingModule

CONF_DIR = config_dir()

TIMED_PHASE = {"ddrs": ["method.sigma_search_from_epoch=0"]}
"""Overrides that put a method in the phase worth timing: DS^2's per-example sigma search is off for the recipe's
first epochs (then it costs nothing beyond its base method), so the benchmark times it with the search on."""


def method_config(method: str, dataset: str, arch: str, sigma: float) -> DictConfig:
    """The run config of ``method`` with ``dataset``'s recipe at ``sigma`` on ``arch`` (set as Hydra's current one)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    GlobalHydra.instance().clear()
    overrides = [f"method={method}", f"dataset={dataset}", f"arch={arch}", f"sigma={sigma}", "logger=none"]
    overrides += TIMED_PHASE.get(method, [])
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = "outputs/bench"
    HydraConfig.instance().set_config(cfg)
    return cfg


def build_method(cfg: DictConfig, sigma: float) -> SmoothingModule:
    """Instantiate the method of ``cfg`` (from :func:`method_config`) on a fresh network."""
    from hydra.utils import instantiate

    net = instantiate(cfg.arch)
    if OmegaConf.is_missing(cfg.method, "classifier_ckpt"):
        with open_dict(cfg):  # denoised smoothing: a fresh classifier costs what a trained one does
            cfg.method.classifier_ckpt = str(frozen_classifier(instantiate(cfg.arch), sigma))
    return instantiate(cfg.method, net=net, optimizer=instantiate(cfg.optimizer))


def frozen_classifier(net: torch.nn.Module, sigma: float) -> Path:
    """A checkpoint of ``net`` as it was initialised, for a method that trains in front of a frozen classifier."""
    from rsbench.checkpoint import make_checkpoint, write_checkpoint

    folder = Path(tempfile.mkdtemp(prefix="rsbench-bench-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return write_checkpoint(make_checkpoint(net, sigma, "standard"), folder / "classifier.ckpt")


def time_method(module: SmoothingModule, loader: DataLoader, batches: int) -> tuple[float, float, float]:
    """Median seconds per loader batch (the first batch excluded), forward and backward rows per image."""
    import pytorch_lightning as pl

    from rsbench.bench._training_callbacks import PassCounter

    counter = PassCounter()
    trainer = pl.Trainer(
        max_epochs=1,
        limit_train_batches=batches + 1,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        callbacks=[counter],
    )
    trainer.fit(module, train_dataloaders=loader)
    images = (batches + 1) * loader.batch_size  # type: ignore[operator]
    return statistics.median(counter.seconds[1:]), counter.forward_rows / images, counter.backward_rows / images


def main(argv: list[str] | None = None) -> None:
    """Time each method and print a table of ratios to Gaussian augmentation."""
    methods_available = sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml"))
    parser = CommandParser("python -m rsbench.bench.training_cost", description=__doc__)
    parser.add_argument("--methods", nargs="+", default=methods_available, choices=methods_available)
    parser.add_argument("--dataset", default="mnist_embedded")
    parser.add_argument("--arch", default="lenet")
    parser.add_argument("--sigma", type=float, default=0.5)
    parser.add_argument(
        "--batch-size", type=int, default=None, help="every method at this batch size (default: each its recipe's)"
    )
    parser.add_argument("--batches", type=int, default=5, help="timed loader batches per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from rsbench.methods.catrs import CATRS

    methods = ["gaussian", *(m for m in args.methods if m != "gaussian")]
    batch = {
        m: args.batch_size or int(method_config(m, args.dataset, args.arch, args.sigma).dataset.batch_size)
        for m in methods
    }
    torch.manual_seed(0)
    shape = {"lenet": (1, 28, 28)}.get(args.arch, (3, 32, 32))
    count = max(batch.values()) * (args.batches + 1)
    data = TensorDataset(torch.rand(count, *shape), torch.randint(0, 10, (count,)), torch.arange(count))
    seconds: dict[str, list[float]] = {m: [] for m in methods}
    passes: dict[str, tuple[float, float]] = {}
    for _ in range(args.repeats):
        for method in methods:
            module = build_method(method_config(method, args.dataset, args.arch, args.sigma), args.sigma)
            if isinstance(module, CATRS) and module.soft_label == "teacher":
                # the teacher's soft labels are computed once before training; a training step only looks rows up
                module.soft_labels = torch.full((count, module.net.num_classes), 1 / module.net.num_classes)
            median, forward, backward = time_method(module, DataLoader(data, batch_size=batch[method]), args.batches)
            seconds[method].append(median)
            passes[method] = (forward, backward)
    allocator = os.environ.get("GLIBC_TUNABLES", "default glibc malloc")
    batches = f"batch {args.batch_size}" if args.batch_size else "each method at its recipe's batch size"
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, allocator: {allocator}\n"
        f"{args.arch} on {args.dataset} recipe, sigma={args.sigma}, {batches}, "
        f"median of {args.batches} batches x {args.repeats} repeats; x gaussian: seconds per training image"
    )
    per_image = statistics.median(seconds["gaussian"]) / batch["gaussian"]
    print(f"{'method':<14} {'batch':>6} {'ms/batch':>10} {'x gaussian':>11} {'fwd rows/img':>13} {'bwd rows/img':>13}")
    for method in methods:
        value = statistics.median(seconds[method])
        forward, backward = passes[method]
        ratio = value / batch[method] / per_image
        print(
            f"{method:<14} {batch[method]:>6} {1000 * value:>10.1f} {ratio:>11.2f} {forward:>13.1f} {backward:>13.1f}"
        )


def quiet_lightning() -> None:
    """Keep Lightning's per-fit banners and warnings (one Trainer per method and repeat) out of the printed table."""
    for name in ("pytorch_lightning", "lightning_fabric", "lightning.pytorch"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")


if __name__ == "__main__":
    reexec_with_fast_allocator("rsbench.bench.training_cost")
    quiet_lightning()
    main()
