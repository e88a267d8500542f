#!/usr/bin/env bash
# The CPU-scale comparison of every l2 training method on the embedded MNIST subset, with seeds, in one command:
# Gaussian, Stability, Consistency, MACER, SmoothAdv, SmoothMix, SmoothMix + one-step adversary, CAT-RS (with its
# sigma=0.25 Gaussian teacher) and DDRS (DS^2 around Gaussian, certified at the fixed sigma: sound), at sigma 0.5 and
# 1.0, seeds 0, 1, 2, each with experiment=mnist_study (the 20-epoch LeNet recipe, certified on the first 300 test
# images with n0=100, n=10,000, alpha=0.001). It ends with the report: the paper table with intervals over images and
# mean ± sd over seeds, each method paired against Gaussian on the same images, the envelope over sigma, and the
# published MNIST numbers beside rsbench's (flagged: other data). The committed records, report and notes:
# experiments/embedded_mnist_study/ (runs/, report/, NOTES.md).
#
# Takes hours on 2 CPU cores (one core per run, certification included: Gaussian ~6 min, MACER and CAT-RS ~12,
# SmoothMix ~20, SmoothAdv more); the 54 runs took 9 minutes of one H200 with one process per run (PARALLEL=runs).
# Settings, from the environment:
#   SWEEP=multirun/embedded_mnist_study  where everything goes: one sweep folder per method and sigma
#                          ($SWEEP/<method>/sigma<sigma>/<job>), the teacher, logs/ and report/
#   METHODS="gaussian stability consistency macer smoothadv smoothmix smoothmix_one_step catrs ddrs"
#   SIGMAS="0.5 1.0"  SEEDS=0,1,2  EXPERIMENT=mnist_study
#   PARALLEL=0             1: run every (method, sigma) sweep at once, each logging to $SWEEP/logs/ (for a GPU or a
#                          many-core machine; set OMP_NUM_THREADS so that the processes share the cores); runs: every
#                          run at once, one process per seed (the same job folders; how the committed report was made)
#   TEACHER=<checkpoint>   reuse a CAT-RS teacher instead of training one; TEACHER_SAMPLES=1000 votes per training
#                          image for its soft labels (the authors' 10,000 cost ~25 min here; at sigma 0.25 MNIST
#                          votes are nearly one-hot either way)
# Extra arguments are Hydra overrides passed to every run. Finished runs are kept when the command is run again
# (a stopped one resumes). A tiny end-to-end check of the script and the report:
#   EXPERIMENT=smoke METHODS="gaussian catrs" SEEDS=0,1 TEACHER_SAMPLES=16 bash experiments/embedded_mnist_study/run.sh
set -euo pipefail
SWEEP=${SWEEP:-multirun/embedded_mnist_study}
METHODS=${METHODS:-"gaussian stability consistency macer smoothadv smoothmix smoothmix_one_step catrs ddrs"}
SIGMAS=${SIGMAS:-"0.5 1.0"}
SEEDS=${SEEDS:-0,1,2}
EXPERIMENT=${EXPERIMENT:-mnist_study}
PARALLEL=${PARALLEL:-0}
if [[ ! $PARALLEL =~ ^(0|1|runs)$ ]]; then
  echo "PARALLEL=$PARALLEL: use 0 (one sweep after another), 1 (every sweep at once) or runs (every run at once)" >&2
  exit 2
fi
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
  local common=(experiment="$EXPERIMENT" "${args[@]}" sigma="$sigma" hydra.sweep.dir="$SWEEP/$method/sigma$sigma")
  if [[ $PARALLEL != runs ]]; then
    python -m rsbench -m "${common[@]}" seed="$SEEDS" "$@"
    return
  fi
  # One process per seed into the same sweep folder, each job in the folder the whole sweep gives it (job number k)
  local k=0 seed pids=() failed=0
  for seed in ${SEEDS//,/ }; do
    python -m rsbench -m "${common[@]}" seed="$seed" "hydra.sweep.subdir='\${rs.job_dir:$k,\${hydra.overrides.task}}'" \
      "$@" >"$SWEEP/logs/${method}_sigma${sigma}_seed$seed.log" 2>&1 &
    pids+=("$!")
    k=$((k + 1))
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  return "$failed"
}

if [[ $PARALLEL != 0 ]]; then mkdir -p "$SWEEP/logs"; fi
pids=()
for method in $METHODS; do
  for sigma in ${SIGMAS//,/ }; do
    if [[ $PARALLEL != 0 ]]; then
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
