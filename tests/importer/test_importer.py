"""Importing released checkpoints: each codebase's layout, by name, with its input layer; what does not fit fails.

The reference networks below are written here from reading each codebase's architecture (module names, forward
pass, where normalisation happens); the synthetic checkpoints are saved the way each codebase's training script
saves them (random weights, perturbed BatchNorm statistics, an optimizer state after one step). An import is right
when rsbench's network computes the same function as the reference.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models import resnet18, resnet50

from rsbench.errors import CheckpointMismatchError, ConfigError, UnsafeFileError
from rsbench.importer import DatasetFacts, convert, import_checkpoint, save_imported
from rsbench.importer.convert import IMPORT_KEY, check_output
from rsbench.loading import load_weights_only
from rsbench.methods.card import origins
from rsbench.models.builders import checkpoint as checkpoint_subject
from tests.helpers import compose_config

C10_MEAN, C10_STD = [0.4914, 0.4822, 0.4465], [0.2023, 0.1994, 0.2010]  # locuslab/smoothing datasets.py
C100_MEAN, C100_STD = [0.5071, 0.4867, 0.4408], [0.2675, 0.2565, 0.2761]  # smoothing-catrs datasets.py
IN_MEAN, IN_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
CIFAR10 = DatasetFacts("cifar10", 10, 3, C10_MEAN, C10_STD)
CIFAR100 = DatasetFacts("cifar100", 100, 3, C100_MEAN, C100_STD)
IMAGENET = DatasetFacts("imagenet", 1000, 3, IN_MEAN, IN_STD)
MNIST = DatasetFacts("mnist_embedded", 10, 1)


class PlainNormalize(nn.Module):
    """The authors' NormalizeLayer / InputCenterLayer: constants as plain attributes, so never in the state dict."""

    def __init__(self, mean: list[float], std: list[float] | None = None) -> None:
        super().__init__()
        self.means = torch.tensor(mean).view(1, -1, 1, 1)
        self.sds = torch.tensor(std).view(1, -1, 1, 1) if std is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - self.means if self.sds is None else (x - self.means) / self.sds


