#!/usr/bin/env bash
# A CPU-scale Gaussian baseline on the embedded MNIST subset (4,000 training images, 500 test images), sigma 0.25,
# 0.5, 1.0: 20 epochs, certification of every 5th test image with n=10,000. About 2 minutes per sigma on 2 cores.
set -euo pipefail
SWEEP=${SWEEP:-multirun/embedded_mnist_gaussian}
python -m rsbench -m method=gaussian sigma=0.25,0.5,1.0 hydra.sweep.dir="$SWEEP" "$@"
python -m rsbench.report "$SWEEP" --radii 0 0.25 0.5 0.75 1 1.5 2 --out "$SWEEP/report"
