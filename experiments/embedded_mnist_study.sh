#!/usr/bin/env bash
# The CPU-scale comparison of every l2 training method on the embedded MNIST subset, with seeds, in one command:
# Gaussian, Stability, Consistency, MACER, SmoothAdv, SmoothMix, SmoothMix + one-step adversary and CAT-RS (with its
# sigma=0.25 Gaussian teacher), at sigma 0.5 and 1.0, seeds 0, 1, 2, each with experiment=mnist_study (the 20-epoch
# LeNet recipe, certified on the first 300 test images with n0=100, n=10,000, alpha=0.001). It ends with the report:
# the paper table with intervals over images and mean ± sd over seeds, each method paired against Gaussian on the
# same images, the envelope over sigma, and the published MNIST numbers beside rsbench's (flagged: other data).
#
# Takes hours on 2 CPU cores (SmoothAdv costs ~40x a Gaussian epoch); on one GPU with PARALLEL=1, minutes.
# Settings, from the environment:
#   SWEEP=multirun/embedded_mnist_study  where everything goes: one sweep folder per method and sigma
#                          ($SWEEP/<method>/sigma<sigma>/<job>), the teacher, logs/ and report/
#   METHODS="gaussian stability consistency macer smoothadv smoothmix smoothmix_one_step catrs"
#   SIGMAS="0.5 1.0"  SEEDS=0,1,2  EXPERIMENT=mnist_study
#   PARALLEL=0             1: run every (method, sigma) sweep at once, each logging to $SWEEP/logs/ (for a GPU or a
#                          many-core machine; set OMP_NUM_THREADS so that the processes share the cores)
#   TEACHER=<checkpoint>   reuse a CAT-RS teacher instead of training one; TEACHER_SAMPLES=1000 votes per training
#                          image for its soft labels (the authors' 10,000 cost ~25 min here; at sigma 0.25 MNIST
#                          votes are nearly one-hot either way)
# Extra arguments are Hydra overrides passed to every run. Finished runs are kept when the command is run again
# (a stopped one resumes). A tiny end-to-end check of the script and the report:
#   EXPERIMENT=smoke METHODS="gaussian catrs" SEEDS=0,1 TEACHER_SAMPLES=16 bash experiments/embedded_mnist_study.sh
set -euo pipefail
SWEEP=${SWEEP:-multirun/embedded_mnist_study}
METHODS=${METHODS:-"gaussian stability consistency macer smoothadv smoothmix smoothmix_one_step catrs"}
SIGMAS=${SIGMAS:-"0.5 1.0"}
SEEDS=${SEEDS:-0,1,2}
EXPERIMENT=${EXPERIMENT:-mnist_study}
PARALLEL=${PARALLEL:-0}
TEACHER=${TEACHER:-}
TEACHER_SAMPLES=${TEACHER_SAMPLES:-1000}

if [[ " $METHODS " == *" catrs "* && -z "$TEACHER" ]]; then
  python -m rsbench experiment="$EXPERIMENT" method=gaussian sigma=0.25 test=false \
    hydra.run.dir="$SWEEP/teacher_gaussian_s025" "$@"
  TEACHER="$SWEEP/teacher_gaussian_s025/checkpoints/best.ckpt"
fi

sweep() {  # one method at one sigma, every seed: sweep METHOD SIGMA [overrides...]
  local method=$1 sigma=$2 args
  shift 2
  case $method in
    smoothmix_one_step) args=(method=smoothmix method.one_step=true) ;;
    catrs) args=(method=catrs method.teacher_ckpt="$TEACHER" method.teacher_num_samples="$TEACHER_SAMPLES") ;;
    *) args=(method="$method") ;;
  esac
  python -m rsbench -m experiment="$EXPERIMENT" "${args[@]}" sigma="$sigma" seed="$SEEDS" \
    hydra.sweep.dir="$SWEEP/$method/sigma$sigma" "$@"
}

if [[ $PARALLEL == 1 ]]; then mkdir -p "$SWEEP/logs"; fi
pids=()
for method in $METHODS; do
  for sigma in ${SIGMAS//,/ }; do
    if [[ $PARALLEL == 1 ]]; then
      sweep "$method" "$sigma" "$@" >"$SWEEP/logs/${method}_sigma$sigma.log" 2>&1 &
      pids+=("$!")
    else
      sweep "$method" "$sigma" "$@"
    fi
  done
done
failed=0
for pid in ${pids[@]+"${pids[@]}"}; do wait "$pid" || failed=1; done
if [[ $failed == 1 ]]; then
  echo "some sweeps failed: see $SWEEP/logs/ (rerun the command to finish them)" >&2
  exit 1
fi

report_args=()
for arg in "$@"; do
  if [[ $arg == logger=*wandb* ]]; then report_args=(--wandb); fi  # the table as a W&B table too
done
python -m rsbench.report "$SWEEP" --baseline gaussian --radii 0 0.5 1 1.5 2 2.5 --out "$SWEEP/report" \
  ${report_args[@]+"${report_args[@]}"}
