"""``tools/cell_state.py``: a cell stopped on one machine continues from its study's files on the next, bit for bit.

Issue 50: a paper-scale cell was lost when its machine was replaced, because its run folder lived outside the
repository. Here a run is stopped after its second epoch, its state saved into a study folder (what git would carry),
restored into a new folder and resumed there: it ends with the weights, the training log and the certificates of a
run that was never stopped (the same process and thread count, so the floats are equal, not merely close).
"""

from __future__ import annotations

import csv
import signal
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch

from rsbench.runs.cli import expand_resume
from rsbench.runs.epoch_seed import EpochSeed
from rsbench.runs.job import execute
from rsbench.stop import StopRequested
from tests.helpers import compose_config, rows
from tests.scripts import tool_script

pytestmark = pytest.mark.study

OVERRIDES = (
    "experiment=smoke",
    "trainer.max_epochs=3",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
    "logger=csv",
    "train_layout=channels_last",  # the layout the paper-scale cells train in
)
STOP_AT = 2  # the epoch the first run is stopped before (epochs 0 and 1 are in its last.ckpt)


def train(folder: Path, overrides: tuple[str, ...] = OVERRIDES) -> None:
    """Run ``python -m rsbench`` with ``overrides`` in ``folder``, in this process."""
    execute(compose_config(*overrides, output_dir=folder), folder, list(overrides))


def training_losses(folder: Path) -> list[tuple[str, str, str]]:
    """The logged (epoch, step, loss) of every training step."""
    with (folder / "logs" / "metrics.csv").open() as file:
        logged = [row for row in csv.DictReader(file) if row["train/loss_step"]]
    return sorted((row["epoch"], row["step"], row["train/loss_step"]) for row in logged)


def test_a_stopped_cell_saved_into_its_study_resumes_elsewhere_as_if_never_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = tmp_path / "uninterrupted"
    train(reference)

    seed_epoch = EpochSeed.on_train_epoch_start

    def stop_before(self: EpochSeed, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        if trainer.current_epoch == STOP_AT:
            raise StopRequested(signal.SIGTERM)  # as a SIGTERM between two epochs
        seed_epoch(self, trainer, module)

    first = tmp_path / "machine_1" / "run"
    with monkeypatch.context() as patch:
        patch.setattr(EpochSeed, "on_train_epoch_start", stop_before)
        with pytest.raises(StopRequested):
            train(first)
    assert torch.load(first / "checkpoints" / "last.ckpt", weights_only=False)["epoch"] == STOP_AT - 1

    cell = tmp_path / "study" / "runs" / "cell"
    assert tool_script("cell_state").main(["save", str(first), str(cell)]) == 0
    carried = sorted(p.relative_to(cell).as_posix() for p in cell.rglob("*") if p.is_file())
    assert "checkpoints/last.ckpt" in carried
    assert "logs/training_metrics.csv" in carried
    assert not any(name.endswith(("status.json", ".log", "lock", "hparams.yaml")) for name in carried)

    second = tmp_path / "machine_2" / "run"
    assert tool_script("cell_state").main(["restore", str(cell), str(second)]) == 0
    argv = expand_resume([f"resume={second}"])
    overrides = tuple(arg for arg in argv if not arg.startswith("hydra.run.dir="))
    assert overrides == OVERRIDES  # the run's own settings, from its stored .hydra/
    train(second, overrides)

    ours, theirs = (torch.load(d / "checkpoints" / "last.ckpt", weights_only=False) for d in (second, reference))
    assert sorted(p.name for p in (second / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]  # not best-v1
    assert ours["epoch"] == theirs["epoch"] == 2
    assert ours["state_dict"].keys() == theirs["state_dict"].keys()
    assert all(torch.equal(ours["state_dict"][key], theirs["state_dict"][key]) for key in ours["state_dict"])
    assert training_losses(second) == training_losses(reference)  # every epoch logged once, with the same losses
    assert rows(second) == rows(reference)  # the same certificates
    best = (torch.load(d / "checkpoints" / "best.ckpt", weights_only=False) for d in (second, reference))
    assert len({checkpoint["epoch"] for checkpoint in best}) == 1  # the same epoch selected as the best


def test_a_folder_without_a_checkpoint_is_not_carried(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "certify.tsv").write_text("idx\tlabel\tpredict\tradius\tcorrect\ttime\n")
    with pytest.raises(SystemExit, match=r"holds no checkpoints/last\.ckpt or checkpoints/best\.ckpt"):
        tool_script("cell_state").main(["save", str(tmp_path / "run"), str(tmp_path / "cell")])
    assert not (tmp_path / "cell").exists()
