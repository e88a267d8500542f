"""MNIST-format (idx) image files, plain or gzipped, wherever they are: a folder, torchvision's layout, Debian's.

The four files of MNIST and Fashion-MNIST, ``{train,t10k}-images-idx3-ubyte`` and ``{train,t10k}-labels-idx1-ubyte``,
are read as they ship, gzipped (``.gz``, as LeCun's and Zalando's servers and Debian's ``dataset-fashion-mnist``
package give them) or not (as torchvision extracts them). Nothing is extracted or copied.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

# idx type codes (the third byte of the magic number) -> numpy dtypes, big-endian as the format stores them.
_DTYPES = {
    code: np.dtype(kind)
    for code, kind in {0x08: "u1", 0x09: "i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}.items()
}
_GZIP_MAGIC = b"\x1f\x8b"


def idx_names(train: bool) -> tuple[str, str]:
    """The (images, labels) file names of a split, without ``.gz``."""
    prefix = "train" if train else "t10k"
    return f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"


def find_idx_file(folder: Path, name: str) -> Path | None:
    """``folder/name`` or ``folder/name.gz``, whichever exists (plain first), else None."""
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def find_idx_folder(folders: Iterable[Path]) -> Path | None:
    """The first folder that holds all four idx files (each plain or gzipped), else None."""
    names = (*idx_names(True), *idx_names(False))
    for folder in folders:
        if all(find_idx_file(folder, name) for name in names):
            return folder
    return None


def read_idx(path: Path) -> np.ndarray:
    """The array stored in an idx file (gzipped or not): magic ``0 0 <type> <ndim>``, ndim big-endian int32 sizes.

    Raises:
        ValueError: the file is not in the idx format or is truncated (the message names it).
    """
    raw = path.read_bytes()
    if raw[:2] == _GZIP_MAGIC:
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _DTYPES:
        raise ValueError(f"{path} is not an idx file (its first bytes are {raw[:4].hex()})")
    ndim = raw[3]
    shape = tuple(int(s) for s in np.frombuffer(raw, dtype=">i4", count=ndim, offset=4))
    dtype = _DTYPES[raw[2]]
    expected = int(np.prod(shape)) * dtype.itemsize
    offset = 4 + 4 * ndim
    if len(raw) - offset != expected:
        raise ValueError(f"{path} holds {len(raw) - offset} data bytes, its header promises {expected} {shape}")
    return np.frombuffer(raw, dtype=dtype, offset=offset).reshape(shape)


class IdxImages(Dataset):
    """A split of an MNIST-format dataset: ``(transform(PIL image), label)``, as torchvision's MNIST yields them.

    Attributes:
        data: the images, ``uint8 [N, H, W]``.
        targets: the labels, ``int64 [N]``.
        folder: where the files were read from (recorded in the run's log).
    """

    def __init__(self, folder: Path, train: bool, transform: Callable[[Image.Image], object] | None = None) -> None:
        images_name, labels_name = idx_names(train)
        images_file, labels_file = find_idx_file(folder, images_name), find_idx_file(folder, labels_name)
        if images_file is None or labels_file is None:
            raise FileNotFoundError(f"{folder} lacks {images_name}[.gz] or {labels_name}[.gz]")
        images, labels = read_idx(images_file), read_idx(labels_file)
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(
                f"{images_file} ({list(images.shape)}) and {labels_file} ({list(labels.shape)}) are not "
                "N images of H x W with N labels"
            )
        self.folder = folder
        self.data = torch.from_numpy(images.astype(np.uint8))
        self.targets = torch.from_numpy(labels.astype(np.int64))
        self.transform = transform

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple[object, int]:
        image: object = Image.fromarray(self.data[index].numpy())  # uint8 H x W: a greyscale ("L") image
        if self.transform is not None:
            image = self.transform(image)  # type: ignore[arg-type]
        return image, int(self.targets[index])
