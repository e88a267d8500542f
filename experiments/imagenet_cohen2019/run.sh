#!/usr/bin/env bash
# Cohen et al. (2019) on ImageNet: ResNet-50, 90 epochs, batch 400, certified on every 100th validation image (500)
# at sigma 0.25, 0.5, 1.0. Needs the ImageFolder tree under data_dir (train/, val/). Then the table.
set -euo pipefail
SWEEP=${SWEEP:-multirun/gaussian_imagenet}
python -m rsbench -m experiment=cohen2019_imagenet sigma=0.25,0.5,1.0 trainer=gpu hydra.sweep.dir="$SWEEP" "$@"
python -m rsbench.report "$SWEEP" --radii 0 0.5 1 1.5 2 2.5 3 --out "$SWEEP/report"
