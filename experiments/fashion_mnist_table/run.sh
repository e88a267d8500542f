#!/usr/bin/env bash
# The CAT-RS authors' Fashion-MNIST table (their Appendix C; released per-image logs in alinlab/smoothing-catrs
# data/fmnist/), reproduced at the scale it was published: every method trained on all 60,000 training images with
# the authors' recipe (protocol=authors: no validation split, the last epoch certified), certified with n0=100,
# n=100,000, alpha=0.001, and paired image by image with the authors' own released run of the same method and sigma.
#
#   bash experiments/fashion_mnist_table/run.sh                  # 7 methods x 3 sigmas, seed 0, every 20th test image
#   METHODS=gaussian SIGMAS="0.25 0.5 1.0" bash experiments/fashion_mnist_table/run.sh
#   SUBSET=full SEEDS=0,1,2 bash experiments/fashion_mnist_table/run.sh   # the whole table, on a GPU machine
#
# Data: Debian's package dataset-fashion-mnist (apt-get install dataset-fashion-mnist), found without configuration,
# or the four idx files under data_dir. Recipes (conf/dataset/fashion_mnist.yaml, conf/method_recipe/
# catrs_fashion_mnist.yaml, macer_fashion_mnist.yaml): LeNet, batch 256 (MACER 64, its script's default), SGD lr
# 0.01, momentum 0.9, wd 1e-4; the six baselines 90 epochs with
# the rate x0.1 at epochs 31 and 61, CAT-RS 150 epochs with drops at 51 and 101 and a sigma=0.25 Gaussian teacher
# trained with its schedule (trained once, then reused from teacher_dir). Method hyperparameters: the MNIST ones
# (dataset.family=mnist), as the authors' code has no Fashion-MNIST-specific values.
# Settings, from the environment:
#   SWEEP=multirun/fashion_mnist_table   one sweep folder per method and sigma ($SWEEP/<method>/sigma<sigma>/<job>),
#                                        then $SWEEP/report/
#   METHODS="gaussian stability smoothadv macer consistency smoothmix catrs"   SIGMAS="0.25 0.5 1.0"   SEEDS=0
#   SUBSET=every20   every 20th test image (500 images, indices 0, 20, ..., 9980); full: all 10,000
# Extra arguments are Hydra overrides for every run (e.g. dataset.num_workers=0). The default trainer takes the GPU when
# there is one, in fp32 as the authors trained (trainer=gpu would train in bf16). On a CPU, add
# certify.channels_last=true: LeNet certifies about twice as fast, on the same noise (one-channel images), still fp32
# (the report shows network=fp32+channels-last; measured in experiments/fashion_mnist_channels_last/), and
# train_layout=channels_last: LeNet trains faster in it on a CPU thread, on the same noise, still fp32
# (python -m rsbench.bench.training_throughput; experiments/training_throughput/). A finished
# run is kept when the command is run again; a stopped one resumes. A cell longer than a machine lives is carried in
# git: python tools/cell_state.py save <its run folder> experiments/fashion_mnist_table/runs/<method>_sigma<s> (the
# card marks it in_progress), then on the next machine tools/cell_state.py restore and python -m rsbench resume=. What each cell costs on one CPU core and on the
# authors' GPU: experiments/fashion_mnist_table/report/cost.md (python experiments/fashion_mnist_table/cost.py).
# The committed records and the report that pairs them with the authors' runs: experiments/fashion_mnist_table/.
set -euo pipefail
SWEEP=${SWEEP:-multirun/fashion_mnist_table}
METHODS=${METHODS:-"gaussian stability smoothadv macer consistency smoothmix catrs"}
SIGMAS=${SIGMAS:-"0.25 0.5 1.0"}
SEEDS=${SEEDS:-0}
SUBSET=${SUBSET:-every20}
case $SUBSET in
  every20) subset=(certify.skip=20) ;;
  full) subset=(certify.skip=1) ;;
  *) echo "SUBSET=$SUBSET: use every20 (500 test images) or full (all 10,000)" >&2; exit 2 ;;
esac

for method in $METHODS; do
  for sigma in ${SIGMAS//,/ }; do
    python -m rsbench -m dataset=fashion_mnist protocol=authors method="$method" sigma="$sigma" seed="$SEEDS" \
      certify.n0=100 certify.n=100000 certify.alpha=0.001 "${subset[@]}" \
      hydra.sweep.dir="$SWEEP/$method/sigma$sigma" "$@"
  done
done

python -m rsbench.report "$SWEEP" --against-released --radii 0 0.5 1 1.5 2 2.5 3 --out "$SWEEP/report"
