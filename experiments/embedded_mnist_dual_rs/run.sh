#!/usr/bin/env bash
# Dual randomized smoothing at CPU scale on the embedded MNIST (experiment=mnist_study's 20-epoch LeNet recipe), every
# step resumable:   bash experiments/embedded_mnist_dual_rs/run.sh    # into $OUT (default multirun/embedded_mnist_dual_rs)
# Gaussian experts at 0.25 / 0.5 / 1.0 (seed 0), each certified on the first 300 test images with sequential CERTIFY
# (betting, at most n = 10,000, n0 = 100, alpha = 0.001; IMAGES=<k> certifies the first k); router labels on every 4th training image (each expert's
# CERTIFY at n0 = 16, n = 256); a LeNet router at sigma 1.0; dual certification of the same 300 images (router at
# beta = 0.001, the experts' records reused: each certificate at alpha + beta = 0.002); DDRS (NOT sound) on the sigma
# 0.5 expert on the first 50 images (fixed n = 10,000). Report: python experiments/fashion_mnist_dual_rs/compare.py
# experiments/embedded_mnist_dual_rs --radii 0 0.25 0.5 0.75 1 1.25 1.5 1.75 2 2.5
set -euo pipefail
OUT=${OUT:-multirun/embedded_mnist_dual_rs}
IMAGES=${IMAGES:-300}
C="certify=sequential certify.design=betting certify.n0=100 certify.n=10000 certify.alpha=0.001 certify.skip=1"
C="$C certify.max_images=$IMAGES"
# The committed records were made before method=router followed the dual RS paper and before the dual budget became
# alpha = beta = 0.0005: these pin what they were made with (docs/dual_smoothing.md has the paper's recipe).
OLD_ROUTER="method.labels=hard method.drop_uncertified=false method.rebalance=false method.consistency=none"
OLD_ROUTER="$OLD_ROUTER optimizer=sgd ~method_schedule"
OLD_BUDGET="beta=0.001"
done_run() { [ -f "$1/status.json" ] && grep -q '"completed"' "$1/status.json"; }
for s in 0.25 0.5 1.0; do
  done_run "$OUT/train_sigma$s" || python -m rsbench experiment=mnist_study method=gaussian sigma=$s seed=0 test=false \
    trainer.enable_progress_bar=false hydra.run.dir="$OUT/train_sigma$s" "$@"
done
for s in 0.25 0.5 1.0; do
  [ -f "$OUT/expert_sigma$s/metrics.json" ] || python -m rsbench.certify \
    model.path="$OUT/train_sigma$s/checkpoints/best.ckpt" $C hydra.run.dir="$OUT/expert_sigma$s" "$@"
done
E="experts=[$OUT/train_sigma0.25/checkpoints/best.ckpt,$OUT/train_sigma0.5/checkpoints/best.ckpt,$OUT/train_sigma1.0/checkpoints/best.ckpt]"
R="expert_records=[$OUT/expert_sigma0.25,$OUT/expert_sigma0.5,$OUT/expert_sigma1.0]"
[ -f "$OUT/labels/router_labels.pt" ] || python -m rsbench.dual stage=labels "$E" labels.skip=4 labels.n0=16 \
  labels.n=256 hydra.run.dir="$OUT/labels" "$@"
done_run "$OUT/router" || python -m rsbench experiment=mnist_study method=router \
  method.labels_file="$OUT/labels/router_labels.pt" $OLD_ROUTER arch.num_classes=3 sigma=1.0 seed=0 test=false \
  trainer.enable_progress_bar=false hydra.run.dir="$OUT/router" "$@"
[ -f "$OUT/dual_rs/metrics.json" ] || python -m rsbench.dual stage=certify $OLD_BUDGET \
  router.path="$OUT/router/checkpoints/best.ckpt" "$E" "$R" $C hydra.run.dir="$OUT/dual_rs" "$@"
[ -f "$OUT/ddrs_sigma0.5/metrics.json" ] || python -m rsbench.certify \
  model.path="$OUT/train_sigma0.5/checkpoints/best.ckpt" certify=quick certify.skip=1 certify.max_images=50 \
  certify.sigma_mode=data_dependent hydra.run.dir="$OUT/ddrs_sigma0.5" "$@"
