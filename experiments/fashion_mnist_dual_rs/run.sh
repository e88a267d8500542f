#!/usr/bin/env bash
# Dual randomized smoothing on Fashion-MNIST at paper scale (docs/dual_smoothing.md), every step resumable:
#   bash experiments/fashion_mnist_dual_rs/run.sh            # into $OUT (default multirun/fashion_mnist_dual_rs)
# 1. Gaussian experts at sigma 0.25 / 0.5 / 1.0 with the authors' recipe (LeNet, 90 epochs, all 60,000 training
#    images, protocol=authors), one after another; skipped where the study shares the expert's weights in models/
#    (TRAIN=1 trains them anyway);
# 2. each expert certified on the every-20th test image (500 images) with sequential CERTIFY (its default design, at
#    most n = 100,000 estimation samples, n0 = 100, alpha = 0.001: the same guarantee as fixed-n CERTIFY at alpha, with
#    certified accuracy decided on the grid up to the radius cap 0.75 / 1.75 / 2.5);
# 3. router labels on every 3rd training image (each expert's CERTIFY at n0 = 16, n = 256, alpha = 0.001);
# 4. a LeNet router over the three sigmas, trained and smoothed at sigma 1.0 (the dataset's recipe);
# 5. dual certification of the same 500 images: the router at beta = 0.001 with the same sequential protocol, the
#    routed expert's certificate taken from step 2 (same seeds and protocol): each certificate at alpha + beta = 0.002;
# 6. DDRS (data-dependent sigma, NOT sound) on the sigma 0.5 expert, fixed n = 10,000;
# 6b. an ablation: the router trained and smoothed at sigma 0.5, dual-certified likewise;
# 7. two rounds of the iterative training, each certified likewise into $OUT/round<r> (below);
# 8. the reports: python experiments/fashion_mnist_dual_rs/compare.py <study> (--dual/--experts for 6b and each round).
# RECIPE=paper (the default) runs the dual RS paper's recipe as reported: method=router's defaults (soft labels, the
# images no expert certifies dropped, w_e = 1/q_i, the strong consistency term, AdamW) and the paper's budget,
# alpha = beta = 0.0005 (each certificate at 0.001), one round of iterative training, without steps 6 and 6b, into
# $OUT (default multirun/fashion_mnist_dual_rs_paper; committed under runs/paper). RECIPE=v1 is what the records
# directly under runs/ were made with: rsbench's earlier router (hard labels, cross-entropy, SGD) at alpha = beta =
# 0.001, two rounds.
# Data: Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist). Extra arguments go to every command.
set -euo pipefail
RECIPE=${RECIPE:-paper}
case "$RECIPE" in
  paper) OUT=${OUT:-multirun/fashion_mnist_dual_rs_paper}; SUB=/paper; ALPHA=0.0005; ROUNDS=${ROUNDS:-1} ;;
  v1) OUT=${OUT:-multirun/fashion_mnist_dual_rs}; SUB=""; ALPHA=0.001; ROUNDS=${ROUNDS:-2} ;;
  *) echo "run.sh: error: RECIPE=$RECIPE (allowed: paper, v1)" >&2; exit 2 ;;
