"""Datasets: an embedded offline MNIST subset, torchvision sets and ImageNet folders, behind one datamodule."""

from rsbench.data.datamodule import ImageDataModule, IndexedDataset
from rsbench.errors import DatasetUnavailableError

__all__ = ["DatasetUnavailableError", "ImageDataModule", "IndexedDataset"]
