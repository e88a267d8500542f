"""Benchmark: this checkout's certification pipeline against another checkout's, in one process, alternated.

    git worktree add --detach /tmp/rs_old main
    python -m rsbench.bench.compare_versions --other /tmp/rs_old [--arch lenet cifar_resnet20] [--images 4]

The other checkout's ``rsbench`` package is copied into a temporary directory as ``rsbench_other`` (its imports
rewritten), so that both versions live in one process and share its allocator, threads and load. Each round
certifies the same images through each version's ``CertifyCallback.on_test_epoch_end`` (records, protocol, summary,
plot: the whole pipeline a training run calls) into a fresh directory, and runs the network alone on pre-drawn noisy
batches of the same total size (the forward pass, the ceiling). Rounds alternate the versions; the table shows the
median noisy samples per second of each and its ratio to the forward pass, and checks that both wrote the same rows.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import TYPE_CHECKING, Any

from rsbench.runs.allocator import reexec_with_fast_allocator
from rsbench.runs.floor import CommandParser
from rsbench.runs.resolvers import register_resolvers

if TYPE_CHECKING:  # torch loads after the command line is checked (the command floor)
    import torch

SHAPES = {"lenet": (1, 28, 28), "cifar_resnet20": (3, 32, 32), "cifar_resnet110": (3, 32, 32)}
NORMALIZE = {"kind": "normalize", "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}


@contextlib.contextmanager
def imported_copy(checkout: Path, name: str, workdir: Path) -> Iterator[ModuleType]:
    """Import ``checkout/rsbench`` as package ``name`` (a copy with its absolute imports renamed), then forget it.

    The copy registers its own OmegaConf resolvers on import; this package's are registered again afterwards, so
    that configs composed later in the process resolve (and raise) as this package does.
    """
    target = workdir / name
    shutil.copytree(checkout / "rsbench", target, ignore=shutil.ignore_patterns("__pycache__"))
    pattern = re.compile(r"\b(from|import) rsbench\b")
    for path in target.rglob("*.py"):
        path.write_text(pattern.sub(rf"\1 {name}", path.read_text()))
    sys.path.insert(0, str(workdir))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(workdir))
        for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
            del sys.modules[module]
        register_resolvers()


def certify_callback(package: str, settings: dict[str, Any]) -> Callable[[str], Any]:
    """``output_dir -> CertifyCallback`` of the version in ``package``, certifying with the flat ``settings``.

    Since the run layer became a package the callback is ``runs.certify_callback.CertifyCallback(settings,
    output_dir)``; before, ``callbacks.CertifyCallback(output_dir=..., **flat settings)``. The settings are
    ``certify.pipeline.settings`` since certify/ has two folders, ``certify.settings`` before.
    """
    try:
        callback = importlib.import_module(f"{package}.runs.certify_callback").CertifyCallback
    except ModuleNotFoundError:
        old = importlib.import_module(f"{package}.callbacks").CertifyCallback
        return lambda output_dir: old(output_dir=output_dir, **settings)
    try:  # certify/ in two folders; before, certify/settings.py
        module = importlib.import_module(f"{package}.certify.pipeline.settings")
    except ModuleNotFoundError:
        module = importlib.import_module(f"{package}.certify.settings")
    grouped = module.CertifySettings.from_keys(**settings)
    return lambda output_dir: callback(grouped, output_dir)


class Version:
    """One checkout's pipeline, driven as a test epoch of a trained LeNet or CIFAR ResNet would drive it."""

    def __init__(self, package: str, arch: str, state: dict[str, torch.Tensor], args: argparse.Namespace) -> None:
        import torch

        archs = importlib.import_module(f"{package}.archs")
        methods = importlib.import_module(f"{package}.methods")
        shape = SHAPES[arch]
        layer = {"kind": "identity"} if shape[0] == 1 else NORMALIZE
        net = archs.build_classifier(arch, 10, layer, shape[0])
        net.load_state_dict(state)
        self.module = methods.GaussianAugmentation(net, sigma=args.sigma, optimizer=torch.optim.SGD)
        self.module.log = lambda *a, **k: None  # the pipeline's logging to Lightning is not what is timed
        settings = {"n0": args.n0, "n": args.n, "batch_size": args.batch_size, "alpha": 0.001}
        self.callback = certify_callback(package, settings)

    def certify(self, images: list[tuple[torch.Tensor, int]], output_dir: Path) -> None:
        """One ``on_test_epoch_end`` over ``images`` into ``output_dir``."""
        datamodule = SimpleNamespace(test_dataset=images, name="bench", num_classes=10)
        trainer: Any = SimpleNamespace(
            datamodule=datamodule, default_root_dir=str(output_dir), global_rank=0, world_size=1, loggers=[]
        )
        self.callback(str(output_dir)).on_test_epoch_end(trainer, self.module)


