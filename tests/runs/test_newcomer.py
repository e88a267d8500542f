"""What a newcomer meets on a first day: the terminal output of a run, warnings that save a wasted job, refusals that
say what was meant, sweeps that sort as numbers, folders that name the threat model, and docs that run as typed."""

from __future__ import annotations

import fcntl
import logging
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
import warnings
from pathlib import Path

import pytest

from rsbench.runs.quiet import ADVERT, quiet_lightning
from tests.helpers import ROOT, environment


def in_a_terminal(*args: str, timeout: float = 600) -> tuple[int, str]:
    """``python -m rsbench <args>`` with stdout and stderr on a pseudo-terminal (as a user's shell runs it)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a 120-column terminal
    process = subprocess.Popen(
        [sys.executable, "-m", "rsbench", *args],
        cwd=ROOT,
        env=environment(TERM="xterm"),
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return process.wait(timeout=60), b"".join(chunks).decode(errors="replace")


@pytest.mark.slow  # a whole smoke run in a pseudo-terminal: 33 s on 2 cores
def test_a_run_in_a_terminal_shows_one_clean_display_per_stage(tmp_path: Path) -> None:
    """In a terminal: no Lightning advert, deprecation warning or model summary; no Lightning test bar under the
    certification bar (which printed a line per image there), and the result line on a line of its own."""
    run = tmp_path / "run"
    code, output = in_a_terminal("experiment=smoke", "logger=none", "certify.n=1000", f"hydra.run.dir={run}")
    assert code == 0, output[-3000:]
    lines = [line.rstrip("\r").split("\r")[-1] for line in output.split("\n")]  # shown: the last redraw
    assert ADVERT not in output
    assert "LeafSpec" not in output
    assert "Trainable params" not in output
    assert "Testing" not in output  # Lightning's test bar, which never moved while certification ran
    assert "Epoch 0" in output  # training keeps its bar
    certifying = [line for line in output.split("\n") if "certifying (certify)" in line]
    assert len(certifying) <= 1, certifying  # one bar redrawn in place, not a line per image
    (result,) = [line for line in lines if "certification results" in line]
    assert re.match(r"^\[[\d-]+ [\d:,]+\]\[rsbench", result), result  # the log line, not glued to a bar


def test_lightning_s_advert_and_its_torch_warning_are_dropped_and_nothing_else() -> None:
    quiet_lightning()
    quiet_lightning()  # idempotent: one filter
    logger = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    assert len(logger.filters) == len({id(f) for f in logger.filters})
    advert = logger.makeRecord(logger.name, logging.INFO, __file__, 1, f"{ADVERT} try litlogger", None, None)
    other = logger.makeRecord(logger.name, logging.INFO, __file__, 1, "GPU available: False", None, None)
    assert not all(f.filter(advert) for f in logger.filters)
    assert all(f.filter(other) for f in logger.filters)
    from torch.utils._pytree import LeafSpec

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        quiet_lightning()
        LeafSpec()
        warnings.warn("another FutureWarning", FutureWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["another FutureWarning"]


def test_the_model_summary_is_off_by_default() -> None:
    import yaml

    trainer = yaml.safe_load((ROOT / "conf" / "trainer" / "default.yaml").read_text())
    assert trainer["enable_model_summary"] is False
    assert trainer["enable_progress_bar"] is True


def test_the_reports_page_released_example_runs_as_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/reports.md's example reads the files rsbench ships and writes to ./report, as the page says."""
    from rsbench.report.__main__ import default_out
    from rsbench.report.__main__ import main as report

    page = (ROOT / "docs" / "reports.md").read_text()
    (command,) = re.findall(r"```bash\n(python -m rsbench\.report rsbench/report/released/[^`]+?)\n```", page)
    words = command.replace("\\\n", " ").split()[3:]
    expanded = []
    for word in words:
        braces = re.fullmatch(r"(.*)\{([^}]+)\}(.*)", word)
        expanded += [f"{braces[1]}{m}{braces[3]}" for m in braces[2].split(",")] if braces else [word]
    files = [ROOT / w for w in expanded if w.startswith("rsbench/")]
    assert len(files) == 3
    assert all(f.is_file() for f in files)
    assert default_out(files) == Path("report")
    assert "`<folder>/report` when one run or sweep folder is given, else `./report`" in page
    monkeypatch.chdir(tmp_path)
    options = [w for w in expanded if not w.startswith("rsbench/")]
    report([*map(str, files), *options, "--no-plots", "--no-published"])
    printed = capsys.readouterr().out
    assert "| catrs       | 0.25    | 0.562 [0.554, 0.570]" in printed
    assert (tmp_path / "report" / "report.md").is_file()


@pytest.mark.slow  # two commands in subprocesses: 39 s on 2 cores
def test_certifying_a_checkpoint_on_another_dataset_warns_and_goes_on(smoke_checkpoint: Path, tmp_path: Path) -> None:
    """An embedded-MNIST LeNet certified on Fashion-MNIST (same shape, same classes: nothing refuses it) gets a
    warning naming both datasets; certification still runs (a transfer study is legitimate)."""

    def certify(dataset: str, run: Path) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "rsbench.certify", f"model.path={smoke_checkpoint}", f"dataset={dataset}"]
        return subprocess.run(
            [*command, "certify=smoke", f"hydra.run.dir={run}"],
            cwd=ROOT,
            env=environment(),
            capture_output=True,
            text=True,
            timeout=600,
        )

    run = tmp_path / "certified"
    done = certify("fashion_mnist", run)
    assert done.returncode == 0, done.stderr[-2000:]
    output = done.stdout + done.stderr
    assert "was trained on mnist_embedded, and this run certifies it on fashion_mnist" in output
    assert (run / "metrics.json").is_file()
    same = certify("mnist_embedded", tmp_path / "same")
    assert same.returncode == 0, same.stderr[-2000:]
    assert "was trained on" not in same.stdout + same.stderr


