"""What each run's records say about how it was made: settings, training epochs and restarts, certification machine.

For every run folder under the paths given (a folder with ``.hydra/``, copied with ``tools/copy_records.sh``), one
Markdown row:

- the overrides it was started with (``.hydra/overrides.yaml``, less the ones that only say where files were and how
  it printed) and, when it certified, the method's hyperparameters as ``metrics.json`` records them;
- the epochs its CSV training log (``logs/training_metrics.csv``) holds, and each restart that repeated training
  steps: a run cut during an epoch and resumed from the checkpoint of the epoch before trains those steps again, and
  its log holds both attempts (a step number logged again). A resume from a checkpoint written where the run stopped
  repeats nothing and leaves no trace in the log;
- where it was certified (``metrics.json``'s ``environment``: device, threads, torch), how the network was evaluated,
  the images, its ACR, and the median seconds per image of its ``certify.tsv`` rows.

    python tools/run_facts.py experiments/fashion_mnist_table/runs > experiments/fashion_mnist_table/report/runs.md
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from rsbench.report.load import network_evaluation

NOT_SETTINGS = ("data_dir=", "dataset.num_workers=", "trainer.enable_progress_bar=", "hydra.", "logger=", "ckpt_path=")
"""Overrides that say where files were, how a run printed or logged, or where it continued from: not its settings."""
NOT_HPARAMS = ("sigma", "allow_sigma_mismatch", "eval_noise_seed")
"""``metrics.json`` hyperparameters that every run has or that another column shows."""


def run_folders(paths: Sequence[Path]) -> list[Path]:
    """Every run folder (one holding ``.hydra/``) at or under ``paths``, in order."""
    found: set[Path] = set()
    for path in paths:
        found |= {hydra.parent for hydra in path.rglob(".hydra") if hydra.is_dir()}
        if (path / ".hydra").is_dir():
            found.add(path)
    return sorted(found)


def restarts(log: pd.DataFrame) -> list[tuple[int, int, int]]:
    """(epoch, first step, last step) of the steps each restart trained again, from a Lightning CSV log.

    Only the rows of per-step training metrics (``train/loss_step``) count: evaluation rows reuse step numbers.
    """
    if "train/loss_step" not in log or "step" not in log:
        return []
    steps = log.dropna(subset=["train/loss_step"])[["epoch", "step"]].astype(int).to_numpy()
    found = []
    for previous, (epoch, step) in zip(steps[:-1, 1], steps[1:], strict=True):
        if step <= previous:
            found.append((int(epoch), int(step), int(previous)))
    return found


def facts(run: Path, root: Path) -> dict[str, Any]:
    """One run's row (see the module's docstring)."""
    overrides = yaml.safe_load((run / ".hydra" / "overrides.yaml").read_text()) or []
    row: dict[str, Any] = {
        "run": run.relative_to(root).as_posix() if run != root else run.name,
        "overrides": " ".join(o for o in overrides if not o.startswith(NOT_SETTINGS)),
        "epochs": "-",
        "restarts": "-",
        "certified on": "-",
        "network": "-",
        "images": "-",
        "ACR": "-",
        "s per image": "-",
    }
    log_path = run / "logs" / "training_metrics.csv"
    if log_path.is_file():
        log = pd.read_csv(log_path)
        if "train/loss_epoch" in log:
            epochs = log.dropna(subset=["train/loss_epoch"])["epoch"].astype(int)
            row["epochs"] = f"{len(epochs)} ({epochs.min()}-{epochs.max()})" if len(epochs) else "0"
        found = restarts(log)
        row["restarts"] = "; ".join(f"epoch {e}: steps {a}-{b} trained again" for e, a, b in found) or "none seen"
    metrics_path = run / "metrics.json"
    if metrics_path.is_file():
        summary = json.loads(metrics_path.read_text())
        hparams = {k: v for k, v in summary.get("hparams", {}).items() if k not in NOT_HPARAMS}
        if hparams:
            row["overrides"] += " (" + ", ".join(f"{k}={v}" for k, v in hparams.items()) + ")"
        environment = summary.get("environment")
        threads = environment.get("threads", "?") if environment else "?"
        row["certified on"] = (
            f"{environment.get('device_name', '?')}, {threads} thread{'' if threads == 1 else 's'}, "
            f"torch {environment.get('torch', '?')}"
            if environment
            else "not recorded"
        )
        row["network"] = network_evaluation(summary, run)
        row["images"] = summary.get("num_images", "-")
        row["ACR"] = f"{summary['acr']:.3f}" if "acr" in summary else "-"
        if (run / "certify.tsv").is_file():
            row["s per image"] = f"{pd.read_csv(run / 'certify.tsv', sep=chr(9))['time'].median():.3g}"
    return row


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table; 2 (after one line) when no run folder is found."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="run folders, or folders above them")
    args = parser.parse_args(argv)
    runs = run_folders(args.paths)
    if not runs:
        print(f"run_facts: error: no run folder (one with .hydra/) under {' '.join(map(str, args.paths))}")
        return 2
    root = args.paths[0] if len(args.paths) == 1 else Path(".")
    rows = pd.DataFrame([facts(run, root) for run in runs])
    print(rows.to_markdown(index=False, disable_numparse=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
