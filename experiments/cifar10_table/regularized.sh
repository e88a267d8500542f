#!/usr/bin/env bash
# Stability training, Consistency regularization and MACER on CIFAR-10 at sigma 0.25, 0.5, 1.0 with the recipe of
# the SmoothMix / CAT-RS tables: ResNet-110, 150 epochs, lr 0.1 x0.1 at 50 and 100, each method's published
# hyperparameters for (CIFAR-10, sigma) from conf/method/<name>.yaml, certified on all 10,000 test images
# (n0=100, n=100,000, alpha=0.001). Then the table. Extra arguments are passed to rsbench as Hydra overrides.
# Reference ACR (CAT-RS Table 1 / SmoothMix Tables 1 and 3, sigma 0.25 / 0.5 / 1.0):
#   Gaussian 0.424 / 0.525 / 0.511, Stability 0.420 / 0.531 / 0.514, MACER 0.531 / 0.691 / 0.744 (the authors'
#   440-epoch models: experiment=macer_original_cifar10), Consistency 0.552 / 0.720 / 0.756 (Gaussian + Consistency;
#   add method.adversarial=true for the Consistency paper's SmoothAdv + Consistency logs, 0.548 / 0.726 / 0.816).
# Cost relative to Gaussian per epoch: Stability ~2x (two forward passes), Consistency ~2x (m=2 copies, m steps per
# loader batch), MACER ~16x (k=16 copies); see `python -m rsbench.bench.training_cost`.
set -euo pipefail
SWEEP=${SWEEP:-multirun/regularized_cifar10}
python -m rsbench -m method=stability,consistency,macer dataset=cifar10 sigma=0.25,0.5,1.0 trainer=gpu \
  hydra.sweep.dir="$SWEEP" "$@"
python -m rsbench.report "$SWEEP" --radii 0 0.25 0.5 0.75 1 1.5 2 --out "$SWEEP/report"
