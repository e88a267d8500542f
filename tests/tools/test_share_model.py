"""``tools/share_model.py``: a run's checkpoint as a weights-only file that ``rsbench.certify`` loads, with its card."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from rsbench.archs.registry import build_classifier
from rsbench.checkpoint import SIGNATURE_KEY, make_checkpoint, read_classifier
from rsbench.loading import file_digest
from rsbench.models.builders import checkpoint as certifiable
from tests.scripts import tool_script

pytestmark = pytest.mark.study

FASHION = {"kind": "identity", "mean": None, "std": None}


def finished_run(run: Path) -> torch.nn.Module:
    """A run folder as training leaves it: a Lightning checkpoint with optimizer state and a teacher's weights beside
    the classifier's, and the config Hydra stored."""
    torch.manual_seed(0)
    net = build_classifier("lenet", 10, FASHION, in_channels=1)
    checkpoint = make_checkpoint(net, 0.25, "smoothmix")
    checkpoint["state_dict"]["teacher.net.1.conv1.weight"] = torch.ones(3)  # another network: not shared
    checkpoint.update(epoch=89, global_step=21150, optimizer_states=[{"state": {}, "param_groups": []}])
    (run / "checkpoints").mkdir(parents=True)
    torch.save(checkpoint, run / "checkpoints" / "last.ckpt")
    (run / ".hydra").mkdir()
    dataset = {"name": "fashion_mnist", "num_classes": 10, "image_shape": [1, 28, 28]}
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"seed": 0, "sigma": 0.25, "dataset": dataset}))
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["dataset=fashion_mnist", "method=smoothmix"]))
    return net


def test_the_shared_file_holds_the_classifier_alone_and_certify_loads_it_with_the_same_weights(tmp_path: Path) -> None:
    net = finished_run(tmp_path / "run")
    out = tmp_path / "models" / "smoothmix_sigma0.25.ckpt"
    records = "experiments/fashion_mnist_table/runs/smoothmix_sigma0.25"
    assert tool_script("share_model").main([str(tmp_path / "run"), str(out), "--records", records]) == 0
    shared = torch.load(out, weights_only=True)
    assert sorted(shared) == ["rsbench", "state_dict"]  # no optimizer, no loop state
    assert all(key.startswith("net.") for key in shared["state_dict"])  # no teacher
    loaded, signature = read_classifier(out, "shared", num_classes=10, in_channels=1)
    assert (signature["method"], signature["sigma"]) == ("smoothmix", 0.25)
    for key, value in net.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value)  # the same tensors, bit for bit
    subject = certifiable(str(out), 10, 1)  # what `python -m rsbench.certify model.path=<file>` builds
    assert subject.provenance["sha256"] == file_digest(out)
    card = yaml.safe_load(out.with_suffix(".yaml").read_text())
    assert card["sha256"] == file_digest(out)
    assert card["bytes"] == out.stat().st_size
    assert (card["method"], card["arch"], card["sigma"], card["dataset"]) == (
        "smoothmix",
        "lenet",
        0.25,
        "fashion_mnist",
    )
    assert (card["epochs_trained"], card["seed"], card["records"]) == (90, 0, records)
    assert card["overrides"] == ["dataset=fashion_mnist", "method=smoothmix"]
    assert card["certify"] == f"python -m rsbench.certify model.path={out} dataset=fashion_mnist"


def test_the_card_names_the_file_and_its_records_relative_to_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given absolute paths inside the working directory (the repository), the card names them from there."""
    finished_run(tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "experiments" / "study" / "models" / "cell.ckpt"
    records = tmp_path / "experiments" / "study" / "runs" / "cell"
    assert tool_script("share_model").main([str(tmp_path / "run"), str(out), "--records", str(records)]) == 0
    card = yaml.safe_load(out.with_suffix(".yaml").read_text())
    assert (card["file"], card["records"]) == ("cell.ckpt", "experiments/study/runs/cell")
    command = "python -m rsbench.certify model.path=experiments/study/models/cell.ckpt dataset=fashion_mnist"
    assert card["certify"] == command


def test_a_checkpoint_rsbench_did_not_write_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    finished_run(tmp_path / "run")
    checkpoint = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)
    del checkpoint[SIGNATURE_KEY]
    torch.save(checkpoint, tmp_path / "run" / "checkpoints" / "last.ckpt")
    out = tmp_path / "x.ckpt"
    assert tool_script("share_model").main([str(tmp_path / "run"), str(out)]) == 2
    assert "has no rsbench signature" in capsys.readouterr().out
    assert not out.exists()
    assert tool_script("share_model").main([str(tmp_path / "nowhere"), str(out)]) == 2
    assert "is not a file" in capsys.readouterr().out