esac
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
D="dataset=fashion_mnist data_dir=$DATA dataset.num_workers=0"
C="certify=sequential certify.n0=100 certify.n=100000 certify.alpha=$ALPHA certify.skip=20 certify.channels_last=true"
# The committed records were made before method=router followed the dual RS paper and before the dual budget became
# alpha = beta = 0.0005: these pin what they were made with (docs/dual_smoothing.md has the paper's recipe).
ROUTER_ARGS="method.labels=hard method.drop_uncertified=false method.rebalance=false method.consistency=none"
ROUTER_ARGS="$ROUTER_ARGS optimizer=sgd ~method_schedule"
BUDGET_ARGS="beta=0.001"
ROUTER_LIST=$(printf '"%s",' $ROUTER_ARGS)  # the same for stage=iterate's router: ["method.labels=hard",...]
ROUTER_LIST="[${ROUTER_LIST%,}]"
if [ "$RECIPE" = paper ]; then ROUTER_ARGS=""; BUDGET_ARGS=""; ROUTER_LIST="[]"; fi
done_run() { [ -f "$1/status.json" ] && grep -q '"completed"' "$1/status.json"; }
# an expert: the study's shared weights (models/gaussian_sigma<s>.ckpt, tools/share_model.py) unless this $OUT trains
# its own (TRAIN=1, or a training folder already there)
MODELS="$(cd "$(dirname "$0")" && pwd)/models"
shared() { [ -z "${TRAIN:-}" ] && [ ! -d "$OUT/train_sigma$1" ] && [ -f "$MODELS/gaussian_sigma$1.ckpt" ]; }
expert() {
  if shared "$1"; then echo "$MODELS/gaussian_sigma$1.ckpt"; else echo "$OUT/train_sigma$1/checkpoints/last.ckpt"; fi
}
for s in 0.25 0.5 1.0; do
  if ! shared $s && ! done_run "$OUT/train_sigma$s"; then
    if [ -d "$OUT/train_sigma$s/.hydra" ]; then python -m rsbench resume="$OUT/train_sigma$s" "$@"
    else python -m rsbench $D protocol=authors method=gaussian sigma=$s seed=0 certify=off \
      trainer.enable_progress_bar=false hydra.run.dir="$OUT/train_sigma$s" "$@"; fi
  fi
done
# an expert's certification: the study's committed records (runs/expert_sigma<s>) for a shared expert, else $OUT's
RUNS="$(dirname "$MODELS")/runs$SUB"
records() {
  if shared "$1" && [ -f "$RUNS/expert_sigma$1/metrics.json" ]; then echo "$RUNS/expert_sigma$1"
  else echo "$OUT/expert_sigma$1"; fi
}
for s in 0.25 0.5 1.0; do
  [ -f "$(records $s)/metrics.json" ] || python -m rsbench.certify \
    model.path="$(expert $s)" $D $C hydra.run.dir="$OUT/expert_sigma$s" "$@"
done
E="experts=[$(expert 0.25),$(expert 0.5),$(expert 1.0)]"
R="expert_records=[$(records 0.25),$(records 0.5),$(records 1.0)]"
[ -f "$OUT/labels/router_labels.pt" ] || python -m rsbench.dual stage=labels $D "$E" labels.skip=3 labels.n0=16 \
  labels.n=256 certify.channels_last=true hydra.run.dir="$OUT/labels" "$@"
done_run "$OUT/router" || python -m rsbench method=router method.labels_file="$OUT/labels/router_labels.pt" \
  $ROUTER_ARGS arch.num_classes=3 sigma=1.0 seed=0 $D protocol=authors test=false trainer.enable_progress_bar=false \
  hydra.run.dir="$OUT/router" "$@"
[ -f "$OUT/dual_rs/metrics.json" ] || python -m rsbench.dual stage=certify $D $BUDGET_ARGS \
  router.path="$OUT/router/checkpoints/last.ckpt" "$E" "$R" $C hydra.run.dir="$OUT/dual_rs" "$@"
# 5b. RECIPE=paper: the paper's recipe at AdamW lr 0.001 (its 0.01 leaves the LeNet router at the best constant output
#     after its first steps: NOTES.md), trained and dual-certified like steps 4 and 5 into $OUT/router_lr0.001 and
#     $OUT/dual_rs_lr0.001
if [ "$RECIPE" = paper ]; then
  done_run "$OUT/router_lr0.001" || python -m rsbench method=router method.labels_file="$OUT/labels/router_labels.pt" \
    optimizer.lr=0.001 arch.num_classes=3 sigma=1.0 seed=0 $D protocol=authors test=false \
    trainer.enable_progress_bar=false hydra.run.dir="$OUT/router_lr0.001" "$@"
  [ -f "$OUT/dual_rs_lr0.001/metrics.json" ] || python -m rsbench.dual stage=certify $D \
    router.path="$OUT/router_lr0.001/checkpoints/last.ckpt" "$E" "$R" $C hydra.run.dir="$OUT/dual_rs_lr0.001" "$@"
