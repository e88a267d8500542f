#!/usr/bin/env bash
# A small timm ViT fine-tuned with LoRA under Gaussian noise on the embedded MNIST subset, certified, and compared
# with rsbench's LeNet at the same sigma on the same images (card.yaml, NOTES.md). Cells, all at sigma 0.25, seed 0:
#   lenet_gaussian     LeNet, method=gaussian, the dataset recipe (20 epochs, SGD lr 0.05)
#   vit_standard       the ViT trained in full without noise (method=standard, Adam lr 1e-3, 10 epochs, last epoch
#                      kept): the "pretrained" base, because no pretrained ViT weights exist on this offline machine
#   vit_lora_gaussian  that ViT's weights as timm pretrained weights (arch.network.pretrained=<file>), LoRA adapters
#                      (r 8, alpha 16, every linear layer of the blocks) and the head trained under noise with
#                      method=gaussian (Adam lr 1e-3, 6 epochs); 14% of the parameters train
#   vit_full_gaussian  the same fine-tuning of every parameter (no LoRA): what the adapters give up
# The ViT is timm's vit_tiny_patch16_224 shrunk with create_model options (img_size 32, patch 8, width 64, depth 3,
# 2 heads: 0.16M parameters, 16 tokens); the 28x28 digits are resized to 32x32 (bilinear) inside the model, after the
# noise, so every radius is in the dataset's 28x28 pixel space. Every run certifies every 5th test image (100) with
# n0=100, n=1,000, alpha=0.001 (radius cap 0.62 at sigma 0.25): sized for 2 CPU cores shared with other jobs.
# Runs go to $SWEEP (outside the repository); their records are copied into runs/ here and the paired report made
# from that copy into report/ once all four cells are done. Rerunning resumes (a finished cell is skipped, an
# unfinished run folder continues where it stopped). CELLS=lenet, vit or vitfull runs one chain only (they can run
# side by side, one thread each; vitfull after vit has written vit_base.pt).
#   nice -n 10 env OMP_NUM_THREADS=1 bash experiments/embedded_mnist_vit_lora/run.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SWEEP=${SWEEP:-multirun/embedded_mnist_vit_lora}
PY=${PYTHON:-python}
mkdir -p "$SWEEP"
COMMON=(sigma=0.25 seed=0 certify.n=1000)
VIT=(arch=timm arch.network.name=vit_tiny_patch16_224
  '+arch.network.options={img_size:32,patch_size:8,embed_dim:64,depth:3,num_heads:2}'
  arch.input_layer.resize=32 arch.input_layer.interpolation=bilinear optimizer=adam optimizer.lr=1e-3)
timed() {  # timed <cell> <command...>: run it, and append the cell's wall-clock seconds to $SWEEP/timings.tsv
  local cell=$1 start
  shift
  start=$(date +%s)
  "$@"
  printf '%s\t%s\t%s\n' "$cell" "$(($(date +%s) - start))" "$(nproc)" >>"$SWEEP/timings.tsv"
}
CELLS=${CELLS:-lenet vit vitfull}
if [[ " $CELLS " == *" lenet "* ]]; then
  [[ -f $SWEEP/lenet_gaussian/metrics.json ]] || timed lenet_gaussian "$PY" -m rsbench method=gaussian "${COMMON[@]}" \
    hydra.run.dir="$SWEEP/lenet_gaussian"
fi
if [[ " $CELLS " == *" vit "* ]]; then
  [[ -f $SWEEP/vit_standard/metrics.json ]] || timed vit_standard "$PY" -m rsbench method=standard test_ckpt=last \
    "${VIT[@]}" trainer.max_epochs=10 'scheduler.milestones=[7]' "${COMMON[@]}" hydra.run.dir="$SWEEP/vit_standard"
  # The base network's weights as a timm state dict (the classifier's network, without rsbench's prefixes).
  "$PY" -c '
import sys, torch
state = torch.load(sys.argv[1], map_location="cpu", weights_only=True)["state_dict"]
torch.save({k.removeprefix("net.1."): v for k, v in state.items() if k.startswith("net.1.")}, sys.argv[2])
' "$SWEEP/vit_standard/checkpoints/last.ckpt" "$SWEEP/vit_base.pt"
  timed vit_lora_gaussian "$PY" -m rsbench method=gaussian "${VIT[@]}" arch.network.pretrained="$SWEEP/vit_base.pt" \
    +lora=default trainer.max_epochs=6 'scheduler.milestones=[4]' "${COMMON[@]}" \
    hydra.run.dir="$SWEEP/vit_lora_gaussian"
fi
if [[ " $CELLS " == *" vitfull "* ]]; then  # after the vit chain's vit_base.pt exists
  [[ -f $SWEEP/vit_full_gaussian/metrics.json ]] || timed vit_full_gaussian "$PY" -m rsbench method=gaussian \
    "${VIT[@]}" arch.network.pretrained="$SWEEP/vit_base.pt" trainer.max_epochs=6 'scheduler.milestones=[4]' \
    "${COMMON[@]}" hydra.run.dir="$SWEEP/vit_full_gaussian"
fi
for cell in lenet_gaussian vit_standard vit_lora_gaussian vit_full_gaussian; do
  [[ -f $SWEEP/$cell/metrics.json ]] || { echo "$cell is not done yet: the report waits for it" >&2; exit 0; }
done
bash "$HERE/../../tools/copy_records.sh" "$SWEEP" "$HERE/runs"
mkdir -p "$HERE/report" && cp "$SWEEP/timings.tsv" "$HERE/report/timings.tsv"
cd "$HERE"
"$PY" -m rsbench.report runs/lenet_gaussian runs/vit_standard runs/vit_lora_gaussian runs/vit_full_gaussian \
  --baseline runs/lenet_gaussian --radii 0 0.25 0.5 --out report
