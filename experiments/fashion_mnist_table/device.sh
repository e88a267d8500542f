#!/usr/bin/env bash
# Fashion-MNIST cells of experiments/fashion_mnist_table/run.sh on a lent GPU machine (the `device` tool: torch,
# Lightning, scipy and pandas there, but no Hydra and no package registry; 15 minutes of device time in all, at most
# 10 minutes a command). Three steps:
#   bash experiments/fashion_mnist_table/device.sh pack
#       here: the wheels rsbench needs beyond that machine's packages (hydra-core, omegaconf, antlr4 runtime, at the
#       versions installed in the environment of PYTHON, default python) and the four Fashion-MNIST idx files of
#       Debian's dataset-fashion-mnist, into .device/ (git-ignored; 30 MB); every cut cell under PARTIAL (below)
#       whose records are not in RUNS yet, into .device/partial/ (its run folder without W&B files; about 4 MB); and
#       with MACER_LAMBDA=1 only, the MACER lambda runs under LAMBDA_ROOT (below), if any, into .device/macer_lambda/
#       (both lambdas are measured, so by default nothing of them travels)
#   run(command="bash experiments/fashion_mnist_table/device.sh run", carry=[".device"], timeout_s=560)
#       there: the cut cells of .device/partial/ first, each continued where it stopped (`resume=`), then each cell of
#       CELLS in turn (protocol=authors, seed 0 unless the cell names one, every 20th test image, n0=100,
#       n=100,000, alpha=0.001: fashion_mnist_table.sh's settings; fp32, the default trainer, on the GPU), while at
#       least CELL_MIN_S seconds of BUDGET_S are left; each finished cell's records (tools/copy_records.sh: no
#       checkpoints) as $OUT/<method>_sigma<s>[_seed<k>].tgz, and $OUT/device.log with the versions and each cell's
#       seconds. A cell whose run folder is already on the machine (a second call while it is warm) is continued too.
#   bash experiments/fashion_mnist_table/device.sh unpack <files_at>
#       here: each tarball into experiments/fashion_mnist_table/runs/<method>_sigma<s>[_seed<k>]/; then remake the
#       report (its command in experiments/fashion_mnist_table/card.yaml; a cell's seeds make one row, their spread
#       beside the interval over images)
# Settings, from the environment (run): CELLS="smoothmix:0.5 smoothadv:0.25" (method:sigma, or method:sigma:seed for a
# seed other than 0, whose run folder is <method>_sigma<s>_seed<k>; after the cut cells pack carried, which run
# first), BUDGET_S=540,
# CELL_MIN_S=240, PARALLEL=4 (cells run at once on the one GPU, a cell starting when a slot frees: LeNet leaves the
# GPU idle between one process's kernel launches; four Consistency cells at once took 6 s an epoch each on an H200,
# one alone about 10 on the authors' GPU), WORKERS=2 (each cell's loader processes), OMP_NUM_THREADS=2,
# EXTRA="" (more Hydra overrides for every cell), WHEELS=.device/wheels,
# DATA=.device/fashion-mnist and CARRIED=.device/partial (as pack writes them).
# Measured on an H200 (2026-11-27, torch 2.11): a Stability cell in 298 s, about 3 s per training epoch (the authors'
# logs: 2.98-3.33 s on their GPU) and 15 s to certify its 500 images at n = 100,000 (0.03 s per image).
# A cell cut by the budget (or failing) returns its run folder as $OUT/<method>_sigma<s>.partial.tgz (checkpoints,
# rows so far and the cell's output; the machine starts bare each time; one file per cell, as the device returns at
# most 8 files a call), which unpack puts under PARTIAL (default experiments/fashion_mnist_table/partial, git-ignored)
# and saves into runs/<cell>/ (tools/cell_state.py save: what git carries to the next session, with the cell marked
# in_progress in card.yaml), with the command that continues it here: its training from the last epoch's checkpoint,
# its certification after the last row (the accelerator and data folder may change on resume). pack carries every
# cell whose resumable state is committed under runs/ (checkpoints/last.ckpt without metrics.json) to the device first.
# MACER_LAMBDA=1 (run): experiments/fashion_mnist_macer_lambda/run.sh beside the cells, in one of the PARALLEL slots (its
# own runs MACER_LAMBDA_PARALLEL=5 at once, within the budget; MACER_LAMBDA_EXTRA: more overrides for them), in
# /tmp/rsbench_macer_lambda (MACER_LAMBDA_ROOT), continuing the runs pack carried (LAMBDA_CARRIED=.device/macer_lambda);
# it comes back as $OUT/macer_lambda.tgz (the lambda runs' checkpoints left out: a cut one restarts from its sigma's
# deferred checkpoint) and $OUT/macer_lambda.log, which unpack puts in LAMBDA_ROOT (default
# experiments/fashion_mnist_macer_lambda/partial, git-ignored; the finished runs' records go to its runs/ with
# tools/copy_records.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
step=${1:-}

