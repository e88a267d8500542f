"""``python -m rsbench.certify.merge <folder>``: merge the shards of a sharded certification by hand.

The last shard to finish merges on its own (:func:`rsbench.certify.pipeline.certification.merge_shards`); this command
does the same from the files alone (no model, no dataset): every shard's ``certify.shard<k>-of-<K>.tsv`` into
``certify.tsv`` in the subset's order, then ``metrics.json`` and ``certified_accuracy.png``, exactly as an
unsharded run writes them. It refuses, naming the shards, while any image is missing, and merging a merged folder
again rewrites the same files. See docs/sharding.md.
"""

from __future__ import annotations

import logging
import shlex
from pathlib import Path

from rsbench.runs.floor import CommandParser, error_line, run_guarded

SHARDS = "certify_shards.json"  # (rsbench.certify.pipeline.SHARDS, without importing torch to check the folder)
COMMAND = "python -m rsbench.certify.merge"


def main(argv: list[str] | None = None) -> int:
    """Merge each folder given; one ``rsbench: error:`` line and exit status 2 for a folder that cannot be merged.

    The folders are checked before torch is imported; the merge runs under the run's stop handling (a stop signal
    ends it after the folder in flight, whose files are written whole) and the folder's own lock (the one the shards
    hold while they register and merge: :func:`~rsbench.certify.pipeline.merge_shards`).
    """
    parser = CommandParser(COMMAND, description=__doc__)
    parser.add_argument("folders", nargs="+", type=Path, help="the folders the shards certified into")
    folders: list[Path] = parser.parse_args(argv).folders
    for folder in folders:
        if not (folder / SHARDS).is_file():
            what = "is not a folder" if not folder.is_dir() else f"holds no sharded certification ({SHARDS} is missing)"
            return error_line(
                f"{folder} {what}: give the folder the shards certified into (certify.merge_dir; by default the "
                "folder above their run folders, e.g. the multirun's sweep folder)"
            )
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    again = " ".join([COMMAND, *(shlex.quote(str(folder)) for folder in folders)])
    return run_guarded(lambda: _merge(folders), "merging shards", again)


def _merge(folders: list[Path]) -> int:
    from rsbench.certify.pipeline.certification import merge_shards  # (torch: only once the folders are checked)
    from rsbench.stop import raise_if_stop_requested

    for folder in folders:
        raise_if_stop_requested()
        outcome = merge_shards(folder)
        assert outcome.summary is not None
        print(f"{folder}: merged {outcome.summary['num_images']} images, ACR {outcome.summary['acr']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