def test_an_older_checkpoint_s_dataset_is_read_from_its_run_folder(smoke_checkpoint: Path, tmp_path: Path) -> None:
    """A checkpoint written before signatures recorded the dataset: its run's .hydra/config.yaml says it."""
    import torch

    from rsbench.checkpoint import trained_on

    state = torch.load(smoke_checkpoint, map_location="cpu", weights_only=True)
    signature = {k: v for k, v in state["rsbench"].items() if k != "dataset"}
    folder = tmp_path / "old_run" / "checkpoints"
    folder.mkdir(parents=True)
    (folder.parent / ".hydra").mkdir()
    (folder.parent / ".hydra" / "config.yaml").write_text("dataset:\n  name: mnist_embedded\n")
    assert trained_on(signature, folder / "best.ckpt") == "mnist_embedded"
    assert trained_on(signature, tmp_path / "elsewhere.ckpt") is None  # not in a run folder: unknown, no warning
    assert trained_on({**signature, "dataset": "cifar10"}, folder / "best.ckpt") == "cifar10"


def test_a_sweeps_rows_sort_as_numbers(tmp_path: Path) -> None:
    """A lambda sweep's rows: 5, 10, 20 (they sorted as text: 10, 20, 5)."""
    import numpy as np

    from rsbench.report.load import find_results
    from rsbench.report.rows import group_rows
    from tests.run_folders import make_run, radii_of

    rng = np.random.default_rng(3)
    for lbd in ("10", "20", "5"):
        make_run(tmp_path / f"lbd_{lbd}", radii_of(rng), method="macer", overrides=[f"method.lbd={lbd}"])
    rows, keys, _ = group_rows(find_results([tmp_path]))
    assert keys == ["method.lbd"]
    assert [dict(row.settings)["method.lbd"] for row in rows] == ["5", "10", "20"]


@pytest.mark.parametrize(
    ("overrides", "skip"),
    [
        ((), 5),  # the default run: certify=quick's every 5th image
        (("certify=sequential",), 5),  # kept (it was the whole test split)
        (("certify=sequential", "certify.skip=2"), 2),  # told otherwise
        (("certify=sequential", "dataset=imagenet"), 100),
        (("certify=sequential", "dataset=fashion_mnist"), 1),
    ],
)
def test_sequential_keeps_the_datasets_certification_subset(overrides: tuple[str, ...], skip: int) -> None:
    from hydra import compose, initialize_config_dir

    from rsbench.runs.cli import config_dir

    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    assert cfg.certify.skip == skip
    assert cfg.certify.mode == ("sequential" if overrides else "standard")
    assert cfg.certify.n == (100_000 if overrides else 10_000)


@pytest.mark.parametrize(
    ("module", "arguments", "meant"),
    [
        ("rsbench", ("certfy.n=100",), "did you mean certify.n?"),
        (
            "rsbench.certify",
            ("model.path=experiments/fashion_mnist_dual_rs/models/gaussian_sigma0.25.ckpt", "model.sigma=0.5"),
            "did you mean certify.sigma?",
        ),
    ],
)
def test_a_refused_key_names_the_one_meant(module: str, arguments: tuple[str, ...], meant: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, *arguments], cwd=ROOT, env=environment(), capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.startswith("rsbench: error: ")
    assert meant in done.stderr, done.stderr


def test_an_rsbench_checkpoint_given_as_plain_weights_is_sent_to_model_checkpoint() -> None:
    import torch

    from rsbench.errors import ConfigError
    from rsbench.models import builders, pretrained

    path = "experiments/fashion_mnist_dual_rs/models/gaussian_sigma0.25.ckpt"
    loaded = torch.load(ROOT / path, map_location="cpu", weights_only=True)
    for reader in (builders._state_dict, pretrained._state_dict):  # model=module / torchvision, and model=timm / hf
        with pytest.raises(ConfigError, match=f"did you mean model=checkpoint model.path={path}"):
            reader(loaded, None, path)
        assert set(reader(loaded, "state_dict", path)) == set(loaded["state_dict"])  # naming the entry still works


def test_progress_to_a_file_says_something_within_seconds(caplog: pytest.LogCaptureFixture) -> None:
    """Written to a file, the certification progress logged nothing for its first 30 s: now a line at the start and
    one at the first image (with its pace), then every interval."""
    from rsbench.certify.pipeline.progress import ProgressLines

    with caplog.at_level(logging.INFO, logger="rsbench"):
        counter = ProgressLines(10, 0, "certifying (certify)", "images", interval=3600.0)
        counter.update(1)
        counter.update(1)  # within the interval: no line
        lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "certifying (certify): 0 of 10 images"
    assert lines[1].startswith("certifying (certify): 1 of 10 images (")
    assert "left)" in lines[1]
    assert len(lines) == 2


def test_the_readme_says_what_to_do_when_pytorchs_cpu_index_is_out_of_reach() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "Where PyTorch's index cannot be reached" in readme
    assert "`make install` still works, from the pins in `setup.cfg`" in readme
    makefile = (ROOT / "Makefile").read_text()
    assert "install: ##" in makefile
    assert "install-cpu: ##" in makefile