pack() {
  local wheels=.device/wheels data=.device/fashion-mnist source=/usr/share/datasets/fashion-mnist
  mkdir -p "$wheels" "$data"
  local pinned hydra omegaconf antlr  # the versions installed here, which the tests ran with
  pinned=$("${PYTHON:-python}" -c "from importlib.metadata import version as v
print(*(f'{name}=={v(name)}' for name in ('hydra-core', 'omegaconf', 'antlr4-python3-runtime')))")
  read -r hydra omegaconf antlr <<< "$pinned"
  "${PYTHON:-python}" -m pip download -q --no-deps --only-binary=:all: -d "$wheels" "$hydra" "$omegaconf"
  "${PYTHON:-python}" -m pip wheel -q --no-deps -w "$wheels" "$antlr"  # published as a source archive only
  for name in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    if [[ ! -f $source/$name.gz ]]; then
      echo "no $source/$name.gz: apt-get install dataset-fashion-mnist" >&2
      exit 2
    fi
    cp "$source/$name.gz" "$data/"
  done
  local partial=${PARTIAL:-experiments/fashion_mnist_table/partial} runs=${RUNS:-experiments/fashion_mnist_table/runs}
  local lambdas=${LAMBDA_ROOT:-experiments/fashion_mnist_macer_lambda/partial}
  rm -rf .device/partial .device/macer_lambda
  if [[ -n ${MACER_LAMBDA:-} && -d $lambdas ]]; then  # the lambda runs so far, for MACER_LAMBDA=1 (checkpoints too)
    mkdir -p .device/macer_lambda
    tar cf - --exclude=./wandb -C "$lambdas" . | tar xf - -C .device/macer_lambda
    echo "continues on the device with MACER_LAMBDA=1: $lambdas"
  fi
  shopt -s nullglob
  local name
  for folder in "$runs"/*_sigma*/; do  # the cells carried in git (card state in_progress), unless finished since
    name=$(basename "$folder")
    [[ -f $folder/checkpoints/last.ckpt && ! -f $folder/metrics.json ]] || continue
    "${PYTHON:-python}" tools/cell_state.py restore "$folder" ".device/partial/$name" > /dev/null
    echo "continues on the device (from its committed state): $name"
  done
  for folder in "$partial"/*_sigma*/; do  # the cut cells to continue on the device, unless finished since
    name=$(basename "$folder")
    [[ -f $runs/$name/metrics.json || -d .device/partial/$name ]] && continue
    mkdir -p ".device/partial/$name"
    tar cf - --exclude=./wandb -C "$folder" . | tar xf - -C ".device/partial/$name"
    echo "continues on the device: $name"
  done
  du -sh .device
}

run() {
  : "${OUT:?run is for the device machine, which sets OUT}"
  local wheels=${WHEELS-.device/wheels} data=${DATA:-.device/fashion-mnist} started=$SECONDS
  local budget=${BUDGET_S:-540} minimum=${CELL_MIN_S:-240}
  local cells=${CELLS-"smoothmix:0.5 smoothadv:0.25"} carried=${CARRIED:-.device/partial}
  local log=$OUT/device.log runs=${RUNS:-/tmp/rsbench_device_runs} folder cut=""
  shopt -s nullglob
  for folder in "$carried"/*_sigma*/; do  # the cut cells pack carried, first
    cut+="$(cell_of "$(basename "$folder")") "
  done
  cells=$(printf '%s\n' $cut $cells | awk '!seen[$0]++' | tr '\n' ' ')  # each cell once, the cut ones first
  if [[ -n $wheels ]]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      "$wheels"/*.whl
    export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
  fi
  export PYTHONUNBUFFERED=1 WANDB_MODE=offline OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
  python3 -c "import sys, torch, pytorch_lightning as pl, hydra; print('python', sys.version.split()[0], 'torch', \
torch.__version__, 'lightning', pl.__version__, 'hydra', hydra.__version__, 'cuda', torch.cuda.is_available() and \
torch.cuda.get_device_name(0))" | tee "$log"
  local parallel=${PARALLEL:-4} cell left
  if [[ -n ${MACER_LAMBDA:-} ]]; then  # beside the cells, in one of their slots (a background job like them)
    macer_lambda "$budget" &
  fi
  for cell in $cells; do
    while (($(jobs -rp | wc -l) >= parallel)); do  # every slot busy: until one of the cells in flight ends
      wait -n || true
    done
    left=$((budget - (SECONDS - started)))
    if ((left < minimum)); then
      echo "$(cell_label "$cell"): not started ($left s of the budget left, $minimum needed)" | tee -a "$log"
      continue
    fi
    if ((parallel == 1)); then
      run_cell "$cell" "$left"
    else  # the cells share the GPU: small networks leave it idle between one process's kernel launches
      run_cell "$cell" "$left" &
    fi
  done
  wait
}

cell_of() {  # a run folder's name, <method>_sigma<s>[_seed<k>], as the cell it runs: method:sigma[:seed]
  local name=$1 seed=""
  if [[ $name == *_seed* ]]; then
    seed=":${name##*_seed}" name=${name%_seed*}
  fi
  echo "${name%_sigma*}:${name##*_sigma}$seed"
}

cell_parts() {  # a cell (method:sigma[:seed]) as "method sigma seed", seed 0 when it names none
  local rest=${1#*:} seed=0
  [[ $rest == *:* ]] && seed=${rest#*:}
  echo "${1%%:*} ${rest%%:*} $seed"
}

cell_label() {  # a cell as the log says it: "method sigma s", with " seed k" unless seed 0
  local method sigma seed
  read -r method sigma seed <<< "$(cell_parts "$1")"
  echo "$method sigma $sigma$([[ $seed == 0 ]] || echo " seed $seed")"
}

run_cell() {  # one cell (method:sigma[:seed]) within $2 seconds, in runs/<method>_sigma<s>[_seed<k>]/; its records or
  # run folder to OUT
  local method sigma seed left=$2 label
  read -r method sigma seed <<< "$(cell_parts "$1")"
  label=$(cell_label "$1")
  local name=${method}_sigma$sigma$([[ $seed == 0 ]] || echo "_seed$seed") begin=$SECONDS
  if [[ ! -d $runs/$name && -d $carried/$name ]]; then
    mkdir -p "$runs" && cp -r "$carried/$name" "$runs/$name"
  fi
  local settings=(dataset=fashion_mnist protocol=authors method="$method" sigma="$sigma" seed="$seed" certify.n0=100
    certify.n=100000 certify.alpha=0.001 certify.skip=20 certify.batch_size=10000 hydra.run.dir="$runs/$name")
  if [[ -f $runs/$name/.hydra/config.yaml ]]; then  # cut earlier: training from its last checkpoint, rows kept
    settings=(resume="$runs/$name")
    echo "$label: continuing $runs/$name" | tee -a "$log"
  fi
  # At the budget, SIGTERM to rsbench alone (--foreground: not to its loader processes, which would crash it):
  # training stops after the batch in flight, certification after the image in flight; SIGKILL 30 s later.
  local status=0 started
  started=$(mktemp)  # a status.json older than this is an earlier attempt's
  # shellcheck disable=SC2086  # EXTRA is a list of overrides
  timeout --foreground --kill-after=30 "$left" python3 -m rsbench "${settings[@]}" data_dir="$data" \
    dataset.num_workers="${WORKERS:-2}" trainer.enable_progress_bar=false ${EXTRA:-} > "$OUT/$name.out" 2>&1 ||
    status=$?
  local finished=""
  if ((status != 0)) && [[ $runs/$name/status.json -nt $started && $(run_state "$runs/$name") == completed ]]; then
    finished=" (its status.json says completed; exit status $status as it exited)" status=0  # signalled at its exit
  fi
  rm -f "$started"
  if ((status == 0)); then
    bash "$here/../../tools/copy_records.sh" "$runs/$name" "/tmp/records/$name"
    tar czf "$OUT/$name.tgz" -C "/tmp/records/$name" .
    rm "$OUT/$name.out"
    echo "$label: done in $((SECONDS - begin)) s$finished" | tee -a "$log"
  else
    local kept="its output: $name.out"
    if [[ -d $runs/$name ]]; then  # what it had done, resumable elsewhere (checkpoints included, W&B files not)
      # One file per cell (the device returns at most 8): its output goes into the archive, beside the run folder.
      tar czf "$OUT/$name.partial.tgz" --exclude=./wandb -C "$runs/$name" . -C "$OUT" "$name.out"
      rm "$OUT/$name.out"
      kept="what it had done and its output ($name.out): $name.partial.tgz"
    fi
    local what="failed (exit status $status)"
    if ((status == 124 || status == 137)); then  # timeout's: the budget ran out (137: killed 30 s after that)
      what="cut by the budget"
    fi
    echo "$label: $what after $((SECONDS - begin)) s ($kept)" | tee -a "$log"
  fi
}

macer_lambda() {  # experiments/fashion_mnist_macer_lambda/run.sh within $1 seconds; its runs to OUT as one archive
  local probe=${MACER_LAMBDA_ROOT:-/tmp/rsbench_macer_lambda} carried=${LAMBDA_CARRIED:-.device/macer_lambda}
  if [[ ! -d $probe && -d $carried ]]; then  # what pack carried, on a fresh machine
    mkdir -p "$probe" && cp -r "$carried/." "$probe/"
  fi
  # shellcheck disable=SC2086  # MACER_LAMBDA_EXTRA is a list of overrides
  DEADLINE=$(($(date +%s) + $1 - 45)) PARALLEL=${MACER_LAMBDA_PARALLEL:-5} \
    bash "$here/../fashion_mnist_macer_lambda/run.sh" "$probe" data_dir="$data" dataset.num_workers=1 ${MACER_LAMBDA_EXTRA:-} \
    > "$OUT/macer_lambda.log" 2>&1 || echo "MACER lambda: exit status $? (macer_lambda.log)" | tee -a "$log"
  tar czf "$OUT/macer_lambda.tgz" --exclude='./sigma*_lbd*/checkpoints' --exclude='*/wandb' -C "$probe" .
  local folder done=0 all=0
  for folder in "$probe"/sigma*_lbd*/; do
    all=$((all + 1))
    [[ $(run_state "$folder") == completed ]] && done=$((done + 1))
  done
  echo "MACER lambda: $done of $all lambda runs completed (macer_lambda.log)" | tee -a "$log"
}

run_state() {  # how the run in folder $1 ended, as its status.json says (nothing when it has none)
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["status"])' "$1/status.json" 2>/dev/null || true
}