fi
[ "$RECIPE" = paper ] || [ -f "$OUT/ddrs_sigma0.5/metrics.json" ] || python -m rsbench.certify \
  model.path="$(expert 0.5)" $D certify.n0=100 certify.n=10000 certify.alpha=0.001 \
  certify.skip=20 certify.channels_last=true certify.sigma_mode=data_dependent hydra.run.dir="$OUT/ddrs_sigma0.5" "$@"
# 6b. an ablation of the router's noise: a router trained and smoothed at sigma 0.5 (step 4's labels), dual-certified
#     like step 5 into $OUT/dual_rs_router0.5
[ "$RECIPE" = paper ] || done_run "$OUT/router_sigma0.5" || python -m rsbench method=router method.labels_file="$OUT/labels/router_labels.pt" \
  $ROUTER_ARGS arch.num_classes=3 sigma=0.5 seed=0 $D protocol=authors test=false trainer.enable_progress_bar=false \
  hydra.run.dir="$OUT/router_sigma0.5" "$@"
[ "$RECIPE" = paper ] || [ -f "$OUT/dual_rs_router0.5/metrics.json" ] || python -m rsbench.dual stage=certify $D $BUDGET_ARGS \
  router.path="$OUT/router_sigma0.5/checkpoints/last.ckpt" "$E" "$R" $C hydra.run.dir="$OUT/dual_rs_router0.5" "$@"
# 7. ROUNDS (RECIPE=paper: 1, v1: 2) rounds of the iterative training (docs/dual_smoothing.md; rsbench's reading of the paper), in
#    $OUT/iterate/round<r>: labels from the current experts (round 1: step 3's), a router trained on them (round 1:
#    step 4's), its smoothed vote (100 noisy copies) routing every 3rd training image, and each expert fine-tuned on
#    the images routed to it (10 epochs, lr 0.001). After each round its experts are certified as in step 2 and
#    dual-certified with its router, into $OUT/round<r>.
I="$OUT/iterate"
mkdir -p "$I/round1"
ln -sfn "$(realpath -m "$OUT/labels")" "$I/round1/labels"
ln -sfn "$(realpath -m "$OUT/router")" "$I/round1/router"
grep -qs "round$ROUNDS/router" "$I/iterate.json" || python -m rsbench.dual stage=iterate $D "$E" \
  iterate.rounds=$ROUNDS labels.skip=3 labels.n0=16 labels.n=256 route.skip=3 certify.channels_last=true \
  'iterate.expert_overrides=["trainer.max_epochs=10","optimizer.lr=0.001"]' "iterate.router_overrides=$ROUTER_LIST" \
  hydra.run.dir="$I" "$@"
SIGMAS=(0.25 0.5 1.0)
last=("$(expert 0.25)" "$(expert 0.5)" "$(expert 1.0)")
for r in $(seq 1 "$ROUNDS"); do
  tuned=()  # round r's experts: the fine-tuned weights (an expert no image was routed to keeps the last ones)
  for k in 0 1 2; do
    if [ -d "$I/round$r/expert$k" ]; then tuned[k]="$I/round$r/expert$k/checkpoints/last.ckpt"
    else tuned[k]=${last[$k]}; fi
  done
  for k in 0 1 2; do
    s=${SIGMAS[$k]}
    [ -f "$OUT/round$r/expert_sigma$s/metrics.json" ] || python -m rsbench.certify model.path="${tuned[$k]}" $D $C \
      hydra.run.dir="$OUT/round$r/expert_sigma$s" "$@"
  done
  [ -f "$OUT/round$r/dual_rs/metrics.json" ] || python -m rsbench.dual stage=certify $D $BUDGET_ARGS \
    router.path="$I/round$r/router/checkpoints/last.ckpt" "experts=[${tuned[0]},${tuned[1]},${tuned[2]}]" \
    "expert_records=[$OUT/round$r/expert_sigma0.25,$OUT/round$r/expert_sigma0.5,$OUT/round$r/expert_sigma1.0]" $C \
    hydra.run.dir="$OUT/round$r/dual_rs" "$@"
  last=("${tuned[@]}")
done
