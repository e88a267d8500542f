"""Benchmark: how long the command takes to answer ``--help`` and ``--cfg job``, against importing torch.

    python -m rsbench.bench.cli_startup [--repeats 5] [--cpus 2]

Each command runs in a fresh process (as a user types it), pinned to ``--cpus`` CPUs, interleaved with the others
and repeated; the median wall time is printed with its ratio to the named baseline ``python -c "import torch"``,
which is the least a command that imports torch (as ``--help`` did before) can take. ``python -c pass`` and
``import hydra`` show the floor below which the command cannot go.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

BASELINE = "import torch"
COMMANDS: dict[str, list[str]] = {
    "python -c pass": ["-c", "pass"],
    "import hydra": ["-c", "import hydra, omegaconf"],
    BASELINE: ["-c", "import torch"],
    "rsbench --help": ["-m", "rsbench", "--help"],
    "rsbench --cfg job": ["-m", "rsbench", "--cfg", "job"],
    "rsbench --cfg job --resolve (catrs)": ["-m", "rsbench", "method=catrs", "--cfg", "job", "--resolve"],
}


def time_command(arguments: list[str]) -> float:
    """Seconds from starting ``python <arguments>`` until it exits (it must succeed)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, *arguments], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    """Time every command ``--repeats`` times, interleaved, and print medians and ratios to the baseline."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpus", type=int, default=2, help="pin the commands to this many CPUs (0: no pinning)")
    args = parser.parse_args(argv)
    if args.cpus and hasattr(os, "sched_setaffinity"):
        available = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, available[: args.cpus])  # the child processes inherit it
    seconds: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeats):
        for name, arguments in COMMANDS.items():
            seconds[name].append(time_command(arguments))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"median wall time of {args.repeats} runs each, {cpus} CPUs, {sys.executable}")
    baseline = statistics.median(seconds[BASELINE])
    print(f"{'command':40s} {'seconds':>8s} {'x ' + BASELINE:>16s}")
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"{name:40s} {median:8.3f} {median / baseline:16.2f}")


if __name__ == "__main__":
    main()
