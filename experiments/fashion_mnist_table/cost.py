"""What each cell of the Fashion-MNIST table costs: measured here on CPU, and on the authors' GPU from their logs.

    python -m rsbench.bench.training_cost --dataset fashion_mnist --sigma 0.5 > bench.txt   # ratios to Gaussian
    python experiments/fashion_mnist_table/cost.py --bench bench.txt [more.txt] --epoch-seconds 45 [--images 500]

A cell is one method at one sigma (seed 0): training with the authors' recipe, then CERTIFY (n = 100,000) on
``--images`` test images (500: the every-20th subset). Per cell:

- CPU training, core-hours = ``--epoch-seconds`` (one Gaussian epoch over the 60,000 images on one core, measured on
  a run of the table) x the method's cost per training image relative to Gaussian (the training-cost benchmark, same
  LeNet, each method at its recipe's batch size: MACER 64, the others 256; from the benchmark run at the cell's sigma
  when one is given, else from the first that has the method: a recipe whose cost changes with sigma, e.g.
  SmoothMix's T = 2 / 4 / 8 on MNIST, needs one per sigma)
  x the recipe's epochs (the authors' logs: 90, CAT-RS 150);
- CPU certification, core-hours = the median ``time`` per image of the certify.tsv files under ``--runs`` certified
  on one thread of one machine (``--machine``; n = 100,000) x images, per way the network was evaluated: the cells
  not run at the fastest one measured (runs certified with ``certify.channels_last=true``, about twice as fast for
  LeNet on a CPU and the same noise for one-channel images, where there are any), a cell certified in part at its
  own; rows certified with more threads, on a GPU or on another machine are left out of the rate, so that it is one
  machine's;
- GPU training and certification, minutes = the authors' own wall clock: the median seconds per epoch of their
  training log x epochs, and the median seconds per image of their released certification log x images
  (``rsbench.published.catalogue``; their GPU, unnamed in the paper).

CAT-RS needs two more things once for all three sigmas, listed on their own line: a sigma = 0.25 Gaussian teacher
trained with the CAT-RS schedule (150 epochs), and the teacher's votes, N = 10,000 noisy samples of each of the 60,000
training images (6e8 forward passes: 6,000 times one certified image at n = 100,000; estimated from the
certification rate on both machines).
A cell with a run under ``--runs`` is marked with the images it has certified.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from rsbench.certify.pipeline.certification import read_segments
from rsbench.published.catalogue import released_logs, training_logs
from rsbench.report.load import network_evaluation

METHODS = ("gaussian", "stability", "smoothadv", "macer", "consistency", "smoothmix", "catrs")
SIGMAS = (0.25, 0.5, 1.0)
TRAIN_IMAGES = 60_000
TEACHER_VOTES = 10_000  # CAT-RS's N per training image (conf/method/catrs.yaml teacher_num_samples)
CERTIFY_SAMPLES = 100_000 + 100  # n + n0 per certified image


def bench_ratios(texts: Sequence[str]) -> dict[tuple[str, float], float]:
    """The ``x gaussian`` column of the training-cost benchmark's printed tables, by method and cell sigma.

    A table applies to its own sigma (its header's ``sigma=``); a method it lacks at a sigma comes from the first
    table that has it.
    """
    measured: list[tuple[float, dict[str, float]]] = []
    for text in texts:
        found = re.search(r"sigma=([0-9.]+)", text)
        if found is None:
            raise SystemExit("a benchmark output without its 'sigma=' header: pass what training_cost printed")
        # a method's row: method, batch, ms/batch, x gaussian, forward and backward rows per image
        rows = [cells for cells in map(str.split, text.splitlines()) if len(cells) == 6 and cells[0] in METHODS]
        measured.append((float(found.group(1)), {cells[0]: float(cells[3]) for cells in rows}))
    missing = [m for m in METHODS if not any(m in table for _, table in measured)]
    if missing:
        raise SystemExit(f"the benchmark outputs lack {missing}: run it with every method (the default)")
    ratios = {}
    for method in METHODS:
        fallback = next(table[method] for _, table in measured if method in table)
        for sigma in SIGMAS:
            own = [table[method] for s, table in measured if s == sigma and method in table]
            ratios[method, sigma] = own[0] if own else fallback
    return ratios


DEFAULT = "fp32"  # how a run's network was evaluated, as the report names it (rsbench.report.load.network_evaluation)


def measured_runs(
    folder: Path, machine: str | None = None
) -> tuple[dict[tuple[str, float], tuple[int, str]], dict[str, float], str]:
    """The cells run under ``folder``, one machine's median seconds per certified image on one core, and that machine.

    A cell maps to the images it certified and how its network was evaluated (``fp32``, ``fp32+channels-last``); the
    seconds are per network evaluation. Only runs certified on a CPU with one thread (``metrics.json``'s
    ``environment``: ``device``, ``threads``) give seconds, and only those of one machine (``device_name``):
    ``machine``, or the one such runs were made on. A cell run on a GPU, or with more threads, or on another machine,
    is done all the same.

    Raises:
        SystemExit: no single-threaded CPU run under ``folder`` (on ``machine``), or such runs on several machines
            and no ``machine`` chosen.
    """
    done: dict[tuple[str, float], tuple[int, str]] = {}
    seconds: dict[str, dict[str, list[float]]] = {}  # machine: network evaluation: seconds per image
    for metrics in sorted(folder.rglob("metrics.json")):
        facts = json.loads(metrics.read_text())
        network = network_evaluation(facts, metrics.parent)
        done[(facts["method"], float(facts["sigma"]))] = (int(facts["num_images"]), network)
        environment = facts.get("environment", {})
        times = pd.read_csv(metrics.parent / "certify.tsv", sep="\t")["time"].tolist()
        # each machine's rows: one machine, or those of certify_segments.json (a run resumed on other machines)
        machines = [(environment, 0)]
        segments = read_segments(metrics.parent)
        if len(segments) > 1:
            machines = [(segment, int(segment["rows"].get("certify", 0))) for segment in segments]
        for k, (machine_facts, first) in enumerate(machines):
            if machine_facts.get("device", "cpu") != "cpu" or machine_facts.get("threads", 1) != 1:
                continue
            last = machines[k + 1][1] if k + 1 < len(machines) else len(times)
            by_network = seconds.setdefault(str(machine_facts.get("device_name", "?")), {})
            by_network.setdefault(network, []).extend(times[first:last])
    if machine is None and len(seconds) > 1:
        raise SystemExit(
            f"single-threaded CPU runs on {len(seconds)} machines ({', '.join(sorted(seconds))}): "
            "choose one with --machine"
        )
    chosen = machine if machine is not None else next(iter(seconds), None)
    if chosen not in seconds:
        raise SystemExit(
            f"no run certified on one CPU thread with metrics.json and certify.tsv under {folder}"
            + (f" on {machine}" if machine is not None else "")
        )
    return done, {network: statistics.median(times) for network, times in seconds[chosen].items()}, str(chosen)


def gpu_facts(logs: pd.DataFrame, method: str, sigma: float) -> tuple[int, float, float]:
    """Epochs, seconds per epoch and seconds per certified image from the authors' Fashion-MNIST logs.

    ``logs`` is :func:`rsbench.published.catalogue.training_logs`, read once by the caller.
    """
    row = logs[(logs.method == method) & (logs.dataset == "fashion_mnist") & (logs.sigma == sigma)].iloc[0]
    (released,) = released_logs(dataset="fashion_mnist", method=method, sigma=sigma)
    return int(row.last_epoch) + 1, float(row.median_seconds_per_epoch), released.seconds_per_image


def table(
    ratios: dict[tuple[str, float], float],
    epoch_seconds: float,
    certify_seconds: dict[str, float],
    images: int,
    done: dict[tuple[str, float], tuple[int, str]],
) -> list[str]:
    """The markdown lines: one per cell, CAT-RS's one-off teacher, and the totals of the cells not run.

    ``certify_seconds``: seconds per certified image on one core, per network evaluation (:func:`measured_runs`);
    the cells not run are costed at the fastest one measured (channels-last, where a run used it).
    """
    new_cells = min(certify_seconds.values())
    lines = [
        "| method | sigma | epochs | x Gaussian (CPU) | CPU training, core-h | CPU certification, core-h | "
        "GPU training, min | GPU certification, min | run here |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    left_cpu = left_gpu = 0.0
    logs = training_logs()
    for method in METHODS:
        for sigma in SIGMAS:
            epochs, gpu_epoch, gpu_image = gpu_facts(logs, method, sigma)
            cpu_train = epoch_seconds * ratios[method, sigma] * epochs / 3600
            cpu_cert = new_cells * images / 3600
            gpu_train, gpu_cert = gpu_epoch * epochs / 60, gpu_image * images / 60
            run, network = done.get((method, sigma), (None, DEFAULT))
            if run is None:
                left_cpu += cpu_train + cpu_cert
                left_gpu += gpu_train + gpu_cert
            elif run < images:
                left_cpu += certify_seconds.get(network, new_cells) * (images - run) / 3600
                left_gpu += gpu_image * (images - run) / 60
            lines.append(
                f"| {method} | {sigma:g} | {epochs} | {ratios[method, sigma]:.2f} | {cpu_train:.1f} | {cpu_cert:.1f} | "
                f"{gpu_train:.0f} | {gpu_cert:.0f} | {'no' if run is None else f'{run} images'} |"
            )
    votes = TRAIN_IMAGES * TEACHER_VOTES / CERTIFY_SAMPLES  # in certified-image equivalents
    _, teacher_gpu_epoch, teacher_gpu_image = gpu_facts(logs, "gaussian", 0.25)
    cpu_teacher = epoch_seconds * 150 / 3600 + new_cells * votes / 3600
    gpu_teacher = teacher_gpu_epoch * 150 / 60 + teacher_gpu_image * votes / 60
    if not any(method == "catrs" for method, _ in done):
        left_cpu, left_gpu = left_cpu + cpu_teacher, left_gpu + gpu_teacher
    lines += [
        "",
        f"CAT-RS's teacher, once for the three sigmas: 150 Gaussian epochs and {TRAIN_IMAGES * TEACHER_VOTES:.0e} "
        f"votes: {cpu_teacher:.1f} core-hours on CPU, {gpu_teacher:.0f} min on the authors' GPU.",
        f"Left to run ({images} images per cell): {left_cpu:.0f} core-hours on CPU ({left_cpu / 2:.0f} hours on 2 "
        f"cores), {left_gpu / 60:.1f} hours on one GPU like the authors'.",
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Print the cost table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", type=Path, nargs="+", required=True, help="the training-cost benchmark's outputs")
    parser.add_argument(
        "--epoch-seconds",
        type=float,
        required=True,
        help="seconds of one Gaussian epoch (60,000 images) on one core, measured",
    )
    parser.add_argument("--runs", type=Path, default=Path("experiments/fashion_mnist_table/runs"))
    parser.add_argument("--images", type=int, default=500, help="certified images per cell (500: every 20th)")
    parser.add_argument(
        "--machine", help="the CPU whose single-threaded runs give the certification rate (their device_name)"
    )
    args = parser.parse_args(argv)
    ratios = bench_ratios([path.read_text() for path in args.bench])
    done, certify_seconds, machine = measured_runs(args.runs, args.machine)
    rates = "; ".join(f"{seconds:.1f} s per image {network}" for network, seconds in sorted(certify_seconds.items()))
    print(
        f"CPU: one Gaussian epoch {args.epoch_seconds:g} s on one core; certification {rates} (medians over the "
        f"runs under {args.runs} certified on one thread of {machine}); GPU: the authors' logs"
    )
    print("\n".join(table(ratios, args.epoch_seconds, certify_seconds, args.images, done)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
