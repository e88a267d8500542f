#!/usr/bin/env bash
# Sequential CERTIFY through the real pipeline on a real network, checked against fixed n and against the replay
# oracle's prediction for the same images; and fp32 against bf16 on the same noise (report/real_models.txt).
#
# Trains LeNet on the embedded MNIST subset at sigma 0.25 (the default job, certify=off; or CKPT=<best.ckpt>), then
# certifies the test images (all 500, or every SKIP-th) with the same certify.seed (so every run reads the same noise):
#   fixed n; design=looks; design=betting; design=informed (the default); design=adaptive at radius 0.5; and fixed n
#   under bf16 autocast on the first BF16_IMAGES of them (default 200; BF16_IMAGES=0 skips it).
# N=10000 by default: a CPU budget (LeNet certifies ~2,000 samples/s on one thread of this shared 2-core machine, so
# n = 100,000 on 500 images is ~7 hours per run); N=100000 is the papers' protocol.
# Ends with python -m rsbench.bench.sequential_check (network against oracle) and the bf16 agreement.
set -euo pipefail
OUT=${OUT:-multirun/sequential_real_models}
N=${N:-10000}
CKPT=${CKPT:-}
if [ -z "$CKPT" ]; then
  python -m rsbench certify=off logger=none hydra.run.dir="$OUT/train" "$@"
  CKPT="$OUT/train/checkpoints/best.ckpt"
fi
common=("model.path=$CKPT" dataset=mnist_embedded "certify.skip=${SKIP:-1}" "certify.n=$N" certify.seed=0)
python -m rsbench.certify "${common[@]}" hydra.run.dir="$OUT/fixed"
python -m rsbench.certify "${common[@]}" certify=sequential certify.design=looks hydra.run.dir="$OUT/looks"
python -m rsbench.certify "${common[@]}" certify=sequential certify.design=betting hydra.run.dir="$OUT/betting"
python -m rsbench.certify "${common[@]}" certify=sequential certify.design=informed hydra.run.dir="$OUT/informed"
python -m rsbench.certify "${common[@]}" certify=sequential certify.design=adaptive certify.radius_cap=0.5 \
  hydra.run.dir="$OUT/adaptive_r0.5"
python -m rsbench.bench.sequential_check "$OUT/fixed" "$OUT/looks" "$OUT/betting" "$OUT/informed" "$OUT/adaptive_r0.5" \
  | tee "$OUT/sequential_check.txt"
BF16_IMAGES=${BF16_IMAGES:-200}
if [ "$BF16_IMAGES" -gt 0 ]; then
  python -m rsbench.certify "${common[@]}" certify.precision=bf16 "certify.max_images=$BF16_IMAGES" \
    hydra.run.dir="$OUT/fixed_bf16"
  python -m rsbench.bench.precision_agreement "$OUT/fixed" "$OUT/fixed_bf16" | tee "$OUT/precision_agreement.txt"
fi
