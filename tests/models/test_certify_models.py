"""``python -m rsbench.certify``: imported checkpoints, your own models and ensembles, through the same pipeline.

The strongest check available for each path: the same network reached another way must give the very same rows
(every image's noise is seeded by (certify.seed, index), so rows depend only on the classifier and the protocol).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from torchvision.models import resnet18

from rsbench.archs import LeNet
from rsbench.certify.pipeline.records import read_rows
from rsbench.errors import CheckpointMismatchError, ConfigError
from rsbench.importer import DatasetFacts, import_checkpoint, save_imported
from rsbench.loading import file_digest
from rsbench.models.builders import checkpoint, exported, torchvision_model
from rsbench.models.ensemble import Ensemble
from rsbench.runs.certify_model import certify_model
from rsbench.runs.run import run
from tests.helpers import QUIET, ROOT, certify, compose_config, rows

MNIST = DatasetFacts("mnist_embedded", 10, 1)


@pytest.fixture(scope="module")
def lenet_weights(smoke_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trained LeNet's bare state dict, as someone's own training script would save it."""
    state = torch.load(smoke_run / "checkpoints" / "best.ckpt", weights_only=True)["state_dict"]
    path = tmp_path_factory.mktemp("own") / "lenet.pt"
    torch.save({k.removeprefix("net.1."): v for k, v in state.items() if k.startswith("net.1.")}, path)
    return path


def test_an_rsbench_checkpoint_gives_the_training_runs_rows(smoke_run: Path, tmp_path: Path) -> None:
    metrics = certify(tmp_path, f"model.path={smoke_run / 'checkpoints' / 'best.ckpt'}")
    assert rows(tmp_path) == rows(smoke_run)
    assert (metrics["method"], metrics["dataset"], metrics["arch"]) == ("gaussian", "mnist_embedded", "lenet")
    assert metrics["model"]["kind"] == "checkpoint"
    assert metrics["model"]["sha256"] == file_digest(smoke_run / "checkpoints" / "best.ckpt")


def test_your_own_module_with_its_weights_file(smoke_run: Path, lenet_weights: Path, tmp_path: Path) -> None:
    metrics = certify(
        tmp_path,
        "model=module",
        "model.network._target_=rsbench.archs.LeNet",
        f"model.weights={lenet_weights}",
        "model.input_layer.kind=identity",
        "model.sigma=0.25",
    )
    assert rows(tmp_path) == rows(smoke_run)
    assert metrics["method"] == "external"
    assert metrics["arch"] == "rsbench.archs.lenet.LeNet"
    assert metrics["model"] == {
        "kind": "module",
        "class": "rsbench.archs.lenet.LeNet",
        "weights": str(lenet_weights),
        "sha256": file_digest(lenet_weights),
        "input_layer": {"kind": "identity", "mean": [], "std": []},
    }


def save_archive(kind: str, net: nn.Module, path: Path) -> None:
    if kind == "torchscript":
        torch.jit.save(torch.jit.script(net), str(path))
    else:
        batch = torch.export.Dim("batch")
        torch.export.save(torch.export.export(net, (torch.rand(2, 1, 28, 28),), dynamic_shapes=({0: batch},)), path)


@pytest.mark.filterwarnings("ignore:`torch.jit.*` is deprecated:FutureWarning")
@pytest.mark.parametrize("kind", ["exported", "torchscript"])
def test_an_archive(kind: str, smoke_run: Path, lenet_weights: Path, tmp_path: Path) -> None:
    net = LeNet()
    net.load_state_dict(torch.load(lenet_weights, weights_only=True))
    save_archive(kind, net.eval(), tmp_path / "lenet.pt2")
    overrides = (f"model.path={tmp_path / 'lenet.pt2'}", "model.input_layer.kind=identity", "model.sigma=0.25")
    metrics = certify(tmp_path / "run", f"model={kind}", *overrides)
    assert metrics["model"]["kind"] == kind
    ours, theirs = read_rows(tmp_path / "run" / "certify.tsv"), read_rows(smoke_run / "certify.tsv")
    assert [r.idx for r in ours] == [r.idx for r in theirs]
    # A compiled graph may fuse operations and round differently on a few noisy samples: counts within 2% of n.
    assert all(abs(a.count - b.count) <= 0.02 * a.n for a, b in zip(ours, theirs, strict=True))


