#!/usr/bin/env bash
# Gaussian data augmentation (Cohen et al. 2019) on CIFAR-10 at sigma 0.25, 0.5, 1.0 with the later papers' recipe:
# ResNet-110, 150 epochs, lr 0.1 x0.1 at 50 and 100, certified on all 10,000 test images (n0=100, n=100,000,
# alpha=0.001). Then the table. Extra arguments are passed to rsbench as Hydra overrides.
set -euo pipefail
SWEEP=${SWEEP:-multirun/gaussian_cifar10}
python -m rsbench -m method=gaussian dataset=cifar10 sigma=0.25,0.5,1.0 trainer=gpu hydra.sweep.dir="$SWEEP" "$@"
python -m rsbench.report "$SWEEP" --radii 0 0.25 0.5 0.75 1 1.5 2 --out "$SWEEP/report"
