#!/usr/bin/env bash
# Issue 19: which MACER lambda the CAT-RS authors' Fashion-MNIST runs at sigma 0.5 and 1.0 were trained with, read
# from their logs. Their train_macer.py defers lambda (lambda = 0 while epoch <= 30) and logs the classification loss
# each epoch; rsbench's MACER at lambda 16 / 6 (SmoothMix's MNIST values) and batch 64 tracked their log to epoch 30
# and collapsed after lambda switched on at epoch 31 (experiments/fashion_mnist_macer_lambda/NOTES.md),
# where theirs recovered. So each sigma's deferred epochs are trained once (the first 31: lambda plays no part in
# them) and each candidate lambda continues that checkpoint for EPOCHS more epochs; the classification loss of those
# epochs beside the authors' is the evidence (at sigma 0.25, where lambda 16 tracks their log, it jumps from 0.169 to
# 0.495 at epoch 31 against the authors' 0.172 to 0.525).
#   bash experiments/fashion_mnist_macer_lambda/run.sh <root> [Hydra overrides for every run, e.g. data_dir=...]
# SIGMAS="0.5 1.0", LAMBDAS="16 8 4 2 1", EPOCHS=3, PARALLEL=1 (lambda runs at once; on a GPU 4 or more),
# DEADLINE (seconds since the epoch; each run gets SIGTERM then, stops after the batch in flight and resumes from its
# last epoch when the script runs again). Runs that completed are kept; a cut one is continued (resume=).
# Cost: the deferred epochs are MACER's (16 noisy copies at batch 64): about 15 s an epoch on an H200 shared by four
# runs; lambda's epochs likewise. Ends with the comparison (tools/training_tracking.py). The root holds whole run
# folders (checkpoints, status.json, outputs): keep it outside git (experiments/*/partial/ is git-ignored) and copy
# the finished runs' records into experiments/fashion_mnist_macer_lambda/runs/ with tools/copy_records.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${1:?usage: bash experiments/fashion_mnist_macer_lambda/run.sh <root> [overrides]}
shift
deferred_epochs=31  # the authors' lambda is 0 for epochs 0..30 (epoch <= lr_step_size), on from 31
epochs=${EPOCHS:-3}
extra=("$@")  # the caller's overrides, also given when a cut run is continued (data_dir=, workers)
common=(dataset=fashion_mnist protocol=authors method=macer seed=0 certify=off test=false logger=csv
        trainer.enable_progress_bar=false)

state() {  # how the run in folder $1 ended, as its status.json says (nothing when it has none)
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["status"])' "$1/status.json" 2>/dev/null || true
}

train() {  # train() <folder> <overrides...>: a completed run is kept, a cut one continued, else started
  local folder=$1 runner=()
  shift
  [[ $(state "$folder") == completed ]] && return 0
  if [[ -n ${DEADLINE:-} ]]; then  # SIGTERM then to python alone: it stops after the batch in flight
    local left=$((DEADLINE - $(date +%s)))
    ((left > 0)) || { echo "$folder: not started (the deadline has passed)"; return 0; }
    runner=(timeout --foreground --kill-after=30 "$left")
  fi
  local settings=("${common[@]}" "$@" "${extra[@]}" hydra.run.dir="$folder")
  [[ -f $folder/.hydra/config.yaml ]] && settings=(resume="$folder" "${extra[@]}")
  "${runner[@]}" python3 -m rsbench "${settings[@]}" > "$folder.out" 2>&1 ||
    echo "$folder: stopped (exit status $?; $folder.out)"
}

mkdir -p "$root"
for sigma in ${SIGMAS:-0.5 1.0}; do  # the deferred epochs, each sigma's once (side by side when PARALLEL > 1)
  train "$root/sigma${sigma}_deferred" sigma="$sigma" trainer.max_epochs=$deferred_epochs &
  ((${PARALLEL:-1} > 1)) || wait
done
wait
for sigma in ${SIGMAS:-0.5 1.0}; do
  start=$root/sigma${sigma}_deferred
  [[ $(state "$start") == completed ]] || { echo "$start: not completed, no lambda run at sigma $sigma"; continue; }
  for lbd in ${LAMBDAS:-16 8 4 2 1}; do
    while (($(jobs -rp | wc -l) >= ${PARALLEL:-1})); do wait -n || true; done
    train "$root/sigma${sigma}_lbd${lbd}" sigma="$sigma" method.lbd="$lbd" \
      ckpt_path="$start/checkpoints/last.ckpt" trainer.max_epochs=$((deferred_epochs + epochs)) &
  done
done
wait
shopt -s nullglob
runs=()
for folder in "$root"/sigma*_lbd*/; do
  [[ $(state "$folder") == completed ]] && runs+=("$folder")
done
((${#runs[@]})) || { echo "no lambda run completed in $root"; exit 1; }
# shellcheck disable=SC2046  # one argument per epoch
python3 "$here/../../tools/training_tracking.py" "${runs[@]}" \
  --epochs $(seq $deferred_epochs $((deferred_epochs + epochs - 1)))
