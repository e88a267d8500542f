"""Two replicates of one study side by side, e.g. the same sweep run on CPU and on a GPU.

Rows are matched by method, dataset, sigma and the method's recorded hyperparameters (paths such as a teacher
checkpoint left out). For each row present in both: ACR mean ± sd over seeds in each replicate, the difference of
the means, and Welch's t-test p-value over the seeds. Runs of one seed on two machines draw different noise (CPU and
CUDA generators differ), so their training diverges and they are compared as independent seeds, not as pairs.

    python tools/compare_replicates.py multirun/study_cpu multirun/study_gpu --names cpu h200 --out cmp.csv
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from rsbench.report.load import find_results
from rsbench.report.rows import Row, group_rows
from rsbench.report.stats import seed_test
from rsbench.runs.naming import describes_setting


def row_key(row: Row) -> tuple[str, str, float, str]:
    """What makes two rows of different replicates the same setting: method, dataset, sigma, hyperparameters."""
    hparams = {k: v for k, v in row.first.hparams.items() if describes_setting(f"method.{k}", str(v))}
    return row.label, row.first.dataset, round(row.first.sigma, 6), json.dumps(hparams, sort_keys=True, default=str)


def compare(first: Sequence[Row], second: Sequence[Row], names: tuple[str, str]) -> pd.DataFrame:
    """One line per setting in both replicates: ACR mean and sd over seeds in each, difference, Welch p."""
    others = {row_key(row): row for row in second}
    lines = []
    for row in first:
        other = others.get(row_key(row))
        if other is None:
            continue
        a, b = row.seed_values(), other.seed_values()
        lines.append(
            {
                "row": row.name,
                f"{names[0]} seeds": len(a),
                f"{names[0]} ACR": np.mean(a),
                f"{names[0]} sd": row.seed_sd(),
                f"{names[1]} seeds": len(b),
                f"{names[1]} ACR": np.mean(b),
                f"{names[1]} sd": other.seed_sd(),
                "difference": np.mean(b) - np.mean(a),
                "p (seeds, Welch)": seed_test(a, b),
            }
        )
    return pd.DataFrame(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Print the comparison of two sweep folders (and write it as CSV with ``--out``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path, help="the first replicate's sweep folder")
    parser.add_argument("second", type=Path, help="the second replicate's sweep folder")
    parser.add_argument("--names", nargs=2, default=["first", "second"], help="the replicates' names in the table")
    parser.add_argument("--out", type=Path, help="also write the table as CSV here")
    args = parser.parse_args(argv)
    rows = [group_rows(find_results([path]))[0] for path in (args.first, args.second)]
    table = compare(rows[0], rows[1], (args.names[0], args.names[1]))
    if table.empty:
        raise SystemExit(f"no setting of {args.first} is also in {args.second}")
    print(table.to_markdown(index=False, floatfmt=".3f"))
    if args.out is not None:
        table.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
