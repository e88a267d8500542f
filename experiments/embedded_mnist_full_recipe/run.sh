#!/usr/bin/env bash
# Issue 9, part 4: do Stability and MACER rank against Gaussian as in SmoothMix's MNIST table (Table 2) once they get
# the full 90-epoch recipe (lr 0.01, drops after epochs 31 and 61, MACER's lambda on from the first drop)? Gaussian,
# Stability and MACER on the embedded MNIST subset, 3 seeds, each certified on the same 300 test images (n=10,000);
# then one report over every run in the output root, with paired differences against Gaussian at each sigma.
#   SIGMAS="1.0 0.5" bash experiments/embedded_mnist_full_recipe/run.sh [output root, default: studies/full_recipe]
# About 10-13 minutes per run on one quiet CPU core, MACER about 52 (90 epochs at 29 s, 8 minutes of certification).
# What it measured: experiments/embedded_mnist_full_recipe/report/ (made from the committed records in runs/).
# A run stopped midway continues when the script is rerun (training from last.ckpt, certification after its last row).
# COMMIT=experiments/embedded_mnist_full_recipe (default): where every run's records (tools/copy_records.sh:
# certify.tsv, metrics.json, .hydra/, the training log; no checkpoints) are copied (runs/) and the report written
# (report/), from that copy; "": the report in <output root>/report, from its runs.
set -euo pipefail
root=${1:-studies/full_recipe}
for sigma in ${SIGMAS:-1.0 0.5}; do
  for seed in 0 1 2; do
    for method in gaussian stability macer; do
      dir="$root/${method}_sigma${sigma}_seed${seed}"
      [ -f "$dir/metrics.json" ] && continue  # finished
      python -m rsbench experiment=mnist_full_recipe method=$method sigma=$sigma seed=$seed \
        logger=csv trainer.enable_progress_bar=false hydra.run.dir="$dir"
    done
  done
done
# The report is made from the committed copy of the records when COMMIT is set (so that it carries no machine paths
# and anyone can remake it from the repository), else from the output root.
COMMIT=${COMMIT-experiments/embedded_mnist_full_recipe}
runs="$root" report="$root/report"
if [[ -n $COMMIT ]]; then
  bash "$(dirname "$0")/../../tools/copy_records.sh" "$root" "$COMMIT/runs"
  runs="$COMMIT/runs" report="$COMMIT/report"
fi
python -m rsbench.report "$runs"/*_seed[0-9] --baseline gaussian --radii 0 0.5 1.0 1.5 2.0 2.5 --out "$report"