def forward_rate(net: torch.nn.Module, shape: tuple[int, ...], samples: int, batch_size: int, sigma: float) -> float:
    """Noisy samples per second of the network alone on one pre-drawn noisy batch, repeated."""
    import torch

    batch = torch.rand(*shape) + sigma * torch.randn(batch_size, *shape)
    start = time.perf_counter()
    with torch.inference_mode():
        for _ in range(samples // batch_size):
            net(batch).argmax(dim=1)
    return (samples // batch_size) * batch_size / (time.perf_counter() - start)


def compare(arch: str, versions: dict[str, str], args: argparse.Namespace, workdir: Path) -> None:
    """Alternate the versions ``args.repeats`` times on ``arch`` and print medians and ratios."""
    import torch

    from rsbench.archs import build_classifier

    torch.manual_seed(0)
    shape = SHAPES[arch]
    reference = build_classifier(arch, 10, NORMALIZE if shape[0] == 3 else {"kind": "identity"}, shape[0])
    state = reference.state_dict()
    images = [(torch.rand(*shape), i % 10) for i in range(args.images)]
    runs = {label: Version(package, arch, state, args) for label, package in versions.items()}
    samples = args.images * (args.n0 + args.n)
    rates: dict[str, list[float]] = {"forward": [], **{label: [] for label in runs}}
    reference.eval()
    for label, run in runs.items():  # warm-up
        run.certify(images[:1], workdir / f"warmup-{arch}-{label}")
    for repeat in range(args.repeats):
        rates["forward"].append(forward_rate(reference, shape, samples, args.batch_size, args.sigma))
        for label, run in runs.items():
            start = time.perf_counter()
            run.certify(images, workdir / f"{arch}-{label}-{repeat}")
            rates[label].append(samples / (time.perf_counter() - start))
    rows = {label: (workdir / f"{arch}-{label}-0" / "certify.tsv").read_text().splitlines() for label in runs}
    strip = {label: [line.split("\t")[:5] + line.split("\t")[6:] for line in lines] for label, lines in rows.items()}
    same = len({str(v) for v in strip.values()}) == 1
    medians = {name: statistics.median(values) for name, values in rates.items()}
    print(f"\n{arch}: {args.images} images, n0={args.n0}, n={args.n}, batch {args.batch_size}, {args.repeats} rounds")
    print(f"{'version':<12} {'samples/s':>10} {'x forward':>10}")
    for name, rate in medians.items():
        print(f"{name:<12} {rate:>10,.0f} {rate / medians['forward']:>10.3f}")
    labels = list(runs)
    print(f"{labels[0]} / {labels[1]}: {medians[labels[0]] / medians[labels[1]]:.3f}; same rows: {same}")


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, load both versions, compare them on each architecture."""
    parser = CommandParser("python -m rsbench.bench.compare_versions", description=__doc__)
    parser.add_argument("--other", type=Path, required=True, help="the other checkout (e.g. a worktree of main)")
    parser.add_argument("--arch", nargs="+", default=["lenet", "cifar_resnet20"], choices=sorted(SHAPES))
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--n0", type=int, default=100)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sigma", type=float, default=0.25)
    args = parser.parse_args(argv)
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        with imported_copy(args.other, "rsbench_other", workdir / "packages"):
            print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; this checkout vs {args.other}")
            for arch in args.arch:
                compare(arch, {"this": "rsbench", "other": "rsbench_other"}, args, workdir)


if __name__ == "__main__":
    reexec_with_fast_allocator("rsbench.bench.compare_versions")
    main()
