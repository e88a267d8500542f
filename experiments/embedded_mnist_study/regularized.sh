#!/usr/bin/env bash
# The CPU-scale comparison of the regularizing methods on the embedded MNIST subset (experiment=mnist_study: LeNet,
# the 20-epoch embedded recipe for every method, certified on the first 300 test images with n=10,000), at sigma
# 0.5 and 1.0: Stability, Consistency and MACER next to a Gaussian baseline trained the same way, then the table.
# One job at a time; MACER (k=16) costs ~15x a Gaussian epoch. Extra arguments are passed to every run as Hydra
# overrides.
set -euo pipefail
SWEEP=${SWEEP:-multirun/embedded_mnist_regularized}
python -m rsbench -m experiment=mnist_study method=gaussian,stability,consistency,macer sigma=0.5,1.0 \
  hydra.sweep.dir="$SWEEP" "$@"
python -m rsbench.report "$SWEEP" --radii 0 0.5 1 1.5 2 2.5 --baseline gaussian --out "$SWEEP/report"