class BearpawBlock(nn.Module):
    """bearpaw's BasicBlock: conv1, bn1, relu, conv2, bn2, optional downsample (1x1 conv, BN), residual, relu."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class BearpawResNet(nn.Module):
    """The CIFAR ResNet of Cohen, SmoothAdv and the Jeong lineage (MACER's ResNet_Cifar has the same names)."""

    def __init__(self, depth: int, classes: int = 10) -> None:
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = nn.Sequential(*[BearpawBlock(16, 16, 1) for _ in range(n)])
        self.layer2 = nn.Sequential(BearpawBlock(16, 32, 2), *[BearpawBlock(32, 32, 1) for _ in range(n - 1)])
        self.layer3 = nn.Sequential(BearpawBlock(32, 64, 2), *[BearpawBlock(64, 64, 1) for _ in range(n - 1)])
        self.fc = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer3(self.layer2(self.layer1(F.relu(self.bn1(self.conv1(x))))))
        return self.fc(F.avg_pool2d(x, 8, stride=1).flatten(1))  # MACER: AvgPool2d(8, stride=1)


class FunctionalLeNet(nn.Module):
    """MACER's and the Jeong lineage's LeNet: conv1, conv2, fc1, fc2 with functional relu and max-pool."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5, 1)
        self.conv2 = nn.Conv2d(20, 50, 5, 1)
        self.fc1 = nn.Linear(800, 500)
        self.fc2 = nn.Linear(500, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        return self.fc2(F.relu(self.fc1(x.view(-1, 800))))


class DDRSResNet18(nn.Module):
    """DDRS's CIFAR-10 network: torchvision's ResNet-18 without the stem BN, normalising inside, softmax at the end."""

    def __init__(self) -> None:
        super().__init__()
        net = resnet18(num_classes=10)
        self.conv1, self.relu, self.maxpool = net.conv1, net.relu, net.maxpool
        self.layer1, self.layer2, self.layer3, self.layer4 = net.layer1, net.layer2, net.layer3, net.layer4
        self.avgpool, self.flat_layer, self.fc, self.softmax = net.avgpool, nn.Flatten(), net.fc, nn.Softmax(dim=1)
        self.mean = torch.tensor(C10_MEAN).view(1, 3, 1, 1)
        self.std = torch.tensor(C10_STD).view(1, 3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.conv1((x - self.mean) / self.std)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.softmax(self.fc(self.flat_layer(self.avgpool(x))))


class ImagenetWrapper(nn.Module):
    """DDRS's ImageNet wrapper: (x - mean) / std (std 1 with --center-only), a DataParallel ResNet-50, softmax."""

    def __init__(self, std: list[float]) -> None:
        super().__init__()
        self.model = nn.DataParallel(resnet50())
        self.mean = torch.tensor(IN_MEAN).view(1, 3, 1, 1)
        self.std = torch.tensor(std).view(1, 3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model((x - self.mean) / self.std).softmax(dim=1)


def randomize(model: nn.Module, seed: int = 0) -> nn.Module:
    """Random BatchNorm affine parameters, and statistics fitted to random inputs: any misplaced tensor changes the
    function, while a 110-layer network's activations stay finite in eval mode (weights keep their random init)."""
    generator = torch.Generator().manual_seed(seed)
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    with torch.no_grad():
        for norm in norms:
            norm.weight.copy_(1 + 0.2 * torch.randn(norm.weight.shape, generator=generator))
            norm.bias.copy_(0.2 * torch.randn(norm.bias.shape, generator=generator))
            norm.momentum = None  # cumulative average of the batches below
        if norms:
            model.train()
            model(torch.rand(4, *first_conv_input(model), generator=generator))
    return model.eval()


def first_conv_input(model: nn.Module) -> tuple[int, ...]:
    first = next(m for m in model.modules() if isinstance(m, nn.Conv2d))
    return (first.in_channels, 32, 32)


def optimizer_state(model: nn.Module, shape: tuple[int, ...] | None) -> dict:
    """The optimizer's state dict as saved with the model: after one step (momentum buffers), or before any."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    if shape is not None:
        parameters = [p.detach().clone() for p in model.parameters()]
        model.eval()
        model(torch.rand(2, *shape)).sum().backward()
        optimizer.step()
        with torch.no_grad():  # keep the weights: only the optimizer's state matters here
            for parameter, saved in zip(model.parameters(), parameters, strict=True):
                parameter.copy_(saved)
    return optimizer.state_dict()


def save_sequential(model: nn.Sequential, arch: str, path: Path, shape: tuple[int, ...] | None) -> Path:
    """How Cohen, SmoothAdv and the Jeong lineage save: {epoch, arch, state_dict, optimizer} of the Sequential."""
    path.parent.mkdir(parents=True, exist_ok=True)
    optimizer = optimizer_state(model, shape)
    torch.save({"epoch": 90, "arch": arch, "state_dict": model.state_dict(), "optimizer": optimizer}, path)
    return path


def save_macer(model: nn.Module, path: Path) -> Path:
    """MACER's main.py: {'net': base_model.state_dict(), 'epoch'} (the bare network, no input layer)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"net": model.state_dict(), "epoch": 440}, path)
    return path


def save_ddrs(model: nn.Module, path: Path, shape: tuple[int, ...] | None) -> Path:
    """DDRS's save_checkpoint: {epoch, state_dict, optimizer_param}."""
    path.parent.mkdir(parents=True, exist_ok=True)
    optimizer = optimizer_state(model, shape)
    torch.save({"epoch": 200, "state_dict": model.state_dict(), "optimizer_param": optimizer}, path)
    return path


def certified_network(checkpoint: dict, facts: DatasetFacts, tmp_path: Path) -> nn.Module:
    """The classifier ``python -m rsbench.certify`` builds from the imported checkpoint (saved and read back)."""
    path = save_imported(checkpoint, tmp_path / "imported.ckpt", overwrite=True)
    return checkpoint_subject(str(path), facts.num_classes, facts.in_channels).classifier.eval()


def assert_same_function(reference: nn.Module, imported: nn.Module, shape: tuple[int, ...], softmax: bool = False):
    x = torch.rand(4, *shape, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected, got = reference.eval()(x), imported(x)
    got = got.softmax(dim=1) if softmax else got
    # Same weights and the same operations in another order of modules: equal up to float32 rounding.
    assert torch.allclose(got, expected, rtol=1e-4, atol=1e-5), (got - expected).abs().max()


CIFAR_SHAPE, MNIST_SHAPE = (3, 32, 32), (1, 28, 28)


# Each builder makes a reference network with random weights and saves it the way its codebase does.
def cohen_resnet20(tmp: Path) -> tuple[nn.Module, Path]:
    model = nn.Sequential(PlainNormalize(C10_MEAN, C10_STD), randomize(BearpawResNet(20)))
    return model, save_sequential(
        model, "cifar_resnet20", tmp / "cifar10/resnet20/noise_0.25/checkpoint.pth.tar", CIFAR_SHAPE
    )


def smoothadv_center(tmp: Path) -> tuple[nn.Module, Path]:
    model = nn.Sequential(PlainNormalize(C10_MEAN), randomize(BearpawResNet(20)))
    folder = tmp / "pretrained_models/cifar10/PGD_2steps/eps_64/cifar10/resnet110/noise_0.25"
    return model, save_sequential(model, "cifar_resnet20", folder / "checkpoint.pth.tar", CIFAR_SHAPE)


def smoothadv_finetuned(tmp: Path) -> tuple[nn.Module, Path]:
    model = nn.Sequential(PlainNormalize(C10_MEAN, C10_STD), randomize(BearpawResNet(20)))
    folder = tmp / "pretrained_models/cifar10/finetune_cifar_from_imagenetPGD2steps/PGD_10steps/noise_0.25"
    return model, save_sequential(model, "cifar_resnet20", folder / "checkpoint.pth.tar", CIFAR_SHAPE)


def macer_resnet110(tmp: Path) -> tuple[nn.Module, Path]:
    model = randomize(BearpawResNet(110))
    return model, save_macer(model, tmp / "macer/cifar10/440.pth")


def macer_lenet(tmp: Path) -> tuple[nn.Module, Path]:
    model = randomize(FunctionalLeNet())
    return model, save_macer(model, tmp / "macer/mnist/440.pth")


def consistency_lenet(tmp: Path) -> tuple[nn.Module, Path]:
    model = nn.Sequential(nn.Identity(), randomize(FunctionalLeNet()))
    return model, save_sequential(
        model, "lenet", tmp / "mnist/consistency/noise_0.25/lenet/0/checkpoint.pth.tar", MNIST_SHAPE
    )


def smoothmix_resnet20(tmp: Path) -> tuple[nn.Module, Path]:
    model = nn.Sequential(PlainNormalize(C10_MEAN, C10_STD), randomize(BearpawResNet(20)))
    return model, save_sequential(model, "cifar_resnet20", tmp / "smix/noise_0.25/checkpoint.pth.tar", CIFAR_SHAPE)


def catrs_cifar100(tmp: Path) -> tuple[nn.Module, Path]:
    model = nn.Sequential(PlainNormalize(C100_MEAN, C100_STD), randomize(BearpawResNet(110, classes=100)))
    return model, save_sequential(model, "cifar100_resnet110", tmp / "catrs/checkpoint.pth.tar", None)


def ddrs_cifar10(tmp: Path) -> tuple[nn.Module, Path]:
    model = randomize(DDRSResNet18())
    return model, save_ddrs(model, tmp / "ddrs/sig0_tr_0.25/best_model.pth.tar", CIFAR_SHAPE)


LAYOUT_CASES = {
    # name: (origin, dataset, build, expected arch, expected input layer kind, extra arguments)
    "cohen cifar10 resnet20": ("cohen", CIFAR10, cohen_resnet20, "cifar_resnet20", "normalize", {}),
    "smoothadv released center": ("smoothadv", CIFAR10, smoothadv_center, "cifar_resnet20", "center", {}),
    "smoothadv released normalize": ("smoothadv", CIFAR10, smoothadv_finetuned, "cifar_resnet20", "normalize", {}),
    "macer cifar10 resnet110": ("macer", CIFAR10, macer_resnet110, "cifar_resnet110", "identity", {}),
    "macer mnist lenet": ("macer", MNIST, macer_lenet, "lenet", "identity", {}),
    "consistency mnist lenet": ("consistency", MNIST, consistency_lenet, "lenet", "identity", {}),
    "smoothmix cifar10 resnet20": ("smoothmix", CIFAR10, smoothmix_resnet20, "cifar_resnet20", "normalize", {}),
    "catrs cifar100": ("catrs", CIFAR100, catrs_cifar100, "cifar_resnet110", "normalize", {}),
    "ddrs cifar10 resnet18": ("ddrs", CIFAR10, ddrs_cifar10, "ddrs_resnet18", "normalize", {}),
}


@pytest.mark.parametrize("case", list(LAYOUT_CASES))
def test_each_released_layout_imports_by_name_into_the_same_function(case: str, tmp_path: Path) -> None:
    origin, facts, build, arch, kind, extra = LAYOUT_CASES[case]
    reference, path = build(tmp_path)
    checkpoint = import_checkpoint(origin, path, facts, 0.25, **extra)
    signature = checkpoint["rsbench"]
    assert (signature["arch"], signature["num_classes"], signature["sigma"]) == (arch, facts.num_classes, 0.25)
    assert signature["input_layer"]["kind"] == kind
    if kind != "identity":  # the constants the authors' layer held, which their file does not
        assert signature["input_layer"]["mean"] == pytest.approx(facts.mean)
    assert checkpoint[IMPORT_KEY]["origin"] == origin
    network = certified_network(checkpoint, facts, tmp_path)
    shape = {1: MNIST_SHAPE, 3: CIFAR_SHAPE}[facts.in_channels]
    assert_same_function(reference, network, shape, softmax=origin == "ddrs")


@pytest.mark.parametrize(
    ("origin", "build_reference", "saved_under", "kind"),
    [
        (
            "cohen",
            lambda: nn.Sequential(PlainNormalize(IN_MEAN, IN_STD), nn.DataParallel(resnet50())),
            "1.module.",
            "normalize",
        ),
        pytest.param(
            "ddrs", lambda: ImagenetWrapper([1.0, 1.0, 1.0]), "model.module.", "center", marks=pytest.mark.slow
        ),
    ],
)
def test_imagenet_resnet50_inside_data_parallel(origin, build_reference, saved_under, kind, tmp_path: Path) -> None:
    reference = randomize(build_reference())
    assert next(iter(reference.state_dict())).startswith(saved_under)
    if origin == "cohen":
        path = save_sequential(reference, "resnet50", tmp_path / "imagenet/noise_0.50/checkpoint.pth.tar", None)
    else:
        path = save_ddrs(reference, tmp_path / "ddrs/imagenet/checkpoint.pth.tar", None)
    extra = {"input_layer": kind} if origin == "ddrs" else {}  # DDRS's --center-only is not in its files
    checkpoint = import_checkpoint(origin, path, IMAGENET, 0.5, **extra)
    assert checkpoint["rsbench"]["arch"] == "resnet50"
    assert checkpoint["rsbench"]["input_layer"]["kind"] == kind
    x = torch.rand(1, 3, 96, 96)  # ResNet-50 pools adaptively: a small image checks the same function faster
    network = certified_network(checkpoint, IMAGENET, tmp_path)
    with torch.no_grad():
        expected, got = reference(x), network(x)
    got = got.softmax(dim=1) if origin == "ddrs" else got
    assert torch.allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_ddrs_imagenet_needs_its_input_layer_stated(tmp_path: Path) -> None:
    path = save_ddrs(ImagenetWrapper(IN_STD), tmp_path / "checkpoint.pth.tar", None)
    with pytest.raises(ConfigError, match=r"input_layer=normalize\|center"):
        import_checkpoint("ddrs", path, IMAGENET, 0.5)


# What must fail: each would otherwise load into the wrong model and certify silently lower (or not at all).


def test_smoothadv_center_model_imported_as_normalize_is_refused(tmp_path: Path) -> None:
    _, path = smoothadv_center(tmp_path)
    with pytest.raises(CheckpointMismatchError, match="document a center input layer"):
        import_checkpoint("smoothadv", path, CIFAR10, 0.25, input_layer="normalize")


def test_smoothadv_outside_the_release_tree_needs_its_input_layer_stated(tmp_path: Path) -> None:
    reference = nn.Sequential(PlainNormalize(C10_MEAN), randomize(BearpawResNet(20)))
    path = save_sequential(reference, "cifar_resnet20", tmp_path / "my_copy/checkpoint.pth.tar", CIFAR_SHAPE)
    with pytest.raises(ConfigError, match=r"state it with input_layer=normalize\|center"):
        import_checkpoint("smoothadv", path, CIFAR10, 0.25)
    checkpoint = import_checkpoint("smoothadv", path, CIFAR10, 0.25, input_layer="center")
    assert checkpoint[IMPORT_KEY]["input_layer"] == "center: stated"
    assert_same_function(reference, certified_network(checkpoint, CIFAR10, tmp_path), CIFAR_SHAPE)


def test_macer_checkpoint_with_a_normalization_layer_is_refused(tmp_path: Path) -> None:
    _, path = macer_resnet110(tmp_path)
    with pytest.raises(CheckpointMismatchError, match=r"identity input layer .*not normalize"):
        import_checkpoint("macer", path, CIFAR10, 0.25, input_layer="normalize")


def test_a_checkpoint_of_another_depth_is_refused(tmp_path: Path) -> None:
    _, path = smoothmix_resnet20(tmp_path)  # its 'arch' entry says cifar_resnet20
    with pytest.raises(
        CheckpointMismatchError, match=r"holds a cifar_resnet20 .*arch=cifar_resnet110 asks for another"
    ):
        import_checkpoint("smoothmix", path, CIFAR10, 0.25, arch="cifar_resnet110")
    macer20 = save_macer(randomize(BearpawResNet(20)), tmp_path / "macer20/440.pth")  # MACER files name no arch
    with pytest.raises(CheckpointMismatchError, match=r"missing: layer1\.3\.conv1\.weight") as error:
        import_checkpoint("macer", macer20, CIFAR10, 0.25)  # MACER's CIFAR-10 network is ResNet-110
    assert "unexpected" not in str(error.value)


def test_a_checkpoint_of_another_class_count_is_refused_naming_the_shapes(tmp_path: Path) -> None:
    _, path = catrs_cifar100(tmp_path)
    with pytest.raises(CheckpointMismatchError, match=r"fc\.weight: file \(100, 64\), model \(10, 64\)"):
        import_checkpoint("catrs", path, CIFAR10, 0.25)


@pytest.mark.parametrize(
    ("build", "named", "looks_like"),
    [(macer_lenet, "consistency", "macer"), (ddrs_cifar10, "cohen", "ddrs"), (cohen_resnet20, "macer", "cohen")],
)
def test_a_file_of_another_codebase_is_refused_with_the_one_it_looks_like(build, named, looks_like, tmp_path) -> None:
    _, path = build(tmp_path)
    facts = MNIST if build is macer_lenet else CIFAR10
    with pytest.raises(CheckpointMismatchError, match=f"is not a {named} checkpoint.*looks like .*{looks_like}"):
        import_checkpoint(named, path, facts, 0.25)


def test_unknown_values_are_named(tmp_path: Path) -> None:
    _, path = macer_lenet(tmp_path)
    with pytest.raises(ConfigError, match="origin must be one of"):
        import_checkpoint("salman", path, MNIST, 0.25)
    with pytest.raises(ConfigError, match="not dataset=mnist_embedded"):
        import_checkpoint("cohen", path, MNIST, 0.25)
    with pytest.raises(ConfigError, match="sigma must be > 0"):
        import_checkpoint("macer", path, MNIST, 0.0)
    model = nn.Sequential(nn.Identity(), FunctionalLeNet())
    dense = save_sequential(model, "cifar_densenet40", tmp_path / "dense/checkpoint.pth.tar", MNIST_SHAPE)
    with pytest.raises(ConfigError, match="rsbench has no DenseNet-40"):
        import_checkpoint("consistency", dense, MNIST, 0.25)


def test_a_file_that_needs_unpickling_is_refused_with_how_to_convert_it(tmp_path: Path) -> None:
    model = randomize(FunctionalLeNet())
    path = tmp_path / "with_args.pth"
    torch.save({"net": model.state_dict(), "epoch": 1, "args": argparse.Namespace(lr=0.01)}, path)
    with pytest.raises(UnsafeFileError, match=r"(?s)argparse\.Namespace.*python -m rsbench\.importer\.plain"):
        import_checkpoint("macer", path, MNIST, 0.25)
    from rsbench.importer.plain import main as convert

    convert([str(path), str(tmp_path / "plain.pth")])
    checkpoint = import_checkpoint("macer", tmp_path / "plain.pth", MNIST, 0.25)
    assert_same_function(model, certified_network(checkpoint, MNIST, tmp_path), MNIST_SHAPE)


def test_files_from_before_num_batches_tracked_are_completed(tmp_path: Path) -> None:
    model = randomize(BearpawResNet(20))
    state = {k: v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    path = tmp_path / "old/440.pth"
    path.parent.mkdir()
    torch.save({"net": state, "epoch": 440}, path)
    checkpoint = import_checkpoint("macer", path, CIFAR10, 0.25, arch="cifar_resnet20")
    assert any("num_batches_tracked" in note for note in checkpoint[IMPORT_KEY]["notes"])
    assert_same_function(model, certified_network(checkpoint, CIFAR10, tmp_path), CIFAR_SHAPE)


def test_a_sigma_that_contradicts_the_folder_name_is_warned_about(tmp_path, caplog) -> None:
    _, path = consistency_lenet(tmp_path)  # .../noise_0.25/...
    with caplog.at_level(logging.WARNING, logger="rsbench.importer.convert"):
        import_checkpoint("consistency", path, MNIST, 0.5)
    assert "folder named for sigma=0.25, but sigma=0.5 was stated" in caplog.text


def test_imported_checkpoints_are_plain_and_refuse_to_overwrite(tmp_path: Path) -> None:
    _, path = macer_lenet(tmp_path)
    out = save_imported(import_checkpoint("macer", path, MNIST, 0.25), tmp_path / "m.ckpt")
    assert load_weights_only(out)["rsbench"]["method"] == "macer"
    with pytest.raises(ConfigError, match="exists"):
        save_imported(import_checkpoint("macer", path, MNIST, 0.25), out)


def test_a_folder_that_cannot_be_written_is_refused_before_the_import(monkeypatch, tmp_path: Path) -> None:
    """Issue 21: beside a read-only release the importer ended in ``[enforce fail at inline_container.cc:747]``."""
    _, path = macer_lenet(tmp_path)
    with pytest.raises(ConfigError, match=r"the folder .*nowhere does not exist"):
        check_output(tmp_path / "nowhere" / "m.ckpt")

    def refuse(self: Path, *args: object, **kwargs: object) -> None:  # (tests run as root, which chmod cannot stop)
        raise PermissionError(13, "Permission denied", str(self))

    with monkeypatch.context() as patch:
        patch.setattr(Path, "touch", refuse)
        with pytest.raises(ConfigError, match=r"is not writable \(Permission denied\).*out=<path>"):
            check_output(tmp_path / "m.ckpt")

    def torch_fails(*args: object) -> None:
        raise RuntimeError("[enforce fail at inline_container.cc:747] . PytorchStreamWriter failed writing file")

    monkeypatch.setattr(convert, "write_checkpoint", torch_fails)
    with pytest.raises(ConfigError, match=r"cannot write .*m\.ckpt \(PytorchStreamWriter failed") as error:
        save_imported(import_checkpoint("macer", path, MNIST, 0.25), tmp_path / "m.ckpt")
    assert "enforce fail" not in str(error.value)
    assert not list(tmp_path.glob(".*probe*"))


def test_the_importers_origins_are_the_method_cards() -> None:
    """The importer reads the origins of the method cards (rsbench/methods/*_card.py), as before they moved there."""
    assert sorted(origins()) == ["catrs", "cohen", "consistency", "ddrs", "macer", "smoothadv", "smoothmix"]


@pytest.mark.parametrize(
    ("dataset", "mean", "std"),
    [("cifar10", C10_MEAN, C10_STD), ("cifar100", C100_MEAN, C100_STD), ("imagenet", IN_MEAN, IN_STD)],
)
def test_rsbench_dataset_constants_are_the_authors(dataset: str, mean: list[float], std: list[float]) -> None:
    """The importer takes the constants the authors' files lack from rsbench's datasets: they must stay theirs."""
    facts = DatasetFacts.from_config(compose_config(f"dataset={dataset}").dataset)
    assert (facts.mean, facts.std) == (mean, std)
