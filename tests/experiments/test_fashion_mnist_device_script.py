"""``experiments/fashion_mnist_table/device.sh``: the run step trains and certifies each cell and packs its records;
unpack puts them where the report reads them; a cell the budget cannot fit or a failing one is said, and loses nothing.

The run step is exercised on the CPU, with the wheels step skipped (``WHEELS=""``: the test environment has Hydra),
on four gzipped idx files written here, and a tiny protocol given through ``EXTRA`` (one epoch, n = 100, 2 images);
the device's GPU and its settings are not (no GPU here), nor is pack (it downloads wheels).
"""

from __future__ import annotations

import gzip
import json
import os
import struct
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

pytestmark = pytest.mark.study

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "fashion_mnist_table" / "device.sh"
TINY = (
    "trainer.max_epochs=1 dataset.batch_size=50 dataset.eval_batch_size=100 dataset.num_workers=0 "
    "certify.n0=10 certify.n=100 certify.batch_size=100 certify.max_images=2 certify.skip=1"
)


def write_idx_gz(path: Path, array: np.ndarray) -> None:
    """A uint8 array in the gzipped idx format of the Fashion-MNIST files."""
    header = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(gzip.compress(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 training and 20 test images (random pixels, labels 0..9 in turn) as the four files pack copies."""
    folder = tmp_path_factory.mktemp("fashion-mnist")
    rng = np.random.default_rng(0)
    for prefix, count in (("train", 200), ("t10k", 20)):
        write_idx_gz(folder / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (count, 28, 28)))
        write_idx_gz(folder / f"{prefix}-labels-idx1-ubyte.gz", np.arange(count) % 10)
    return folder


def script(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    """The script with ``env`` added; ``python3`` is this interpreter (a virtual environment's, in CI). No cut cells
    are carried unless ``CARRIED`` is given (not the ``.device/partial/`` a real ``pack`` may have left here)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    nothing_carried = str(ROOT / ".device" / "no-cut-cells-in-tests")
    environment = {
        **os.environ,
        "PATH": path,
        "OMP_NUM_THREADS": "1",
        "WANDB_MODE": "offline",
        "CARRIED": nothing_carried,
        **env,
    }
    return subprocess.run(
        ["bash", str(SCRIPT), *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow  # 53 s on 2 idle cores: trains and certifies a cell, packs, continues and unpacks it
def test_a_cell_is_trained_certified_packed_continued_and_unpacked_where_the_report_reads_it(
    data: Path, tmp_path: Path
) -> None:
    """A cell runs and packs its records (no checkpoints). Its run folder, carried back as a cut cell would be
    (``.device/partial/<cell>``: here one certified on its first image only), runs before CELLS' cells and continues:
    training not repeated, the first row kept verbatim, not certified again. unpack puts the records where the report
    reads them."""
    first, carried, out0 = tmp_path / "first", tmp_path / "carried", tmp_path / "out0"
    common = {"WHEELS": "", "DATA": str(data)}
    out0.mkdir()
    once = script(
        "run", OUT=str(out0), RUNS=str(first), CELLS="gaussian:0.5", EXTRA=f"{TINY} certify.max_images=1", **common
    )
    assert once.returncode == 0, once.stdout + once.stderr
    assert sorted(p.name for p in out0.iterdir()) == ["device.log", "gaussian_sigma0.5.tgz"]
    with tarfile.open(out0 / "gaussian_sigma0.5.tgz") as archive:
        names = set(archive.getnames())
    assert {"./certify.tsv", "./metrics.json", "./.hydra/overrides.yaml", "./logs/training_metrics.csv"} <= names
    assert not any("checkpoints" in name for name in names)
    carried.mkdir()
    (first / "gaussian_sigma0.5").rename(carried / "gaussian_sigma0.5")
    first_row = (carried / "gaussian_sigma0.5" / "certify.tsv").read_text().splitlines()[1]

    out = tmp_path / "out"
    out.mkdir()
    ran = script(
        "run",
        OUT=str(out),
        RUNS=str(tmp_path / "work"),
        CARRIED=str(carried),
        CELLS="no_such_method:0.5 gaussian:0.5",
        PARALLEL="1",  # one cell at a time: the log's order is the cells'
        EXTRA=TINY,
        **common,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    log = (out / "device.log").read_text().splitlines()
    assert log[0].startswith("python ")
    assert "hydra 1.3" in log[0]
    assert log[1].startswith("gaussian sigma 0.5: continuing ")  # the cut cell first, once
    assert log[2].startswith("gaussian sigma 0.5: done in")
    assert log[3].startswith("no_such_method sigma 0.5: failed")
    assert len(log) == 4
    resumed_log = (tmp_path / "work" / "gaussian_sigma0.5" / "rsbench.log").read_text()
    assert "training finished earlier (1 epochs" in resumed_log

    runs = tmp_path / "runs"
    unpacked = script("unpack", str(out), RUNS=str(runs))
    assert unpacked.returncode == 0, unpacked.stderr
    cell = runs / "gaussian_sigma0.5"
    assert unpacked.stdout.split() == [str(cell)]
    rows = (cell / "certify.tsv").read_text().splitlines()
    assert len(rows) == 1 + 2  # header and the 2 images
    assert rows[1] == first_row  # the row certified before the cut, as written then
    metrics = json.loads((cell / "metrics.json").read_text())
    assert metrics["n"] == 100  # EXTRA's override wins over the table's n = 100,000
    assert metrics["num_images"] == 2
    overrides = (cell / ".hydra" / "overrides.yaml").read_text()
    assert "protocol=authors" in overrides
    assert "certify.skip=1" in overrides


@pytest.mark.slow  # 35 s on 2 idle cores
def test_a_cell_the_budget_cannot_fit_is_not_started_and_a_failing_one_keeps_its_output_beside_others(
    data: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    common = {"OUT": str(out), "WHEELS": "", "DATA": str(data), "RUNS": str(tmp_path / "work")}
    carried = tmp_path / "carried"  # a cut cell of seed 2 (its run folder's name says which), as pack carries it
    (carried / "consistency_sigma1.0_seed2").mkdir(parents=True)
    cells = "gaussian:0.5 stability:0.25:1 consistency:1.0:2"  # the carried cell named again: run once, first
    skipped = script("run", CELLS=cells, BUDGET_S="10", CELL_MIN_S="60", **{**common, "CARRIED": str(carried)})
    assert skipped.returncode == 0, skipped.stderr
    said = [line.split(":")[0] for line in (out / "device.log").read_text().splitlines() if "not started" in line]
    assert said == ["consistency sigma 1.0 seed 2", "gaussian sigma 0.5", "stability sigma 0.25 seed 1"]
    assert not (out / "gaussian_sigma0.5.tgz").exists()

    # Two slots (PARALLEL=2, as on the device): the failing cell beside one that runs (seed 1), each said once.
    failed = script("run", CELLS="no_such_method:0.5 gaussian:0.25:1", PARALLEL="2", EXTRA=TINY, **common)
    assert failed.returncode == 0, failed.stderr  # the other cells still run
    log = (out / "device.log").read_text()
    assert "no_such_method sigma 0.5: failed (exit status 2)" in log  # a config error
    assert log.count("gaussian sigma 0.25 seed 1: done in") == 1
    with tarfile.open(out / "gaussian_sigma0.25_seed1.tgz") as archive:
        config = archive.extractfile("./.hydra/config.yaml")  # where the report reads a run's training seed
        assert config is not None
        assert yaml.safe_load(config)["seed"] == 1
    assert "no_such_method" in (out / "no_such_method_sigma0.5.out").read_text()  # the run's own error, kept
    assert not (out / "no_such_method_sigma0.5.partial.tgz").exists()  # it wrote no run folder: nothing to keep


def test_a_cut_cell_returns_its_run_folder_and_unpack_says_how_to_continue_it(data: Path, tmp_path: Path) -> None:
    """A cell stopped by the budget (here: a run folder an earlier attempt left, and a cell that then fails) comes back
    whole but for W&B files, and unpacks as a run folder to resume, apart from the committed records."""
    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    cell = work / "no_such_method_sigma0.5"
    for name in ("checkpoints/last.ckpt", "certify.tsv", ".hydra/overrides.yaml", "wandb/run/files/log.txt"):
        (cell / name).parent.mkdir(parents=True, exist_ok=True)
        (cell / name).write_text(name)
    ran = script("run", OUT=str(out), WHEELS="", DATA=str(data), RUNS=str(work), CELLS="no_such_method:0.5")
    assert ran.returncode == 0, ran.stderr
    log = (out / "device.log").read_text()
    assert "what it had done and its output (no_such_method_sigma0.5.out): no_such_method_sigma0.5.partial.tgz" in log
    assert sorted(p.name for p in out.iterdir()) == ["device.log", "no_such_method_sigma0.5.partial.tgz"]  # one a cell
    with tarfile.open(out / "no_such_method_sigma0.5.partial.tgz") as archive:
        names = {name for name in archive.getnames() if not archive.getmember(name).isdir()}
        output = archive.extractfile("no_such_method_sigma0.5.out")
        assert output is not None
        assert b"no_such_method" in output.read()  # the run's own error
    assert names == {
        "./checkpoints/last.ckpt",
        "./certify.tsv",
        "./.hydra/overrides.yaml",
        "no_such_method_sigma0.5.out",
    }

    runs, partial = tmp_path / "runs", tmp_path / "partial"
    unpacked = script("unpack", str(out), RUNS=str(runs), PARTIAL=str(partial))
    assert unpacked.returncode == 0, unpacked.stderr
    assert f"python -m rsbench resume={partial}/no_such_method_sigma0.5 data_dir=" in unpacked.stdout
    assert (partial / "no_such_method_sigma0.5" / "checkpoints" / "last.ckpt").read_text() == "checkpoints/last.ckpt"
    carried = runs / "no_such_method_sigma0.5"  # issue 50: its resumable state, to commit with the cell in_progress
    assert (carried / "checkpoints" / "last.ckpt").read_text() == "checkpoints/last.ckpt"
    assert not (carried / "metrics.json").exists()  # not a finished cell's records
    assert "mark the cell in_progress in the card" in unpacked.stdout


def test_a_cell_signalled_as_it_exited_is_done_when_its_status_says_so_and_only_then(
    data: Path, tmp_path: Path
) -> None:
    """On the H200 a MACER cell wrote its last rows and status.json ("completed") and got the budget's SIGTERM while
    exiting: timeout's exit status 124, yet a finished cell. A stand-in for rsbench (``python3`` first on PATH, the
    real interpreter for everything else) does that here: the cell is done and packed. A "completed" status.json from
    an earlier attempt does not make a failing cell done."""
    shim = tmp_path / "bin" / "python3"
    shim.parent.mkdir()
    shim.write_text(
        "#!/usr/bin/env bash\n"
        'if [[ $1 == -m && $2 == rsbench && " $* " == *" method=macer "* ]]; then\n'
        '  for arg in "$@"; do [[ $arg == hydra.run.dir=* ]] && dir=${arg#hydra.run.dir=}; done\n'
        '  mkdir -p "$dir" && echo \'{"status": "completed"}\' > "$dir/status.json" && echo rows > "$dir/certify.tsv"\n'
        "  exit 124\n"
        "fi\n"
        f'exec {sys.executable} "$@"\n'
    )
    shim.chmod(0o755)
    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    stale = work / "no_such_method_sigma0.5"
    stale.mkdir(parents=True)
    (stale / "status.json").write_text('{"status": "completed"}')
    path = f"{shim.parent}{os.pathsep}{os.environ['PATH']}"
    ran = script(
        "run", OUT=str(out), WHEELS="", DATA=str(data), RUNS=str(work), CELLS="macer:1.0 no_such_method:0.5", PATH=path
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    log = (out / "device.log").read_text()
    assert "macer sigma 1.0: done in" in log
    assert "(its status.json says completed; exit status 124 as it exited)" in log
    with tarfile.open(out / "macer_sigma1.0.tgz") as archive:
        assert "./certify.tsv" in archive.getnames()  # the records (tools/copy_records.sh): no status.json
        assert "./status.json" not in archive.getnames()
    assert "no_such_method sigma 0.5: failed (exit status 2)" in log


@pytest.mark.slow  # 45 s: the budget must let rsbench start and train before it is cut
def test_a_cell_the_budget_cuts_stops_gracefully_and_comes_back_resumable(data: Path, tmp_path: Path) -> None:
    """At the budget rsbench alone gets SIGTERM (its loader processes do not, which would crash it): it stops after
    the batch in flight and says how to resume; the cell comes back as its run folder with the last epoch's
    checkpoint."""
    out = tmp_path / "out"
    out.mkdir()
    long = "trainer.max_epochs=500 dataset.batch_size=50 dataset.num_workers=1 certify.n=100 certify.max_images=2"
    ran = script(
        "run",
        OUT=str(out),
        WHEELS="",
        DATA=str(data),
        RUNS=str(tmp_path / "work"),
        CELLS="gaussian:0.5",
        BUDGET_S="40",  # long enough to start rsbench on a loaded machine and train an epoch or more
        CELL_MIN_S="1",
        EXTRA=long,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "gaussian sigma 0.5: cut by the budget after" in (out / "device.log").read_text()
    with tarfile.open(out / "gaussian_sigma0.5.partial.tgz") as archive:
        assert "./checkpoints/last.ckpt" in archive.getnames()
        member = archive.extractfile("gaussian_sigma0.5.out")
        assert member is not None
        output = member.read().decode()
    assert "stopped by SIGTERM. Resume with: python -m rsbench resume=" in output
    assert "Traceback" not in output


def test_each_step_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    usage = script()
    assert usage.returncode == 2
    assert "usage: bash experiments/fashion_mnist_table/device.sh pack | run" in usage.stderr
    no_out = script("run", OUT="")
    assert no_out.returncode != 0
    assert "run is for the device machine" in no_out.stderr
    empty = script("unpack", str(tmp_path))
    assert empty.returncode == 2
    assert f"no <method>_sigma<s>.tgz in {tmp_path}" in empty.stderr


LAMBDA_SCRIPT = ROOT / "experiments" / "fashion_mnist_macer_lambda" / "run.sh"


@pytest.mark.slow  # 61 s on 2 idle cores: two MACER runs through the device script and back
def test_the_macer_lambda_runs_go_beside_the_cells_come_back_and_are_continued_here(data: Path, tmp_path: Path) -> None:
    """MACER_LAMBDA=1 runs experiments/fashion_mnist_macer_lambda/run.sh in the run step (here alone: no cells; sigma
    0.5, lambdas 16 and 4, one epoch after the deferred ones, on the tiny data with 2 noisy copies): the deferred run
    trains epochs 0..30 at lambda 0 and each lambda run continues its last checkpoint at epoch 31 with its lambda; the
    table pairs their classification loss with the authors' epoch 31 (0.657 at sigma 0.5). They come back as one
    archive without the lambda runs' checkpoints; unpack puts them where the script, run again here, finds them done
    and only prints."""
    out, probe, lambdas = tmp_path / "out", tmp_path / "probe", tmp_path / "lambdas"
    out.mkdir()
    sweep = {"SIGMAS": "0.5", "LAMBDAS": "16 4", "EPOCHS": "1"}
    ran = script(
        "run",
        OUT=str(out),
        WHEELS="",
        DATA=str(data),
        RUNS=str(tmp_path / "work"),
        CELLS="",
        MACER_LAMBDA="1",
        MACER_LAMBDA_ROOT=str(probe),
        LAMBDA_CARRIED=str(tmp_path / "nothing-carried"),
        MACER_LAMBDA_PARALLEL="2",
        MACER_LAMBDA_EXTRA="dataset.batch_size=200 method.num_noise=2",  # one step an epoch, 2 noisy copies not 16
        **sweep,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert sorted(p.name for p in out.iterdir()) == ["device.log", "macer_lambda.log", "macer_lambda.tgz"]
    table = (out / "macer_lambda.log").read_text()
    for lbd in ("16", "4"):
        assert f"| macer, sigma 0.5 (sigma0.5_lbd{lbd}) | 31 | " in table, table
    assert table.count(" / 0.657 |") == 2  # the authors' classification loss at epoch 31
    assert "MACER lambda: 2 of 2 lambda runs completed" in (out / "device.log").read_text()
    with tarfile.open(out / "macer_lambda.tgz") as archive:
        names = set(archive.getnames())
    assert "./sigma0.5_deferred/checkpoints/last.ckpt" in names  # what a cut lambda run restarts from
    assert not any(name.startswith("./sigma0.5_lbd") and "checkpoints" in name for name in names)

    deferred = pd.read_csv(probe / "sigma0.5_deferred" / "logs" / "metrics.csv").groupby("epoch").last()
    assert list(deferred.index) == list(range(31))
    assert (deferred["train/lbd"] == 0).all()
    for lbd in (16, 4):
        continued = pd.read_csv(probe / f"sigma0.5_lbd{lbd}" / "logs" / "metrics.csv").groupby("epoch").last()
        assert list(continued.index) == [31]
        assert continued["train/lbd"].tolist() == [lbd]
        # the schedule restored too: the rate dropped at epoch 31 (0.01 x 0.1; logged in float32, hence rel 1e-4)
        assert continued["train/lr"].tolist() == pytest.approx([0.001], rel=1e-4)

    unpacked = script("unpack", str(out), LAMBDA_ROOT=str(lambdas), RUNS=str(tmp_path / "runs"))
    assert unpacked.returncode == 0, unpacked.stderr
    assert f"bash experiments/fashion_mnist_macer_lambda/run.sh {lambdas} data_dir=" in unpacked.stdout
    output = lambdas / "sigma0.5_lbd16.out"
    before = output.stat().st_mtime_ns
    environment = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **sweep}
    again = subprocess.run(
        ["bash", str(LAMBDA_SCRIPT), str(lambdas)], env=environment, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "| macer, sigma 0.5 (sigma0.5_lbd4) | 31 | " in again.stdout
    assert output.stat().st_mtime_ns == before  # nothing trained again
