"""Architectures: shapes, the input layer kinds, and the signature that checkpoints are checked against."""

from __future__ import annotations

import pytest
import torch

from rsbench.archs import CifarResNet, Classifier, InputLayer, LeNet
from rsbench.archs.resnet import cifar_resnet18, ddrs_resnet18, imagenet_resnet50
from rsbench.checkpoint import check_signature
from rsbench.errors import CheckpointMismatchError

CIFAR = {"kind": "normalize", "mean": [0.4914, 0.4822, 0.4465], "std": [0.2023, 0.1994, 0.2010]}


@pytest.mark.parametrize(
    ("net", "shape", "classes"),
    [
        (LeNet(10), (2, 1, 28, 28), 10),
        (LeNet(7, in_channels=3), (2, 3, 28, 28), 7),
        (CifarResNet(20, 10), (2, 3, 32, 32), 10),
        (CifarResNet(110, 100), (2, 3, 32, 32), 100),
        (cifar_resnet18(10), (2, 3, 32, 32), 10),
        (ddrs_resnet18(10), (2, 3, 32, 32), 10),
        (imagenet_resnet50(1000), (1, 3, 224, 224), 1000),
    ],
)
def test_forward_shapes(net: torch.nn.Module, shape: tuple[int, ...], classes: int) -> None:
    net.eval()
    with torch.no_grad():
        logits = net(torch.rand(shape))
    assert logits.shape == (shape[0], classes)


def test_resnet_depths() -> None:
    blocks = lambda net: sum(1 for m in net.modules() if type(m).__name__ == "BasicBlock")  # noqa: E731
    assert blocks(CifarResNet(20)) == 9
    assert blocks(CifarResNet(110)) == 54
    with pytest.raises(ValueError, match="6n\\+2"):
        CifarResNet(21)


def test_cohen_state_dict_layout() -> None:
    model = Classifier("cifar_resnet20", CifarResNet(20), CIFAR)
    keys = list(model.state_dict())
    assert keys[0] == "1.conv1.weight"  # the input layer's constants are not state, as in Cohen's NormalizeLayer
    assert "1.layer3.2.bn2.running_mean" in keys
    assert "1.fc.weight" in keys


def test_input_layer_kinds() -> None:
    x = torch.rand(2, 3, 4, 4)
    mean, std = torch.tensor(CIFAR["mean"]).view(3, 1, 1), torch.tensor(CIFAR["std"]).view(3, 1, 1)
    assert torch.allclose(InputLayer(**CIFAR)(x), (x - mean) / std)
    assert torch.allclose(InputLayer("center", CIFAR["mean"])(x), x - mean)
    assert torch.equal(InputLayer("identity")(x), x)


def test_input_layer_moves_with_the_model() -> None:
    layer = InputLayer(**CIFAR).to(torch.float64)
    assert layer.mean.dtype == torch.float64
    assert "mean" not in layer.state_dict()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "standardize"}, "must be one of"),
        ({"kind": "normalize", "mean": [0.5]}, "needs per-channel `std`"),
        ({"kind": "center"}, "needs per-channel `mean`"),
        ({"kind": "normalize", "mean": [0.5], "std": [0.0]}, "std must be > 0"),
    ],
)
def test_bad_input_layer(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        InputLayer(**kwargs)


def test_signature_and_its_check() -> None:
    model = Classifier("lenet", LeNet(10), {"kind": "identity"})
    signature = model.signature()
    assert signature == {"arch": "lenet", "num_classes": 10, "input_layer": {"kind": "identity", "mean": [], "std": []}}
    check_signature(signature, model.signature())
    normalized = Classifier("lenet", LeNet(10), {"kind": "normalize", "mean": [0.1307], "std": [0.3081]})
    with pytest.raises(CheckpointMismatchError, match="input_layer: checkpoint has") as error:
        check_signature(signature, normalized.signature(), "model.ckpt")
    assert "model.ckpt" in str(error.value)
    with pytest.raises(CheckpointMismatchError, match="num_classes: checkpoint has 10, this run expects 100"):
        check_signature(signature, Classifier("lenet", LeNet(100), {"kind": "identity"}).signature())


def test_signature_tolerates_float_noise_only() -> None:
    saved = {"sigma": 0.25, "input_layer": {"kind": "normalize", "mean": [0.4914], "std": [0.2023]}}
    check_signature(saved, {**saved, "sigma": 0.25 + 1e-12})
    with pytest.raises(CheckpointMismatchError):
        check_signature(saved, {**saved, "input_layer": {"kind": "normalize", "mean": [0.4914], "std": [0.2010]}})
