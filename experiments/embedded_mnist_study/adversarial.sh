#!/usr/bin/env bash
# The CPU-scale comparison of the adversarial methods on the embedded MNIST subset (experiment=mnist_study: LeNet,
# the 20-epoch embedded recipe for every method, certified on the first 300 test images with n=10,000), at sigma
# 0.5 and 1.0: SmoothAdv, SmoothMix, SmoothMix + one-step adversary and CAT-RS, next to a Gaussian baseline trained
# the same way. CAT-RS's teacher is a sigma=0.25 Gaussian model trained with the same recipe (pass TEACHER=<ckpt> to
# reuse one); its soft labels use N=1,000 votes per training image here (the authors' 10,000 costs ~25 minutes of
# LeNet inference on 2 cores for 4,500 images; at sigma=0.25 MNIST votes are nearly one-hot either way).
# Runs one job at a time; SmoothAdv (m=4, 10 PGD steps) costs ~40x a Gaussian epoch, so the whole study takes hours
# on 2 CPU cores. Extra arguments are passed to every run as Hydra overrides.
set -euo pipefail
SWEEP=${SWEEP:-multirun/embedded_mnist_adversarial}
TEACHER=${TEACHER:-}
if [[ -z "$TEACHER" ]]; then
  python -m rsbench method=gaussian sigma=0.25 test=false hydra.run.dir="$SWEEP/teacher_gaussian_s025" "$@"
  TEACHER="$SWEEP/teacher_gaussian_s025/checkpoints/best.ckpt"
fi
python -m rsbench -m experiment=mnist_study method=gaussian sigma=0.5,1.0 hydra.sweep.dir="$SWEEP/gaussian" "$@"
python -m rsbench -m experiment=mnist_study method=smoothadv sigma=0.5,1.0 hydra.sweep.dir="$SWEEP/smoothadv" "$@"
python -m rsbench -m experiment=mnist_study method=smoothmix sigma=0.5,1.0 hydra.sweep.dir="$SWEEP/smoothmix" "$@"
python -m rsbench -m experiment=mnist_study method=smoothmix method.one_step=true sigma=0.5,1.0 \
  hydra.sweep.dir="$SWEEP/smoothmix_one_step" "$@"
python -m rsbench -m experiment=mnist_study method=catrs method.teacher_ckpt="$TEACHER" method.teacher_num_samples=1000 \
  sigma=0.5,1.0 hydra.sweep.dir="$SWEEP/catrs" "$@"
python -m rsbench.report "$SWEEP/gaussian" "$SWEEP/smoothadv" "$SWEEP/smoothmix" "$SWEEP/smoothmix_one_step" \
  "$SWEEP/catrs" --radii 0 0.5 1 1.5 2 2.5 --baseline gaussian --out "$SWEEP/report"