def test_an_archive_with_a_fixed_batch_size_is_refused_saying_how_to_export_it(tmp_path: Path) -> None:
    """Issue 21: it failed mid-certification with a 60-line traceback."""
    torch.export.save(torch.export.export(LeNet().eval(), (torch.rand(2, 1, 28, 28),)), tmp_path / "fixed.pt2")
    with pytest.raises(ConfigError, match=r"fixed batch size of 2 \(input \[2, 1, 28, 28\]\).*Dim\(\"batch\"\)"):
        exported(str(tmp_path / "fixed.pt2"), {"kind": "identity"}, 0.25, 10)


def test_a_model_without_its_input_layer_stated_is_refused(lenet_weights: Path, tmp_path: Path) -> None:
    cfg = compose_config(
        "certify=smoke",
        "model=module",
        "model.network._target_=rsbench.archs.LeNet",
        "model.sigma=0.25",
        output_dir=tmp_path,
        config_name="certify_model",
    )
    with pytest.raises(Exception, match=r"input_layer\.kind"):
        certify_model(cfg)


def test_a_torchvision_model_by_name_loads_its_weights_by_name(tmp_path: Path) -> None:
    reference = resnet18(num_classes=10).eval()
    torch.save({"model": reference.state_dict()}, tmp_path / "r18.pt")
    layer = {"kind": "normalize", "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}
    subject = torchvision_model("resnet18", str(tmp_path / "r18.pt"), layer, 0.5, 10, state_dict_key="model")
    x = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.allclose(subject.classifier.eval()(x), reference((x - 0.5) / 0.25), atol=1e-5)
    with pytest.raises(CheckpointMismatchError, match=r"fc\.weight: file \(10, 512\), model \(100, 512\)"):
        torchvision_model("resnet18", str(tmp_path / "r18.pt"), layer, 0.5, 100, state_dict_key="model")
    with pytest.raises(ConfigError, match="not a state dict of tensors"):
        torchvision_model("resnet18", str(tmp_path / "r18.pt"), layer, 0.5, 10)


def test_imported_checkpoint_certifies_alike_with_both_commands(tmp_path: Path) -> None:
    """A MACER LeNet (no input layer, bare keys) imported, then certified by rsbench.certify and by rsbench."""
    network = LeNet().eval()
    torch.save({"net": network.state_dict(), "epoch": 440}, tmp_path / "440.pth")
    imported = save_imported(import_checkpoint("macer", tmp_path / "440.pth", MNIST, 0.25), tmp_path / "m.ckpt")
    metrics = certify(tmp_path / "certify", f"model.path={imported}")
    assert metrics["method"] == "macer"
    assert metrics["model"]["signature"]["input_layer"]["kind"] == "identity"
    run(compose_config(*QUIET, "experiment=smoke", "train=false", f"ckpt_path={imported}", output_dir=tmp_path / "run"))
    assert rows(tmp_path / "certify") == rows(tmp_path / "run")


def test_importer_command_line(tmp_path: Path) -> None:
    network = LeNet().eval()
    folder = tmp_path / "mnist" / "consistency" / "noise_0.50" / "lenet" / "0"
    folder.mkdir(parents=True)
    state = {f"1.{k}": v for k, v in network.state_dict().items()}  # Sequential(nn.Identity(), LeNet)
    torch.save({"epoch": 90, "arch": "lenet", "state_dict": state, "optimizer": {}}, folder / "checkpoint.pth.tar")
    command = [sys.executable, "-m", "rsbench.importer", "origin=consistency", f"path={folder / 'checkpoint.pth.tar'}"]
    result = subprocess.run(
        [*command, "dataset=mnist_embedded", "sigma=0.5"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "python -m rsbench.certify model.path=" in result.stdout
    saved = torch.load(folder / "checkpoint.rsbench.ckpt", weights_only=True)
    assert saved["rsbench"] == {
        "arch": "lenet",
        "num_classes": 10,
        "input_layer": {"kind": "identity", "mean": [], "std": []},
        "sigma": 0.5,
        "method": "consistency",
    }


# Ensembles.


def test_ensemble_aggregations() -> None:
    a = nn.Linear(1, 3, bias=True)
    b = nn.Linear(1, 3, bias=True)
    with torch.no_grad():
        a.weight.zero_(), b.weight.zero_()
        a.bias.copy_(torch.tensor([2.0, 0.0, 1.9]))  # member a: class 0 (softmax 0.49, 0.07, 0.44)
        b.bias.copy_(torch.tensor([-5.0, 0.0, 1.0]))  # member b: class 2
    x = torch.zeros(1, 1)
    assert torch.allclose(Ensemble([a, b], "logits")(x), torch.tensor([[-1.5, 0.0, 1.45]]))
    softmax = (a(x).softmax(1) + b(x).softmax(1)) / 2
    assert torch.allclose(Ensemble([a, b], "softmax")(x), softmax)
    assert Ensemble([a, b], "vote")(x).tolist() == [[1.0, 0.0, 1.0]]  # a tie: argmax takes the lowest class, 0
    assert int(Ensemble([a, b], "vote")(x).argmax()) == 0
    with pytest.raises(ValueError, match="at least 2 members"):
        Ensemble([a])
    with pytest.raises(ValueError, match="aggregation must be one of"):
        Ensemble([a, b], "median")  # type: ignore[arg-type]


@pytest.mark.parametrize("aggregation", ["logits", "softmax", "vote"])
def test_an_ensemble_of_one_model_twice_is_that_model(smoke_run: Path, tmp_path: Path, aggregation: str) -> None:
    best = smoke_run / "checkpoints" / "best.ckpt"
    metrics = certify(tmp_path, "model=ensemble", f"model.members=[{best},{best}]", f"model.aggregation={aggregation}")
    assert rows(tmp_path) == rows(smoke_run)
    assert (metrics["method"], metrics["arch"]) == ("ensemble(gaussian)", "lenet+lenet")
    assert metrics["model"]["aggregation"] == aggregation
    assert len(metrics["model"]["members"]) == 2


def signed_copy(source: Path, out: Path, **signature: object) -> Path:
    """A copy of an rsbench checkpoint whose signature differs in ``signature`` (another sigma, input layer, ...)."""
    saved = torch.load(source, weights_only=True)
    saved["rsbench"] = {**saved["rsbench"], **signature}
    torch.save(saved, out)
    return out


def test_ensemble_members_must_agree(smoke_run: Path, tmp_path: Path) -> None:
    best = str(smoke_run / "checkpoints" / "best.ckpt")
    at_half = str(signed_copy(Path(best), tmp_path / "s05.ckpt", sigma=0.5))
    with pytest.raises(CheckpointMismatchError, match=r"sigma: checkpoint has 0\.5, this run expects 0\.25"):
        checkpoint_ensemble([best, at_half])
    with pytest.raises(ConfigError, match=r"trained at sigmas \[0.25, 0.5\]: set certify.sigma"):
        checkpoint_ensemble([best, at_half], allow_sigma_mismatch=True)
    assert checkpoint_ensemble([best, at_half], allow_sigma_mismatch=True, sigma=0.5).sigma == 0.5
    centered = {"kind": "center", "mean": [0.1307], "std": []}
    other_layer = str(signed_copy(Path(best), tmp_path / "center.ckpt", input_layer=centered))
    with pytest.raises(CheckpointMismatchError, match="input_layer: checkpoint has"):
        checkpoint_ensemble([best, other_layer])
    assert checkpoint_ensemble([best, other_layer], allow_mixed_input_layers=True).num_classes == 10
    with pytest.raises(ConfigError, match="at least 2"):
        checkpoint_ensemble([best])


def checkpoint_ensemble(members: list[str], **options: object):
    from rsbench.models.builders import ensemble

    return ensemble(members, num_classes=10, in_channels=1, **options)  # type: ignore[arg-type]


def test_a_checkpoint_of_another_class_count_is_refused(smoke_run: Path) -> None:
    with pytest.raises(CheckpointMismatchError, match="num_classes: checkpoint has 10, this run expects 100"):
        checkpoint(str(smoke_run / "checkpoints" / "best.ckpt"), num_classes=100, in_channels=1)


def test_a_file_that_is_not_an_rsbench_checkpoint_points_to_the_importer(tmp_path: Path) -> None:
    torch.save({"net": LeNet().state_dict(), "epoch": 1}, tmp_path / "macer.pth")
    with pytest.raises(CheckpointMismatchError, match=r"python -m rsbench\.importer"):
        checkpoint(str(tmp_path / "macer.pth"), num_classes=10, in_channels=1)
