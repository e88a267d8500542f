#!/usr/bin/env bash
# Issue 9, part 4: do Stability and MACER rank against Gaussian as in SmoothMix's MNIST table (Table 2) once they get
# the full 90-epoch recipe? Gaussian, Stability and MACER on the embedded MNIST subset, sigma 0.5 and 1.0, 3 seeds,
# each certified on the same 300 test images (n=10,000). Then a report with paired differences against Gaussian.
#   experiments/embedded_mnist_full_recipe.sh [output root, default: studies/full_recipe]
# About 2 hours on one quiet CPU core (MACER: ~7 min of training per run; each certification ~4 min); sigma 1.0 first.
set -euo pipefail
root=${1:-studies/full_recipe}
for sigma in 1.0 0.5; do
  for seed in 0 1 2; do
    for method in gaussian stability macer; do
      dir="$root/${method}_sigma${sigma}_seed${seed}"
      [ -f "$dir/metrics.json" ] && continue  # finished: skip (an interrupted run resumes its rows)
      python -m rsbench experiment=mnist_full_recipe method=$method sigma=$sigma seed=$seed \
        logger=csv trainer.enable_progress_bar=false hydra.run.dir="$dir"
    done
  done
done
