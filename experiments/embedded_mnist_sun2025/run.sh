#!/usr/bin/env bash
# Sun et al. 2025 (method=sun2025) in the embedded MNIST study (experiment=mnist_study: LeNet, 20 epochs, the first
# 300 test images, n0 = 100, n = 10,000, alpha = 0.001; conf/experiment_method/mnist_study_sun2025.yaml scales the
# authors' schedule: stage epoch 8 / 9, weights every epoch), sigma 0.5 and 1.0, seeds 0, 1, 2, then the report
# paired image by image with Gaussian and CAT-RS of experiments/embedded_mnist_study (same images, same protocol).
# The certified checkpoint is the best validation epoch from the stage epoch on (metrics.json: certified_epoch,
# method_epoch), and the p_A estimates' noise is seeded by the training seed.
#   bash experiments/embedded_mnist_sun2025/run.sh       # sweeps into $SWEEP (default multirun/embedded_mnist_sun2025)
#   SIGMAS=1.0 bash experiments/embedded_mnist_sun2025/run.sh   # one sigma's cells only
set -euo pipefail
SWEEP=${SWEEP:-multirun/embedded_mnist_sun2025}
SIGMAS=${SIGMAS:-0.5 1.0}
STUDY=experiments/embedded_mnist_study/runs
for sigma in $SIGMAS; do
  # A run folder trained before checkpoints were chosen from the method's own epochs would resume (or go straight to
  # certification) with its old selection and its old p_A streams: refuse it rather than certify it again.
  for config in "$SWEEP/sun2025/sigma$sigma"/*/.hydra/config.yaml; do
    if [[ -f $config ]] && ! grep -q "rsbench.runs.checkpointing.MethodCheckpoint" "$config"; then
      echo "run.sh: $(dirname "$(dirname "$config")") was trained with the earlier checkpoint selection; move it" \
        "away (or choose another SWEEP=) to train it again" >&2
      exit 2
    fi
  done
  python -m rsbench -m experiment=mnist_study method=sun2025 sigma=$sigma seed=0,1,2 trainer.enable_progress_bar=false \
    hydra.sweep.dir="$SWEEP/sun2025/sigma$sigma" "$@"
done
python -m rsbench.report "$STUDY/gaussian" "$STUDY/catrs" "$SWEEP/sun2025" --baseline gaussian \
  --radii 0 0.5 1 1.5 2 2.5 --out "$SWEEP/report"
