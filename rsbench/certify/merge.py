"""``python -m rsbench.certify.merge <folder>``: merge the shards of a sharded certification by hand.

The last shard to finish merges on its own (:func:`rsbench.certify.pipeline.certification.merge_shards`); this command
does the same from the files alone (no model, no dataset): every shard's ``certify.shard<k>-of-<K>.tsv`` into
``certify.tsv`` in the subset's order, then ``metrics.json`` and ``certified_accuracy.png``, exactly as an
unsharded run writes them. It refuses, naming the shards, while any image is missing, and merging a merged folder
again rewrites the same files. See docs/sharding.md.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

SHARDS = "certify_shards.json"  # (pipeline.certification.SHARDS, without importing torch to check the folder)


def main(argv: list[str] | None = None) -> int:
    """Merge each folder given; one ``rsbench: error:`` line and exit status 2 for a folder that cannot be merged."""
    parser = argparse.ArgumentParser(
        prog="python -m rsbench.certify.merge", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("folders", nargs="+", type=Path, help="the folders the shards certified into")
    args = parser.parse_args(argv)
    for folder in args.folders:
        if not (folder / SHARDS).is_file():
            what = "is not a folder" if not folder.is_dir() else f"holds no sharded certification ({SHARDS} is missing)"
            print(
                f"rsbench: error: {folder} {what}: give the folder the shards certified into (certify.merge_dir; by "
                "default the folder above their run folders, e.g. the multirun's sweep folder)",
                file=sys.stderr,
            )
            return 2
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from rsbench.certify.pipeline.certification import merge_shards  # (torch: only once the folders are checked)
    from rsbench.errors import user_message

    for folder in args.folders:
        try:
            outcome = merge_shards(folder)
        except Exception as error:
            message = user_message(error)
            if message is None:
                raise
            print(f"rsbench: error: {message}", file=sys.stderr)
            return 2
        assert outcome.summary is not None
        print(f"{folder}: merged {outcome.summary['num_images']} images, ACR {outcome.summary['acr']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
