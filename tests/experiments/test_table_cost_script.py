"""experiments/fashion_mnist_table/cost.py: a cell's cost from the benchmark, the committed runs, the authors' logs."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from rsbench.certify.pipeline.certification import read_segments
from tests.scripts import experiment_script

pytestmark = pytest.mark.study

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "experiments" / "fashion_mnist_table" / "runs"
TORCH_LINE = (  # six words, as many as a method's row: the cost script must not read it as one
    "torch 2.14.1+cu130, 1 threads, allocator: glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736\n"
)
BENCH = (
    TORCH_LINE
    + """lenet on fashion_mnist recipe, sigma=0.5, each method at its recipe's batch size
method          batch  ms/batch  x gaussian  fwd rows/img  bwd rows/img
gaussian          256      40.0        1.00           1.0           1.0
catrs             256     100.0        2.50           2.0           2.0
consistency       256      80.0        2.00           2.0           2.0
ddrs              256      40.0        1.00           1.0           1.0
macer              64     160.0       16.00          16.0          16.0
smoothadv         256     480.0       12.00          12.0           2.0
smoothmix         256     400.0       10.00          10.0           2.0
stability         256      80.0        2.00           2.0           2.0
"""
)
BENCH_SIGMA_1 = (
    TORCH_LINE
    + """lenet on fashion_mnist recipe, sigma=1.0, each method at its recipe's batch size
method          batch  ms/batch  x gaussian  fwd rows/img  bwd rows/img
gaussian          256      40.0        1.00           1.0           1.0
smoothmix         256     800.0       20.00          20.0          20.0
"""
)


def load_script() -> ModuleType:
    return experiment_script("fashion_mnist_table/cost")


def test_each_cell_costs_its_epochs_times_its_ratio_and_the_authors_gpu_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench, bench_1 = tmp_path / "bench.txt", tmp_path / "bench_1.txt"
    bench.write_text(BENCH)
    bench_1.write_text(BENCH_SIGMA_1)
    arguments = [
        "--bench",
        str(bench),
        str(bench_1),
        "--epoch-seconds",
        "40",
        "--runs",
        str(RUNS),
        "--machine",
        "AMD EPYC",
    ]
    assert load_script().main(arguments) == 0
    out = capsys.readouterr().out
    cells = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.strip("|").split("|")]
        if len(parts) == 9 and parts[0] in {"gaussian", "macer", "smoothmix", "catrs"}:
            cells[parts[0], float(parts[1])] = parts[2:]
    times: dict[bool, list[pd.Series]] = {False: [], True: []}  # by channels-last, the faster layout for new cells
    on_gpu = []
    for tsv in sorted(RUNS.rglob("certify.tsv")):
        if not (tsv.parent / "metrics.json").is_file():
            continue  # a cell in progress, not summarised yet: the script reads only summarised runs too
        environment = json.loads((tsv.parent / "metrics.json").read_text())["environment"]
        if environment["device"] != "cpu":
            on_gpu.append(tsv.parent.name)  # done, but no CPU rate: their 0.03 s per image would cost nothing
            continue
        rows = pd.read_csv(tsv, sep="\t")["time"]
        segments = read_segments(tsv.parent)  # a cell resumed on another machine: the rows each one certified
        bounds = [int(s["rows"]["certify"]) for s in segments[1:]] + [len(rows)]
        pieces = [(environment, rows)]
        if segments:
            pieces = [(s, rows[int(s["rows"]["certify"]) : end]) for s, end in zip(segments, bounds, strict=True)]
        for machine, piece in pieces:
            if machine["threads"] != 1 or machine["device_name"] != "AMD EPYC":
                continue  # MACER at 0.25: two threads of another CPU, not one core of the machine the others ran on
            times[json.loads((tsv.parent / "certify_protocol.json").read_text())["channels_last"]].append(piece)
    seconds = min(pd.concat(series).median() for series in times.values() if series)
    certification = f"{seconds * 500 / 3600:.1f}"
    done = json.loads((RUNS / "gaussian_sigma0.25" / "metrics.json").read_text())["num_images"]
    # Gaussian at 0.25: 90 epochs x 40 s = 1.0 core-hour; the authors' log: 2.29 s per epoch (3.4 min), 1.0 s per
    # certified image (8.3 min for 500); the committed run's images
    assert cells["gaussian", 0.25] == ["90", "1.00", "1.0", certification, "3", "8", f"{done} images"]
    assert cells["macer", 0.5] == ["90", "16.00", "16.0", certification, "31", "3", "no"]  # 20.6 s/epoch, 0.363 s
    assert {"stability_sigma0.25", "stability_sigma0.5"} <= set(on_gpu)  # committed runs an H200 made
    stability = next(line for line in out.splitlines() if line.startswith("| stability | 0.5 |"))
    assert stability.endswith("| 500 images |")
    assert cells["catrs", 1.0][:3] == ["150", "2.50", "4.2"]  # CAT-RS's 150 epochs
    # a benchmark at the cell's own sigma wins (SmoothMix's T grows with sigma on MNIST); else the sigma 0.5 one
    assert (cells["smoothmix", 1.0][1], cells["smoothmix", 0.25][1]) == ("20.00", "10.00")
    assert "CAT-RS's teacher, once for the three sigmas" in out


def certified_run(folder: Path, machine: str, threads: int, seconds: float) -> None:
    """A finished run's metrics.json and certify.tsv as far as the cost script reads them."""
    folder.mkdir(parents=True)
    environment = {"device": "cpu", "device_name": machine, "threads": threads}
    facts = {"method": "gaussian", "sigma": 0.25, "num_images": 3, "environment": environment}
    (folder / "metrics.json").write_text(json.dumps(facts))
    rows = pd.DataFrame({"idx": [0, 20, 40], "time": [seconds] * 3})
    rows.to_csv(folder / "certify.tsv", sep="\t", index=False)


def test_the_certification_rate_is_one_machines_on_one_core_never_a_mix(tmp_path: Path) -> None:
    """Runs certified on two CPUs are refused until one is chosen; a run with two threads gives no core rate."""
    certified_run(tmp_path / "a", "AMD EPYC", 1, 10.0)
    certified_run(tmp_path / "b", "Intel Xeon", 1, 4.0)
    certified_run(tmp_path / "c", "AMD EPYC", 2, 1.0)
    script = load_script()
    with pytest.raises(SystemExit, match=r"on 2 machines \(AMD EPYC, Intel Xeon\): choose one with --machine"):
        script.measured_runs(tmp_path)
    done, seconds, machine = script.measured_runs(tmp_path, "AMD EPYC")
    assert (seconds, machine) == ({"fp32": 10.0}, "AMD EPYC")  # the two-thread run's 1.0 left out
    assert done == {("gaussian", 0.25): (3, "fp32")}
    with pytest.raises(SystemExit, match=r"on one CPU thread .* on Apple M4"):
        script.measured_runs(tmp_path, "Apple M4")
