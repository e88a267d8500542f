"""``python -m rsbench.leaderboard [key=value ...]``: every published result and your runs, on the same images.

Examples::

    python -m rsbench.leaderboard dataset=cifar10
    python -m rsbench.leaderboard dataset=fashion_mnist runs=[experiments/fashion_mnist_table/runs/gaussian_sigma0.25]
    python -m rsbench.leaderboard dataset=imagenet clones=[../smoothing] out=leaderboard
    python -m rsbench.leaderboard pages=docs/leaderboard

Keys (Hydra overrides composed from ``conf/leaderboard/leaderboard.yaml``; lists as ``[a,b]``; a path holding ``=``
or ``,`` quoted: ``runs=['multirun/x/0_seed=0,sigma=1.0']``):

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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rsbench.runs.floor import allowed, error_line

CI_METHODS = ("beta", "wilson", "agresti_coull", "jeffreys", "normal")
CONFIG = "leaderboard"
"""The command's config, ``conf/leaderboard/leaderboard.yaml``: its keys and defaults (its own folder, so that
``dataset=`` is a value here, not a choice of the ``conf/dataset`` group)."""


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


def parse(argv: Sequence[str]) -> Arguments:
    """Compose ``conf/leaderboard.yaml`` with the overrides ``argv`` and check every value (torch-free).

    >>> parse(["dataset=cifar10", "radii=[0,0.5]"]).radii
    [0.0, 0.5]

    Raises:
        UsageError: a key is unknown (with the close names), or its value is not allowed.
    """
    config = _compose(argv)
    args = Arguments(
        datasets=_datasets(config["dataset"]),
        runs=_existing("runs", config["runs"]),
        clones=_existing("clones", config["clones"]),
        radii=_radii(config["radii"]),
        out=_folder("out", config["out"]),
        pages=_folder("pages", config["pages"]),
        sigma=_sigma(config["sigma"]),
        confidence=_confidence(config["confidence"]),
        ci_method=_one_of("ci_method", config["ci_method"], CI_METHODS),
        acr_interval=_one_of("acr_interval", config["acr_interval"], ("t", "bootstrap")),
        plot=bool(config["plot"]),
    )
    if any(c.is_file() for c in args.clones):
        raise UsageError(f"clones: {next(c for c in args.clones if c.is_file())} is not a folder (a git clone)")
    if args.pages is not None and (args.runs or args.out or args.datasets or args.clones):
        raise UsageError(
            "pages= writes the published pages of every dataset alone; use out= with runs, dataset, clones"
        )
    return args


def _compose(argv: Sequence[str]) -> dict[str, Any]:
    """The config composed as Hydra composes it, after :func:`rsbench.runs.request.check_request` (did-you-mean)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from rsbench.errors import ConfigError
    from rsbench.runs.cli import config_dir
    from rsbench.runs.request import check_request

    folder = config_dir() / CONFIG
    keys = list(OmegaConf.load(folder / f"{CONFIG}.yaml"))
    for argument in argv:
        key, equals, _ = argument.partition("=")
        if not equals:
            raise UsageError(f"{argument!r} is not key=value (keys: {', '.join(keys)})")
        if key not in keys:
            raise UsageError(f"unknown key {key!r} {allowed(key, keys)}")
    try:
        check_request(list(argv), CONFIG, folder)  # the values' kinds (plot=maybe, sigma=-1)
        with initialize_config_dir(version_base="1.3", config_dir=str(folder)):
            config = compose(CONFIG, overrides=list(argv))
    except ConfigError as error:
        raise UsageError(str(error)) from None
    except Exception as error:  # Hydra's own refusal of the syntax: its first line says where
        first = str(error).strip().splitlines()[0]
        raise UsageError(
            f"cannot read {' '.join(argv)!r}: {first} (quote a value holding = or , e.g. runs=['sweep/seed=0,s=1'])"
        ) from None
    return dict(OmegaConf.to_container(config, resolve=True))  # type: ignore[arg-type]


def _as_list(value: Any) -> list[Any]:
    """A list value, a single value as a one-item list, ``None`` as no items."""
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _datasets(value: Any) -> list[str] | None:
    datasets = [str(d) for d in _as_list(value)]
    if datasets in (["all"], []):
        return None
    from rsbench.runs.datasets import datasets as stock  # conf/dataset/*.yaml (torch-free)

    unknown = [d for d in datasets if d not in stock()]
    if unknown:
        raise UsageError(f"dataset={unknown[0]} is not a dataset {allowed(unknown[0], [*stock(), 'all'])}")
    return datasets


def _existing(key: str, value: Any) -> list[Path]:
    paths = [Path(str(p)) for p in _as_list(value)]
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise UsageError(f"{key}: {missing[0]} does not exist")
    return paths


def _radii(value: Any) -> list[float] | None:
    if value is None:
        return None
    radii = _as_list(value)
    if not radii or not all(isinstance(r, int | float) and not isinstance(r, bool) and r >= 0 for r in radii):
        shown = "[" + ",".join(str(r) for r in radii) + "]"
        raise UsageError(f"radii={shown} must be a list of radii >= 0, e.g. radii=[0,0.25,0.5]")
    return sorted({float(r) for r in radii})


def _folder(key: str, value: Any) -> Path | None:
    if value is None:
        return None
    path = Path(str(value))
    if path.exists() and not path.is_dir():
        raise UsageError(f"{key}={path} is a file; give a folder")
    return path


def _sigma(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise UsageError(f"sigma={value} must be a noise level > 0, e.g. sigma=0.25")
    return float(value)


def _confidence(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise UsageError(f"confidence={value} must be a number between 0 and 1, e.g. 0.95")
    return float(value)


def _one_of(key: str, value: Any, choices: Sequence[str]) -> str:
    if str(value) not in choices:
        raise UsageError(f"{key}={value} is not a choice {allowed(value, choices)}")
    return str(value)


def main(argv: list[str] | None = None) -> int:
    """Check the arguments, then build the boards and print or write them."""
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help", "help") for a in argv):
        print(__doc__)
        return 0
    try:
        args = parse(argv)
    except UsageError as error:
        return error_line(str(error))
    from rsbench.certify.pipeline.checked_runs import check_inputs
    from rsbench.errors import RsbenchError

    try:  # the runs' records checked before torch, pandas and SciPy load: a damaged one is refused at once
        check_inputs(args.runs)
    except RsbenchError as error:
        return error_line(str(error))
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
        return error_line(str(error))
    if not boards:
        return error_line("no entries for these datasets")
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
