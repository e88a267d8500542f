#!/usr/bin/env bash
# Denoised smoothing on the embedded MNIST subset (Salman et al., NeurIPS 2020), at sigma 0.25 and 0.5 (SIGMAS=...),
# seeds 0 1 2 (SEEDS=...):
#   standard       LeNet trained without noise (method=standard), certified directly; its last epoch is kept
#                  (test_ckpt=last), so that no noisy validation accuracy chooses the "off-the-shelf" model
#   denoiser mse   a DnCNN trained with the MSE objective in front of that frozen LeNet
#   denoiser stab  a DnCNN trained with the stability objective (CE against the LeNet's clean prediction)
#   mse+stab       the mse denoiser fine-tuned with the stability objective (the paper's best combination)
#   gaussian       LeNet trained with Gaussian noise (Cohen et al.), the training-based reference
# Every run trains the dataset recipe's 20 epochs and certifies every 5th test image (100) with n=10,000
# (certify=quick). The DnCNN is small for 28x28 digits: depth 5, width 16 (the paper's CIFAR-10 one: 17 x 64).
# Adam as the authors' train_denoiser.py (lr 1e-3, weight decay 1e-4); the fine-tuning uses lr 1e-4 (our choice).
# About 20-45 minutes per (sigma, seed) on 2 busy CPU cores. Then one report per sigma (95% intervals over images,
# mean and sd over seeds). Extra arguments go to every training run.
# COMMIT=experiments/embedded_mnist_denoised (default): where every run's records (tools/copy_records.sh:
# certify.tsv, metrics.json, .hydra/, the training log; no checkpoints) are copied (runs/sigma_<s>/) and the reports
# written (report/sigma_<s>/, from that copy); "": the reports in $SWEEP/report/sigma_<s>, from its runs.
set -euo pipefail
SWEEP=${SWEEP:-multirun/embedded_mnist_denoised}
SIGMAS=${SIGMAS:-0.25 0.5}
SEEDS=${SEEDS:-0 1 2}
DENOISER=(method=denoiser method.depth=5 method.width=16 optimizer=adam)
for sigma in $SIGMAS; do
  for seed in $SEEDS; do
    runs="$SWEEP/sigma_$sigma"
    common=(sigma="$sigma" seed="$seed")
    python -m rsbench method=standard test_ckpt=last "${common[@]}" hydra.run.dir="$runs/standard_$seed" "$@"
    clean="$runs/standard_$seed/checkpoints/last.ckpt"
    python -m rsbench "${DENOISER[@]}" method.objective=mse method.classifier_ckpt="$clean" optimizer.lr=1e-3 \
      "${common[@]}" hydra.run.dir="$runs/denoiser_mse_$seed" "$@"
    python -m rsbench "${DENOISER[@]}" method.objective=stability method.classifier_ckpt="$clean" optimizer.lr=1e-3 \
      "${common[@]}" hydra.run.dir="$runs/denoiser_stability_$seed" "$@"
    python -m rsbench "${DENOISER[@]}" method.objective=stability method.classifier_ckpt="$clean" optimizer.lr=1e-4 \
      method.init_ckpt="$runs/denoiser_mse_$seed/checkpoints/best.ckpt" "${common[@]}" \
      hydra.run.dir="$runs/denoiser_mse_stability_$seed" "$@"
    python -m rsbench method=gaussian "${common[@]}" hydra.run.dir="$runs/gaussian_$seed" "$@"
  done
done
# One report per sigma, every row paired against the seed-0 Gaussian run on the same images (the runs differ in
# optimizer and test_ckpt, so the report would not pair them by method name); made from the committed copy of the
# records when COMMIT is set (so that the reports carry no machine paths), else from $SWEEP.
COMMIT=${COMMIT-experiments/embedded_mnist_denoised}
for sigma in $SIGMAS; do
  runs="$SWEEP/sigma_$sigma" report="$SWEEP/report/sigma_$sigma"
  if [[ -n $COMMIT ]]; then
    bash "$(dirname "$0")/../../tools/copy_records.sh" "$runs" "$COMMIT/runs/sigma_$sigma"
    runs="$COMMIT/runs/sigma_$sigma" report="$COMMIT/report/sigma_$sigma"
  fi
  python -m rsbench.report "$runs" --baseline "$runs/gaussian_0" --radii 0 0.25 0.5 0.75 1.0 --out "$report"
done
