#!/usr/bin/env bash
# SmoothAdv, SmoothMix (with and without the one-step adversary) and CAT-RS on CIFAR-10 at sigma 0.25, 0.5, 1.0 with
# the recipe of the SmoothMix / CAT-RS tables: ResNet-110, 150 epochs, lr 0.1 x0.1 at 50 and 100, each method's
# published hyperparameters for (CIFAR-10, sigma) from conf/method/<name>.yaml, certified on all 10,000 test images
# (n0=100, n=100,000, alpha=0.001). CAT-RS needs a sigma=0.25 Gaussian teacher: pass TEACHER=<best.ckpt> (e.g. the
# sigma=0.25 run of experiments/cifar10_table/gaussian.sh), or the script trains one first (its soft labels, N=10,000 votes per
# training image, are computed once and cached beside it). Then the table. Extra arguments are passed to every
# run as Hydra overrides (data_dir=..., logger=wandb, ...).
# Reference ACR (CAT-RS Table 1, sigma 0.25 / 0.5 / 1.0): SmoothAdv 0.544 / 0.684 / 0.790; SmoothMix 0.553 (one-step
# 0.548) / 0.715 (one-step 0.737) / 0.773 (one-step); CAT-RS 0.562 / 0.757 / 0.815.
# Cost relative to Gaussian per epoch: see `python -m rsbench.bench.training_cost --arch cifar_resnet20
# --dataset cifar10 --methods gaussian smoothadv smoothmix catrs` (SmoothAdv with 10 PGD steps is the dearest).
set -euo pipefail
SWEEP=${SWEEP:-multirun/adversarial_cifar10}
TEACHER=${TEACHER:-}
if [[ -z "$TEACHER" ]]; then
  python -m rsbench method=gaussian dataset=cifar10 sigma=0.25 trainer=gpu test=false \
    hydra.run.dir="$SWEEP/teacher_gaussian_s025" "$@"
  TEACHER="$SWEEP/teacher_gaussian_s025/checkpoints/best.ckpt"
fi
python -m rsbench -m method=smoothadv dataset=cifar10 sigma=0.25,0.5,1.0 trainer=gpu \
  hydra.sweep.dir="$SWEEP/smoothadv" "$@"
python -m rsbench -m method=smoothmix method.one_step=false,true dataset=cifar10 sigma=0.25,0.5,1.0 trainer=gpu \
  hydra.sweep.dir="$SWEEP/smoothmix" "$@"
python -m rsbench -m method=catrs method.teacher_ckpt="$TEACHER" dataset=cifar10 sigma=0.25,0.5,1.0 trainer=gpu \
  hydra.sweep.dir="$SWEEP/catrs" "$@"
python -m rsbench.report "$SWEEP/smoothadv" "$SWEEP/smoothmix" "$SWEEP/catrs" --radii 0 0.25 0.5 0.75 1 1.5 2 \
  --out "$SWEEP/report"
