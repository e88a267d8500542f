#!/usr/bin/env bash
# An ensemble of three Gaussian LeNets against each of them (Horvath et al., ICLR 2022), on the embedded MNIST
# subset at sigma 0.25: the three train with seeds 0, 1, 2 (20 epochs, about 2 minutes each on 2 cores) and certify
# every 5th test image with n=10,000; the ensemble (mean logits) certifies the same 100 images with the same noise.
# Measured (README, "Ensembles"): see the table there.
set -euo pipefail
SWEEP=${SWEEP:-multirun/embedded_mnist_ensemble}
python -m rsbench -m method=gaussian sigma=0.25 seed=0,1,2 hydra.sweep.dir="$SWEEP" "$@"
members=$(printf "'%s'," "$SWEEP"/[0-9]_*/checkpoints/best.ckpt)  # <n>_<overrides> folders, quoted for Hydra
python -m rsbench.certify model=ensemble "model.members=[${members%,}]" hydra.run.dir="$SWEEP/ensemble"
python -m rsbench.report "$SWEEP" "$SWEEP/ensemble" --radii 0 0.25 0.5 0.75 --baseline "$SWEEP/ensemble" \
  --out "$SWEEP/report"
