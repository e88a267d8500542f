#!/usr/bin/env bash
# Threat models beyond l2 and an attack beside every certificate, on the embedded MNIST subset (issue 23), 3 seeds:
#   - l1: Gaussian augmentation trained and certified with Laplace and with uniform noise against Gaussian noise at
#     the same per-pixel standard deviation sigma = 0.5 (Yang et al. 2020's matched-variance comparison; Gaussian
#     noise certifies l1 through its l2 radius, R_l1 = R_l2);
#   - l-infinity from l2: the Gaussian models certified with certify.norm=linf (R_linf = R_l2 / sqrt(784));
#   - the gap between empirical and certified l2 accuracy per radius for the Gaussian and SmoothAdv models:
#     attack=smoothadv (Salman et al.'s SmoothAdv PGD, T = 20, m = 32, then PREDICT with n = 1,000, alpha = 0.001).
# Every model is trained once with experiment=mnist_study (20 epochs, LeNet, sigma 0.5, checkpoint chosen on the
# validation split) without certification, then certified with `python -m rsbench train=false ckpt_path=...` once per
# threat model on the first $IMAGES test images (n0 = 100, n = 10,000, alpha = 0.001), the attack on the first
# $ATTACK_IMAGES of them; seed by seed. Then a copy of the records (tools/copy_records.sh: certify.tsv,
# attack.tsv, metrics.json, .hydra/, the training logs) into experiments/embedded_mnist_threat_models/runs/ (the
# trainings' into runs/train/), one report per norm made from that copy (report/<norm>/), and the attack's cost
# against certification's (report/attack_cost.txt).
#
# One process at a time, each on one thread (OMP_NUM_THREADS=1, nice): about 3 core-hours on this project's CPU,
# most of it SmoothAdv's training (about 50 minutes per seed on a shared core). Rerunning skips every finished run
# and resumes a stopped one.
# Settings, from the environment:
#   SWEEP=multirun/embedded_mnist_threat_models   where the runs go (train/, runs/<norm>/)
#   SEEDS="0 1 2"  IMAGES=100  ATTACK_IMAGES=100  SIGMA=0.5  EXPERIMENT=mnist_study  BENCH_IMAGES=10
#   COMMIT=experiments/embedded_mnist_threat_models   where the records are copied (runs/) and the reports written
#                                                     (report/; "": in $SWEEP/report, from its runs)
# Extra arguments are Hydra overrides passed to every run (e.g. EXPERIMENT=smoke for a minutes-long check).
set -euo pipefail
SWEEP=${SWEEP:-multirun/embedded_mnist_threat_models}
SEEDS=${SEEDS:-"0 1 2"}
IMAGES=${IMAGES:-100}
ATTACK_IMAGES=${ATTACK_IMAGES:-100}
SIGMA=${SIGMA:-0.5}
EXPERIMENT=${EXPERIMENT:-mnist_study}
COMMIT=${COMMIT-experiments/embedded_mnist_threat_models}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

run() {  # run DIR OVERRIDES...: one rsbench run into DIR, skipped when it finished before
  local dir=$1
  shift
  if grep -qs '"completed"' "$dir/status.json"; then return 0; fi
  nice -n 10 python -m rsbench experiment="$EXPERIMENT" sigma="$SIGMA" hydra.run.dir="$dir" \
    trainer.enable_progress_bar=false "$@" "${EXTRA[@]}" >"$dir.log" 2>&1 || {
    echo "failed: $dir (log: $dir.log)" >&2
    return 1
  }
}

certify() {  # certify NORM METHOD NOISE SEED OVERRIDES...: a trained model certified for one threat model
  local norm=$1 method=$2 noise=$3 seed=$4
  shift 4
  local ckpt=$SWEEP/train/$method-$noise/seed$seed/checkpoints/best.ckpt
  mkdir -p "$SWEEP/runs/$norm/$method-$noise"
  run "$SWEEP/runs/$norm/$method-$noise/seed$seed" train=false ckpt_path="$ckpt" method="$method" noise="$noise" \
    seed="$seed" certify.norm="$norm" certify.max_images="$IMAGES" "$@"
}

EXTRA=("$@")
mkdir -p "$SWEEP/train"
for seed in $SEEDS; do
  for model in gaussian-gaussian smoothadv-gaussian gaussian-laplace gaussian-uniform; do  # 1. train (no certify)
    mkdir -p "$SWEEP/train/$model"
    run "$SWEEP/train/$model/seed$seed" method="${model%-*}" noise="${model#*-}" seed="$seed" test=false
  done
  # 2. certify each for its threat models; attack the l2 ones
  certify l2 gaussian gaussian "$seed" attack=smoothadv attack.max_images="$ATTACK_IMAGES"
  certify l2 smoothadv gaussian "$seed" attack=smoothadv attack.max_images="$ATTACK_IMAGES"
  certify l1 gaussian laplace "$seed"
  certify l1 gaussian uniform "$seed"
  certify l1 gaussian gaussian "$seed"
  certify linf gaussian gaussian "$seed"
done

# 3. the records, without checkpoints, copied where they are committed (COMMIT); the reports and the benchmark are made
# from that copy, so they name only its paths (with COMMIT="": from $SWEEP)
records=$SWEEP
if [[ -n $COMMIT ]]; then
  records=$COMMIT
  bash "$(dirname "$0")/../../tools/copy_records.sh" "$SWEEP/runs" "$records/runs"
  bash "$(dirname "$0")/../../tools/copy_records.sh" "$SWEEP/train" "$records/runs/train"
fi

# 4. one report per norm: l2 (SmoothAdv against Gaussian, with the attack), l1 (Laplace and uniform noise against
# Gaussian noise, paired on the same images), l-infinity (derived from l2)
python -m rsbench.report "$records/runs/l2" --baseline gaussian --radii 0 0.25 0.5 0.75 1 1.25 1.5 \
  --no-published --out "$records/report/l2"
python -m rsbench.report "$records/runs/l1" --baseline "$records/runs/l1/gaussian-gaussian/seed${SEEDS%% *}" \
  --radii 0 0.25 0.5 0.75 1 1.25 1.5 2 --no-published --out "$records/report/l1"
python -m rsbench.report "$records/runs/linf" --radii 0 0.01 0.02 0.03 0.04 0.05 --no-published \
  --out "$records/report/linf"

# 5. the attack's cost as a multiple of certification's, in one process (same images, same protocol)
python -m rsbench.bench.attack_cost --ckpt "$SWEEP/train/smoothadv-gaussian/seed${SEEDS%% *}/checkpoints/best.ckpt" \
  --images "${BENCH_IMAGES:-10}" | tee "$records/report/attack_cost.txt"
