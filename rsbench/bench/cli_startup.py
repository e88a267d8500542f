"""Benchmark: how long the commands take to answer ``--help`` and ``--cfg job``, or to refuse a bad request.

    python -m rsbench.bench.cli_startup [--repeats 5] [--cpus 2] [--refusals]

Each command runs in a fresh process (as a user types it), pinned to ``--cpus`` CPUs, interleaved with the others
and repeated; the median wall time and the median CPU time (user + system, which a loaded machine inflates less)
are printed with the wall time's ratio to the named baseline ``python -c "import torch"``, which is the least a
command that imports torch (as ``--help`` did before) can take. ``python -c pass`` and ``import hydra`` show the
floor below which the command cannot go. ``--refusals`` adds requests that must be refused (exit status 2): a
refusal after torch's import costs at least the baseline.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rsbench.runs.floor import CommandParser

BASELINE = "import torch"
COMMANDS: dict[str, list[str]] = {
    "python -c pass": ["-c", "pass"],
    "import hydra": ["-c", "import hydra, omegaconf"],
    BASELINE: ["-c", "import torch"],
    "rsbench --help": ["-m", "rsbench", "--help"],
    "rsbench --cfg job": ["-m", "rsbench", "--cfg", "job"],
    "rsbench --cfg job --resolve (catrs)": ["-m", "rsbench", "method=catrs", "--cfg", "job", "--resolve"],
    "rsbench.report --help": ["-m", "rsbench.report", "--help"],
}
REFUSALS: dict[str, list[str]] = {
    "rsbench certify.n=0": ["-m", "rsbench", "certify.n=0"],
    "rsbench certify.start=500": ["-m", "rsbench", "certify.start=500"],
    "rsbench trainer=gpu (no GPU)": ["-m", "rsbench", "trainer=gpu"],
    "rsbench.certify (no model.path)": ["-m", "rsbench.certify"],
    "rsbench.certify model.path=missing": ["-m", "rsbench.certify", "model.path=missing.ckpt"],
    "rsbench.certify busy folder": ["-m", "rsbench.certify", "model.path=missing.ckpt", "hydra.run.dir={busy}"],
}
"""Requests that must be refused (``{busy}``: a run folder this process holds locked)."""


def time_command(arguments: list[str], refused: bool = False) -> tuple[float, float]:
    """Wall and CPU seconds from starting ``python <arguments>`` until it exits (failing if ``refused``, else not)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *arguments], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if (done.returncode != 0) != refused:
        raise RuntimeError(f"python {' '.join(arguments)} exited with {done.returncode}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> None:
    """Time every command ``--repeats`` times, interleaved, and print medians and ratios to the baseline."""
    parser = CommandParser("python -m rsbench.bench.cli_startup", description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpus", type=int, default=2, help="pin the commands to this many CPUs (0: no pinning)")
    parser.add_argument("--refusals", action="store_true", help="also time requests that must be refused")
    args = parser.parse_args(argv)
    if args.cpus and hasattr(os, "sched_setaffinity"):
        available = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, available[: args.cpus])  # the child processes inherit it
    from rsbench.runs.lock import RunLock

    with tempfile.TemporaryDirectory() as scratch, RunLock(Path(scratch) / "busy", command="cli_startup"):
        commands = {name: (arguments, False) for name, arguments in COMMANDS.items()}
        if args.refusals:
            busy = str(Path(scratch) / "busy")
            commands |= {name: ([a.format(busy=busy) for a in arguments], True) for name, arguments in REFUSALS.items()}
        wall: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeats):
            for name, (arguments, refused) in commands.items():
                seconds, used = time_command(arguments, refused)
                wall[name].append(seconds)
                cpu[name].append(used)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"median wall and CPU time of {args.repeats} runs each, {cpus} CPUs, {sys.executable}")
    baseline = statistics.median(wall[BASELINE])
    print(f"{'command':40s} {'wall s':>8s} {'cpu s':>8s} {'wall x ' + BASELINE:>20s}")
    for name, values in wall.items():
        median = statistics.median(values)
        print(f"{name:40s} {median:8.3f} {statistics.median(cpu[name]):8.3f} {median / baseline:20.2f}")


if __name__ == "__main__":
    main()
