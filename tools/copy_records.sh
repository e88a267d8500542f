#!/usr/bin/env bash
# Copy the records of every rsbench run under FROM (a run folder, or any folder above run folders) into TO, keeping
# the layout below FROM: what anyone needs to recompute a report or check a claim, without checkpoints, W&B files,
# run logs, status files (they name the machine's folders) or plots (the report remakes them). Per run:
#   certify.tsv, attack.tsv                  the per-image rows (what the report reads)
#   metrics.json, certify_protocol.json,     the summary, the protocol the rows were made under,
#   attack_protocol.json                     and the attack's
#   certify_segments.json                    which machine certified which rows (a run resumed elsewhere)
#   .hydra/*.yaml                            the composed config and the overrides
#   logs/metrics.csv -> logs/training_metrics.csv   the per-epoch training log (renamed: not the run's metrics.json)
#   bash tools/copy_records.sh FROM TO
# Files already in TO are overwritten; nothing else in TO is touched.
set -euo pipefail
if [[ $# -ne 2 || ! -d $1 ]]; then
  echo "usage: bash tools/copy_records.sh FROM TO (FROM: a folder holding rsbench runs; got: ${*:-nothing})" >&2
  exit 2
fi
from=$1
to=$(realpath -m "$2")
mkdir -p "$to"
cd "$from"
find . -type f \( -name certify.tsv -o -name attack.tsv -o -name metrics.json -o -name certify_protocol.json \
  -o -name attack_protocol.json -o -name certify_segments.json -o -path '*/.hydra/*.yaml' \) \
  -not -path '*/checkpoints/*' -not -path '*/wandb/*' -exec cp --parents {} "$to/" \;
find . -type f -path '*/logs/metrics.csv' -not -path '*/wandb/*' | while read -r csv; do
  mkdir -p "$to/$(dirname "$csv")"
  cp "$csv" "$to/$(dirname "$csv")/training_metrics.csv"
done
