"""A long study cell carried from one machine to the next: its resumable state saved into the study, and restored.

A paper-scale cell can take longer than a machine lives. ``save`` copies what the run needs to continue (the records,
:data:`experiments_index.RECORDS`, and the checkpoints it resumes from, :data:`experiments_index.RESUMABLE_STATE`:
``last.ckpt`` with the optimizer and loop state) from its run folder into the study's ``runs/<cell>/``, to commit
with the cell marked ``in_progress`` in the study's card. ``restore`` copies it back into a fresh run folder on the
next machine, where ``python -m rsbench resume=<run folder>`` continues it: training from the saved epoch (every
epoch is seeded by (seed, epoch), so it continues bit for bit on the same kind of machine and thread count) and
certification after the last saved row.

    python tools/cell_state.py save <run folder> experiments/<study>/runs/<cell>
    python tools/cell_state.py restore experiments/<study>/runs/<cell> <run folder>
    python -m rsbench resume=<run folder>

The training log is ``logs/metrics.csv`` in a run folder and ``logs/training_metrics.csv`` in a study (as
tools/copy_records.sh names it); each direction renames it. Lightning's checkpoint callbacks record the folder they
write into and forget their best score when it moved (the next epoch would then pass for the best, in a
``best-v1.ckpt``), so ``restore`` points the restored checkpoints' callback states at the new folder. When the cell
finishes, its checkpoints give way to the weights-only model (``python tools/share_model.py``) and the card marks the
cell ``done``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from experiments_index import RECORDS, RESUMABLE_STATE

from rsbench.files import atomic_path, save_atomically

RUN_LOG = "logs/metrics.csv"
"""The training log's name in a run folder (rsbench's CSV logger)."""
STUDY_LOG = "logs/training_metrics.csv"
"""Its name in a study's runs/ (a record of :data:`RECORDS`)."""


def state_files(run: Path, log_name: str) -> list[tuple[str, str]]:
    """The files of ``run`` a carried cell keeps, as (name in ``run``, name in the study), training log included."""
    kept = [name for name in (*RECORDS, *RESUMABLE_STATE) if name != STUDY_LOG]
    pairs = [(name, name) for name in kept if (run / name).is_file()]
    if (run / log_name).is_file():
        pairs.append((log_name, STUDY_LOG if log_name == RUN_LOG else RUN_LOG))
    return pairs


def copy_state(source: Path, target: Path, log_name: str) -> list[str]:
    """Copy the state of ``source`` into ``target`` (training log renamed); return the names written in ``target``.

    Raises:
        SystemExit: ``source`` holds no checkpoint to continue from (nothing to carry), naming what it looked for.
    """
    pairs = state_files(source, log_name)
    if not any(name in RESUMABLE_STATE for name, _ in pairs):
        raise SystemExit(f"cell_state: {source} holds no {' or '.join(RESUMABLE_STATE)}: no run state to carry")
    for name, renamed in pairs:
        with atomic_path(target / renamed) as partial:  # whole or not at all: a cut copy never passes for the state
            shutil.copyfile(source / name, partial)
    return [renamed for _, renamed in pairs]


def relocated(value: Any, old: str, new: str) -> Any:
    """``value`` with every path string under folder ``old`` moved under ``new`` (in dicts' keys and values too)."""
    if isinstance(value, str) and (value == old or value.startswith(old.rstrip("/") + "/")):
        return new + value[len(old) :]
    if isinstance(value, dict):
        return {relocated(key, old, new): relocated(item, old, new) for key, item in value.items()}
    return value


def relocate_checkpoints(run: Path) -> None:
    """Point the checkpoint callbacks' states in ``run``'s checkpoints at ``run/checkpoints`` (see the module doc)."""
    import torch  # only here: saving and the layout check stay light

    for name in RESUMABLE_STATE:
        path = run / name
        if not path.is_file():
            continue
        checkpoint = torch.load(path, map_location="cpu", weights_only=False)
        states = checkpoint.get("callbacks", {})
        for key, state in states.items():
            if str(key).startswith("ModelCheckpoint") and isinstance(state, dict) and state.get("dirpath"):
                states[key] = relocated(state, str(state["dirpath"]), str(path.parent.resolve()))
        save_atomically(checkpoint, path)


def main(argv: Sequence[str] | None = None) -> int:
    """``save RUN CELL`` or ``restore CELL RUN``; prints what was written."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("direction", choices=("save", "restore"), help="save: run folder -> study; restore: back")
    parser.add_argument("source", type=Path, help="save: the run folder; restore: the study's runs/<cell>")
    parser.add_argument("target", type=Path, help="save: the study's runs/<cell>; restore: a run folder")
    args = parser.parse_args(argv)
    if not args.source.is_dir():
        parser.error(f"{args.source} is not a folder")
    log_name = RUN_LOG if args.direction == "save" else STUDY_LOG
    written = copy_state(args.source, args.target, log_name)
    if args.direction == "restore":
        relocate_checkpoints(args.target)
    print(f"cell_state: {args.direction}d {len(written)} files into {args.target}: {', '.join(sorted(written))}")
    if args.direction == "restore":
        print(f"continue it with: python -m rsbench resume={args.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
