"""``python -m rsbench.leaderboard [key=value ...]``: every published result and your runs, on the same images.

Examples::

    python -m rsbench.leaderboard dataset=cifar10
    python -m rsbench.leaderboard dataset=fashion_mnist runs=[experiments/fashion_mnist_table/runs/gaussian_sigma0.25]
    python -m rsbench.leaderboard dataset=imagenet clones=[../smoothing] out=leaderboard
    python -m rsbench.leaderboard pages=docs/leaderboard

Keys (Hydra-style ``key=value``; lists as ``[a,b]``):

    dataset       cifar10, imagenet, mnist, fashion_mnist (or a dataset of your runs); default: all of them
    runs          run or sweep folders, metrics.json files or certify TSVs to join the boards
    sigma         the noise level of certify TSVs whose path names none (noise_0.25, sigma_0.5); a TSV whose path
                  names no dataset takes the one dataset= names
    clones        clones of repositories whose logs rsbench does not ship (locuslab/smoothing, eth-sri/acr-weakness):
                  their logs are read by path, SHA-256 checked, and paired
    radii         certified accuracy at these radii (default: the dataset's standard ones)
    out           write <dataset>.md, .csv, .tex, .png (and <dataset>_runs.csv) here; without it, print the Markdown
    pages         write the published pages (<dataset>.md and .png) of every dataset here (docs/leaderboard)
    confidence    interval coverage (default 0.95)
    ci_method     interval of certified accuracy: beta (Clopper-Pearson, default), wilson, agresti_coull,
                  jeffreys, normal
    acr_interval  interval of ACR over the images: t (default) or bootstrap (BCa)
    plot          true (default) or false: write the PNG

Arguments are checked before anything heavy is imported: a bad one gets one ``rsbench: error:`` line.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DATASETS = ("cifar10", "imagenet", "mnist", "fashion_mnist", "mnist_embedded", "cifar100", "svhn")
CI_METHODS = ("beta", "wilson", "agresti_coull", "jeffreys", "normal")
KEYS = (
    "dataset",
    "runs",
    "sigma",
    "clones",
    "radii",
    "out",
    "pages",
    "confidence",
    "ci_method",
    "acr_interval",
    "plot",
)


class UsageError(Exception):
    """A bad argument: the message names it and what is allowed."""


@dataclass
class Arguments:
    """The command line, checked."""

    datasets: list[str] | None = None
    runs: list[Path] = field(default_factory=list)
    sigma: float | None = None
    clones: list[Path] = field(default_factory=list)
    radii: list[float] | None = None
    out: Path | None = None
    pages: Path | None = None
    confidence: float = 0.95
    ci_method: str = "beta"
    acr_interval: str = "t"
    plot: bool = True


def parse(argv: list[str]) -> Arguments:
    """Read ``key=value`` arguments and check every one (paths exist, numbers in range, names known).

    >>> parse(["dataset=cifar10", "radii=[0,0.5]"]).radii
    [0.0, 0.5]

    Raises:
        UsageError: a key is unknown, given twice, or its value is not allowed.
    """
    values: dict[str, str] = {}
    for argument in argv:
        key, equals, value = argument.partition("=")
        key = key.removeprefix("--").replace("-", "_")
        if not equals:
            raise UsageError(f"{argument!r} is not key=value; keys: {', '.join(KEYS)}")
        if key not in KEYS:
            raise UsageError(f"unknown key {key!r}; keys: {', '.join(KEYS)}")
        if key in values:
            raise UsageError(f"{key} given twice")
        values[key] = value
    args = Arguments()
    if "dataset" in values:
        datasets = [str(d) for d in _list(values["dataset"])]
        if datasets != ["all"]:
            unknown = [d for d in datasets if d not in DATASETS]
            if unknown:
                raise UsageError(f"dataset={unknown[0]} is not one of {', '.join(DATASETS)} (or all)")
            args.datasets = datasets
    for key in ("runs", "clones"):
        paths = [Path(str(p)) for p in _list(values.get(key, "[]"))]
        missing = [p for p in paths if not p.exists()]
        if missing:
            raise UsageError(f"{key}: {missing[0]} does not exist")
        if key == "clones" and any(not p.is_dir() for p in paths):
            raise UsageError(f"clones: {next(p for p in paths if not p.is_dir())} is not a folder (a git clone)")
        setattr(args, key, paths)
    if "radii" in values:
        radii = _list(values["radii"])
        if not radii or not all(isinstance(r, int | float) and not isinstance(r, bool) and r >= 0 for r in radii):
            raise UsageError(f"radii={values['radii']} must be a list of radii >= 0, e.g. radii=[0,0.25,0.5]")
        args.radii = sorted({float(r) for r in radii})
    for key in ("out", "pages"):
        if key in values:
            path = Path(values[key])
            if path.exists() and not path.is_dir():
                raise UsageError(f"{key}={path} is a file; give a folder")
            setattr(args, key, path)
    if args.pages is not None and (args.runs or args.out or args.datasets or args.clones):
        raise UsageError(
            "pages= writes the published pages of every dataset alone; use out= with runs, dataset, clones"
        )
    if "sigma" in values:
        sigma = _scalar(values["sigma"])
        if not isinstance(sigma, float) or not sigma > 0:
            raise UsageError(f"sigma={values['sigma']} must be a noise level > 0, e.g. sigma=0.25")
        args.sigma = sigma
    if "confidence" in values:
        confidence = _scalar(values["confidence"])
        if not isinstance(confidence, float) or not 0 < confidence < 1:
            raise UsageError(f"confidence={values['confidence']} must be a number between 0 and 1, e.g. 0.95")
        args.confidence = confidence
    if "ci_method" in values:
        if values["ci_method"] not in CI_METHODS:
            raise UsageError(f"ci_method={values['ci_method']} is not one of {', '.join(CI_METHODS)}")
        args.ci_method = values["ci_method"]
    if "acr_interval" in values:
        if values["acr_interval"] not in ("t", "bootstrap"):
            raise UsageError(f"acr_interval={values['acr_interval']} is not t or bootstrap")
        args.acr_interval = values["acr_interval"]
    if "plot" in values:
        plot = _scalar(values["plot"])
        if not isinstance(plot, bool):
            raise UsageError(f"plot={values['plot']} is not true or false")
        args.plot = plot
    return args


def _scalar(text: str) -> Any:
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _list(text: str) -> list[Any]:
    """``[a,b]``, ``a,b`` or ``a`` as a list (items parsed as YAML scalars: numbers become numbers)."""
    inner = text.strip()
    if inner.startswith("[") and inner.endswith("]"):
        inner = inner[1:-1]
    items = [item.strip() for item in inner.split(",") if item.strip()]
    parsed = []
    for item in items:
        try:
            parsed.append(yaml.safe_load(item))
        except yaml.YAMLError:
            parsed.append(item)
    return [item if item is not None else "null" for item in parsed]


def main(argv: list[str] | None = None) -> int:
    """Check the arguments, then build the boards and print or write them."""
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help", "help") for a in argv):
        print(__doc__)
        return 0
    try:
        args = parse(argv)
    except UsageError as error:
        print(f"rsbench: error: {error}", file=sys.stderr)
        return 2
    from rsbench.certify.checked_runs import check_inputs
    from rsbench.errors import RsbenchError

    try:  # the runs' records checked before torch, pandas and SciPy load: a damaged one is refused at once
        check_inputs(args.runs)
    except RsbenchError as error:
        print(f"rsbench: error: {error}", file=sys.stderr)
        return 2
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    from rsbench.leaderboard.make import make_boards, write_pages
    from rsbench.leaderboard.render import markdown, write

    try:
        if args.pages is not None:
            for path in write_pages(args.pages, plot=args.plot):
                print(path)
            return 0
        boards = make_boards(
            args.datasets,
            runs=args.runs,
            clones=args.clones,
            radii=args.radii,
            confidence=args.confidence,
            ci_method=args.ci_method,
            acr_interval=args.acr_interval,  # type: ignore[arg-type]
            sigma=args.sigma,
        )
    except RsbenchError as error:
        print(f"rsbench: error: {error}", file=sys.stderr)
        return 2
    if not boards:
        print("rsbench: error: no entries for these datasets", file=sys.stderr)
        return 2
    command = " ".join(["python -m rsbench.leaderboard", *argv])
    for board in boards:
        if args.out is not None:
            for path in write(board, args.out, command, plot=args.plot):
                print(path)
        else:
            print(markdown(board, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
