"""Run folders as rsbench writes them, for the report's tests, and the report run over them.

Run folders are written with rsbench's own writers (``write_record``, ``summarize``, ``write_metrics``) and a
``.hydra/`` folder like Hydra's, so the report reads exactly the files a run writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from scipy.stats import norm

from rsbench.certify.algorithm.bounds import radius_cap
from rsbench.certify.pipeline.records import CertificationRow, write_record
from rsbench.certify.pipeline.subset import indices_digest
from rsbench.certify.pipeline.summary import summarize, write_metrics
from rsbench.report.__main__ import main

N, ALPHA = 10_000, 0.001  # the protocol every run folder records: n estimation draws at confidence 1 - alpha


def make_run(
    folder: Path,
    radii: Sequence[float],
    *,
    method: str = "gaussian",
    sigma: float = 0.5,
    seed: int = 0,
    overrides: Sequence[str] = (),
    hparams: dict[str, Any] | None = None,
    indices: Sequence[int] | None = None,
    n: int = N,
    stem: str = "certify",
    extra: dict[str, Any] | None = None,
    choices: dict[str, Any] | None = None,
) -> Path:
    """A run folder as rsbench writes it; a radius of 0 is a wrong prediction, a positive one a correct one."""
    indices = list(indices if indices is not None else range(len(radii)))
    rows = [
        CertificationRow(
            idx=i,
            label=1,
            predict=1 if r > 0 else 2,
            radius=float(r),
            correct=r > 0,
            time=0.1,
            count=n,
            n=n,
            pA_lower=float(norm.cdf(r / sigma)) if r > 0 else 0.6,
            sigma=sigma,
        )
        for i, r in zip(indices, radii, strict=True)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    write_record(folder / f"{stem}.tsv", rows)
    subset = {"start": 0, "skip": 1, "max_images": len(rows), "test_size": 500, "digest": indices_digest(indices)}
    meta = {"method": method, "dataset": "mnist_embedded", "arch": "lenet", "seed": 0, "mode": "standard"}
    summary = summarize(
        rows, sigma=sigma, n0=100, n=n, alpha=ALPHA, extra={**meta, "subset": {**subset, "indices": indices}}
    )
    summary["hparams"] = hparams if hparams is not None else {}
    summary.update(extra or {})
    write_metrics(summary, folder / "metrics.json")
    (folder / ".hydra").mkdir(exist_ok=True)
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"method={method}", f"seed={seed}", *overrides]))
    config = {"seed": seed, "trainer": {"max_epochs": 20}, "dataset": {"family": "mnist"}}
    (folder / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    runtime = {"choices": {"method": method, "experiment": None, **(choices or {})}}
    (folder / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"runtime": runtime}}))
    return folder


def radii_of(rng: np.random.Generator, size: int = 60, shift: float = 0.0, sigma: float = 0.5) -> np.ndarray:
    """Radii like a certify.tsv's: 20% wrong (0), the rest below the radius cap."""
    cap = radius_cap(sigma, N, ALPHA)
    radii = np.minimum(rng.uniform(0.05, cap, size) + shift, cap)
    return np.where(rng.random(size) < 0.2, 0.0, radii)


def run_report(tmp_path: Path, *args: str) -> pd.DataFrame:
    """Run ``python -m rsbench.report`` in process on ``args`` into ``tmp_path/report`` (no plots); its results.csv."""
    main([*args, "--out", str(tmp_path / "report"), "--no-plots"])
    return pd.read_csv(tmp_path / "report" / "results.csv")
