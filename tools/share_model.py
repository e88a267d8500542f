"""A finished run's model as a weights-only file to commit with its study, and the card that says what it is.

A run's ``checkpoints/last.ckpt`` (or ``best.ckpt``) holds the optimizer, the loop state and, for some methods,
other networks (a teacher); the shared file keeps only the base classifier's weights and rsbench's signature
(architecture, class count, input layer, sigma, method: :mod:`rsbench.checkpoint`), so
``python -m rsbench.certify model.path=<file>`` certifies it as it certifies any rsbench checkpoint. Beside it goes
``<file stem>.yaml``: the file's SHA-256 and size, what the signature says, the epochs trained, the run's overrides,
where its records are, and the command that certifies it (the card names its file relative to itself, and the records
and the command's ``model.path`` relative to the working directory, the repository, when they lie under it:
:func:`rsbench.files.record_path`).

    python tools/share_model.py <run folder> experiments/<study>/models/<cell>.ckpt
    python tools/share_model.py <run folder> <out> --checkpoint best.ckpt --records experiments/<study>/runs/<cell>

The file is read back (strictly, as ``rsbench.certify`` reads it) before the card is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from rsbench.checkpoint import NET_PREFIX, SIGNATURE_KEY, load_checkpoint, write_checkpoint
from rsbench.errors import RsbenchError
from rsbench.files import record_path, write_text_atomically
from rsbench.loading import file_digest
from rsbench.models.builders import checkpoint as certifiable


def weights_only(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The base classifier's weights and the signature of a run's checkpoint, nothing else."""
    return {
        "state_dict": {key: value for key, value in checkpoint["state_dict"].items() if key.startswith(NET_PREFIX)},
        SIGNATURE_KEY: dict(checkpoint[SIGNATURE_KEY]),
    }


def run_config(run: Path) -> tuple[dict[str, Any], list[str]]:
    """The run's composed config and its overrides, as Hydra stored them (empty when it stored none)."""
    config_path, overrides_path = run / ".hydra" / "config.yaml", run / ".hydra" / "overrides.yaml"
    config = yaml.safe_load(config_path.read_text()) if config_path.is_file() else {}
    overrides = yaml.safe_load(overrides_path.read_text()) if overrides_path.is_file() else []
    return config or {}, overrides or []


def model_card(run: Path, source: dict[str, Any], out: Path, records: Path | None) -> dict[str, Any]:
    """What the card of the shared file ``out`` says (its digest, the signature, the training, the records)."""
    signature = dict(source[SIGNATURE_KEY])
    config, overrides = run_config(run)
    dataset = config.get("dataset", {}).get("name")
    card: dict[str, Any] = {
        "file": out.name,
        "sha256": file_digest(out),
        "bytes": out.stat().st_size,
        "method": signature.get("method"),
        "arch": signature.get("arch"),
        "sigma": signature.get("sigma"),
        "num_classes": signature.get("num_classes"),
        "input_layer": signature.get("input_layer"),
        "dataset": dataset,
        "seed": config.get("seed"),
        "epochs_trained": int(source["epoch"]) + 1 if "epoch" in source else None,
        "overrides": overrides,
        "records": record_path(records) if records is not None else None,
        "certify": f"python -m rsbench.certify model.path={record_path(out)}"
        + (f" dataset={dataset}" if dataset else ""),
    }
    return card


def main(argv: Sequence[str] | None = None) -> int:
    """Write the weights-only file and its card; 2 (after one line) when the run's checkpoint cannot be shared."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the finished run's folder (its checkpoints/ and .hydra/)")
    parser.add_argument("out", type=Path, help="the weights-only file to write, e.g. experiments/<study>/models/x.ckpt")
    parser.add_argument("--checkpoint", default="last.ckpt", help="which of checkpoints/ (default last.ckpt)")
    parser.add_argument("--records", type=Path, help="where the run's records are committed (for the card)")
    args = parser.parse_args(argv)
    source_path = args.run / "checkpoints" / args.checkpoint
    try:
        source = load_checkpoint(source_path, f"checkpoint {source_path}", "name a finished rsbench run's folder")
        if not isinstance(source.get(SIGNATURE_KEY), dict):
            print(f"share_model: error: {source_path} has no rsbench signature (was it trained by rsbench?)")
            return 2
        write_checkpoint(weights_only(source), args.out)
        dataset = run_config(args.run)[0].get("dataset", {})
        channels = int(dataset.get("image_shape", [3])[0])
        num_classes = int(dataset.get("num_classes", source[SIGNATURE_KEY]["num_classes"]))
        certifiable(str(args.out), num_classes, channels)  # as rsbench.certify reads it: every weight must fit
    except RsbenchError as error:
        print(f"share_model: error: {error}")
        return 2
    card = model_card(args.run, source, args.out, args.records)
    write_text_atomically(args.out.with_suffix(".yaml"), yaml.safe_dump(card, sort_keys=False))
    print(f"{args.out} ({card['bytes']:,} bytes, sha256 {card['sha256']}) and {args.out.with_suffix('.yaml')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
