#!/usr/bin/env bash
# The dual RS paper's router recipe, piece by piece, on the embedded MNIST (experiment=mnist_study's LeNet experts),
# every step resumable:   bash experiments/embedded_mnist_dual_rs/ablation.sh   # into $OUT
# 1. Gaussian experts at sigma 0.25 / 0.5 / 1.0 (experiment=mnist_study: LeNet, 20 epochs, seed 0), each certified on
#    the first $IMAGES test images with sequential CERTIFY (betting, n0 = 100, at most n = 10,000) at alpha = 0.0005;
# 2. router labels on every 4th training image (each expert's CERTIFY at n0 = 16, n = 256), as run.sh's;
# 3. for each variant and router seed ($SEEDS), a LeNet router at sigma 1.0 (method=router, the paper's AdamW schedule:
#    90 epochs, batch 256) and its dual certification of the same images at beta = 0.0005 (the experts' records
#    reused: each certificate at alpha + beta = 0.001, the paper's total), into $OUT/<variant>/seed<k>/;
#    variants: paper (method=router's defaults: soft labels, uncertified images dropped, w_e = 1/q_i, strong
#    consistency), each piece off alone (hard, keep, unweighted, no_consistency), v1 (every piece off and the
#    dataset's SGD recipe: rsbench's earlier router), and lr0.001 (the paper's recipe at AdamW lr 0.001: at the
#    paper's 0.01 the LeNet router's first steps leave it at the best constant output, see NOTES.md);
# 4. the table: python experiments/embedded_mnist_dual_rs/ablation.py $OUT > experiments/embedded_mnist_dual_rs/report/ablation.md
set -euo pipefail
OUT=${OUT:-multirun/embedded_mnist_dual_rs_ablation}
IMAGES=${IMAGES:-150}
SEEDS=${SEEDS:-"0 1 2"}
VARIANTS=${VARIANTS:-"paper hard keep unweighted no_consistency v1 lr0.001"}
C="certify=sequential certify.design=betting certify.n0=100 certify.n=10000 certify.alpha=0.0005 certify.skip=1"
C="$C certify.max_images=$IMAGES"
done_run() { [ -f "$1/status.json" ] && grep -q '"completed"' "$1/status.json"; }
variant_args() {
  case "$1" in
    paper) echo "" ;;
    hard) echo "method.labels=hard" ;;
    keep) echo "method.drop_uncertified=false" ;;
    unweighted) echo "method.rebalance=false" ;;
    no_consistency) echo "method.consistency=none" ;;
    v1) echo "method.labels=hard method.drop_uncertified=false method.rebalance=false method.consistency=none optimizer=sgd ~method_schedule" ;;
    lr0.001) echo "optimizer.lr=0.001" ;;
    *) echo "ablation.sh: error: variant $1 (allowed: paper hard keep unweighted no_consistency v1 lr0.001)" >&2; exit 2 ;;
  esac
}
for v in $VARIANTS; do variant_args "$v" > /dev/null; done
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
for seed in $SEEDS; do
  for v in $VARIANTS; do
    D="$OUT/$v/seed$seed"
    # shellcheck disable=SC2046  # the variant's overrides are words
    done_run "$D/router" || python -m rsbench experiment=mnist_study method=router \
      method.labels_file="$OUT/labels/router_labels.pt" $(variant_args "$v") arch.num_classes=3 sigma=1.0 seed=$seed \
      test=false trainer.enable_progress_bar=false hydra.run.dir="$D/router" "$@"
    [ -f "$D/dual_rs/metrics.json" ] || python -m rsbench.certify model=dual \
      model.router.path="$D/router/checkpoints/last.ckpt" "model.$E" "model.$R" $C hydra.run.dir="$D/dual_rs" "$@"
  done
done
