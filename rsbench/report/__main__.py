"""``python -m rsbench.report <runs...>``: the paper table of certification results, with uncertainty.

Examples::

    python -m rsbench.report multirun/embedded_mnist_study --baseline gaussian --radii 0 0.5 1 1.5 2
    python -m rsbench.report outputs/cifar10 --out report --published-source catrs
    python -m rsbench.report multirun/fashion_mnist_table --against-released --radii 0 0.5 1 1.5 2
    python -m rsbench.report logs/noise_0.25.tsv --label "CAT-RS (released)" --dataset cifar10 --n 100000

Prints the Markdown report and writes report.md, report.tex (booktabs), one CSV per table and the figures
(curves.png, envelope.png, pa_lower.png) into --out (default: <folder>/report for one run or sweep folder).
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from pathlib import Path

from rsbench.runs.floor import CommandParser, refuse, run_guarded

log = logging.getLogger("rsbench.report")
COMMAND = "python -m rsbench.report"
# Nothing above imports pandas, scipy or matplotlib: --help and a bad argument answer at once; main() loads them.


def parser() -> CommandParser:
    """The command line of ``python -m rsbench.report`` (on the command floor: a bad argument is one error line)."""
    p = CommandParser(COMMAND, description=__doc__)
    p.add_argument("paths", nargs="+", type=Path, help="run or sweep folders, metrics.json files, or certify TSVs")
    p.add_argument("--radii", nargs="+", type=float, default=[0.0, 0.25, 0.5, 0.75, 1.0], help="certified accuracy at")
    p.add_argument("--baseline", help="pair every row with this method's row (e.g. gaussian), or with this run")
    p.add_argument(
        "--out",
        type=Path,
        help="folder for the files (default: <folder>/report when one run or sweep folder is given, else ./report)",
    )
    p.add_argument("--confidence", type=float, default=0.95, help="interval coverage (default 0.95)")
    p.add_argument(
        "--ci-method",
        default="beta",
        choices=["beta", "wilson", "agresti_coull", "jeffreys", "normal"],
        help="binomial interval of certified accuracy (statsmodels; beta = Clopper-Pearson, the default)",
    )
    p.add_argument("--acr-interval", default="t", choices=["t", "bootstrap"], help="interval of ACR over images")
    p.add_argument("--no-published", action="store_true", help="leave out the papers' published numbers")
    p.add_argument("--published-source", help="compare only with published sources whose id contains this")
    p.add_argument(
        "--against-released",
        action="store_true",
        help="pair every row image by image with the authors' released run of its method, dataset and sigma",
    )
    p.add_argument("--no-plots", action="store_true", help="write no figures")
    p.add_argument("--wandb", action="store_true", help="also log the tables and figures to W&B (offline by default)")
    p.add_argument("--wandb-project", default="rsbench", help="the W&B project of --wandb (default rsbench)")
    tsv = p.add_argument_group("certify TSV files (Cohen et al.'s format) given directly")
    tsv.add_argument("--label", help="the row name (default: the folder holding the file)")
    tsv.add_argument("--sigma", type=float, help="the noise level (default: from the path, e.g. noise_0.25)")
    tsv.add_argument("--dataset", help="the dataset (default: a dataset name in the path)")
    tsv.add_argument("--n", type=int, help="estimation samples per image, if known")
    tsv.add_argument("--alpha", type=float, help="failure probability, if known")
    return p


def default_out(paths: list[Path]) -> Path:
    """Where the report goes without ``--out``: beside the results it reports on, not wherever the shell is.

    ``<folder>/report`` for a single run or sweep folder; ``./report`` for several inputs or for files.
    """
    return paths[0] / "report" if len(paths) == 1 and paths[0].is_dir() else Path("report")


def main(argv: list[str] | None = None) -> None:
    """Read the runs, print the report and write its files; bad input ends with one error line and exit status 2."""
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not 0 < args.confidence < 1:
        refuse(f"--confidence must be in (0, 1), got {args.confidence}")
    from rsbench.certify.pipeline.checked_runs import check_inputs
    from rsbench.errors import RsbenchError

    try:  # every record checked before torch, pandas and SciPy load: a damaged one is refused at once
        check_inputs(args.paths, sigma=args.sigma, n=args.n, alpha=args.alpha)
    except RsbenchError as error:
        refuse(str(error))
    again = " ".join([COMMAND, *(shlex.quote(arg) for arg in (sys.argv[1:] if argv is None else argv))])
    status = run_guarded(lambda: _report(args), "writing the report", again)
    if status:
        raise SystemExit(status)


def _report(args: argparse.Namespace) -> int:
    """Build the report of ``args``, print it and write its files (a stop waits for the files in flight)."""
    from rsbench.report.build import build_sections
    from rsbench.report.load import find_results
    from rsbench.report.plots import write_figures
    from rsbench.report.render import markdown, write_report
    from rsbench.report.rows import group_rows
    from rsbench.report.tables import Options
    from rsbench.stop import raise_if_stop_requested

    options = Options(tuple(sorted(set(args.radii))), args.confidence, args.ci_method, args.acr_interval)
    results = find_results(
        args.paths, label=args.label, sigma=args.sigma, dataset=args.dataset, n=args.n, alpha=args.alpha
    )
    rows, keys, common = group_rows(results)
    sections, notes = build_sections(
        rows,
        keys,
        common,
        options,
        baseline=args.baseline,
        published=not args.no_published,
        published_source=args.published_source,
        against_released=args.against_released,
    )
    raise_if_stop_requested()  # (nothing written yet)
    print(markdown(sections, notes))
    out = args.out or default_out(args.paths)
    written = write_report(out, sections, notes)
    if not args.no_plots:
        written += write_figures(rows, options, out)
    if args.wandb:
        from rsbench.report.wandb_table import log_report

        log_report(sections, written, args.wandb_project, [str(p) for p in args.paths])
    log.info("wrote %s", ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    main()