unpack() {
  local from=${1:?usage: bash experiments/fashion_mnist_table/device.sh unpack <folder holding the .tgz files>}
  local runs=${RUNS:-experiments/fashion_mnist_table/runs} partial=${PARTIAL:-experiments/fashion_mnist_table/partial}
  local lambdas=${LAMBDA_ROOT:-experiments/fashion_mnist_macer_lambda/partial}
  shopt -s nullglob
  local archives=("$from"/*_sigma*.tgz)
  if [[ -f $from/macer_lambda.tgz ]]; then  # the MACER lambda runs (MACER_LAMBDA=1), whole: they replace those here
    rm -rf "$lambdas" && mkdir -p "$lambdas" && tar xzf "$from/macer_lambda.tgz" -C "$lambdas"
    cp "$from/macer_lambda.log" "$lambdas/device.log" 2>/dev/null || true
    echo "$lambdas (continue or summarise it with: bash experiments/fashion_mnist_macer_lambda/run.sh $lambdas" \
      "data_dir=<the four idx files> dataset.num_workers=0)"
  fi
  if ((${#archives[@]} == 0)); then
    [[ -f $from/macer_lambda.tgz ]] && return 0
    echo "no <method>_sigma<s>.tgz in $from" >&2
    exit 2
  fi
  for archive in "${archives[@]}"; do
    local name
    name=$(basename "$archive" .tgz)
    if [[ $name == *.partial ]]; then  # a cut cell: a run folder to resume here, not records to commit
      name=${name%.partial}
      mkdir -p "$partial/$name"
      tar xzf "$archive" -C "$partial/$name"
      "${PYTHON:-python}" tools/cell_state.py save "$partial/$name" "$runs/$name" > /dev/null  # kept in git too
      echo "$partial/$name (cut on the device; its state also in $runs/$name: mark the cell in_progress in the" \
        "card; continue it with: python -m rsbench resume=$partial/$name data_dir=<the four idx files>" \
        "dataset.num_workers=0)"
      continue
    fi
    mkdir -p "$runs/$name"
    tar xzf "$archive" -C "$runs/$name"
    echo "$runs/$name"
  done
}

case $step in
  pack) pack ;;
  run) run ;;
  unpack) unpack "${2:-}" ;;
  *)
    echo "usage: bash experiments/fashion_mnist_table/device.sh pack | run | unpack <folder> (got: ${step:-nothing})" >&2
    exit 2
    ;;
esac
