"""``ImageDataModule``: train / validation / test splits of any image dataset, for training and certification."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset, Sampler, Subset

from rsbench.data.splits import dataset_labels, stratified_split
from rsbench.data.transforms import Augmentation, build_transforms

Source = Callable[..., Dataset]


class IndexedDataset(Dataset):
    """Yields ``(image, label, index)``, the index being the example's position in the full training set.

    Methods that keep per-example state across epochs (data-dependent smoothing's sigma memory) key it by index.
    """

    def __init__(self, dataset: Dataset, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = list(indices)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, position: int) -> tuple[torch.Tensor, int, int]:
        index = self.indices[position]
        image, label = self.dataset[index]
        return image, int(label), index


class ImageDataModule(pl.LightningDataModule):
    """A dataset split into training, validation (carved from the training set) and test parts.

    Model selection only sees the validation split; the test split is used once, for the final certification.
    The validation split is stratified and seeded by ``split_seed``, independent of the training seed, so every
    run of an experiment is selected and certified on the same images.

    Args:
        name: the dataset's name, recorded with results.
        family: the dataset whose published method hyperparameters apply (``mnist`` for the embedded subset and
            Fashion-MNIST, ``cifar10`` for CIFAR-100 and SVHN, ``imagenet``); method configs look their
            per-dataset defaults up by it (``${dataset.family}``).
        source: ``source(root, train, transform, download) -> Dataset`` (see :mod:`rsbench.data.sources`).
        num_classes: the number of classes (checked against the labels).
        image_shape: ``[C, H, W]`` of the images the model sees (checked against the data).
        input_layer: the dataset's standard input layer (``kind``, ``mean``, ``std``), used to build the model.
        data_dir: where the files are (and where downloads go).
        batch_size: training batch size.
        eval_batch_size: validation and test batch size (the training batch size when ``None``).
        val_size: training images held out for validation (0 disables validation).
        augmentation: training augmentation: ``none``, ``crop_flip`` or ``imagenet``.
        num_workers: data-loading worker processes.
        download: whether a missing torchvision dataset may be downloaded.
        split_seed: the seed of the validation split.
        pin_memory: pin host memory for faster GPU transfer.
        title: its name in tables (``CIFAR-10``).
        test_size: the images of its test split, as published (the checks before a run refuse a certified subset
            beyond it; ``None``: not stated).
        published_as: the dataset whose published results a run on it stands beside (``None``: itself).
        aliases: its other names in released logs' paths.

    The last four are facts the tools read from the config (:mod:`rsbench.runs.datasets`); loading ignores them.
    """

    def __init__(
        self,
        name: str,
        family: str,
        source: Source,
        num_classes: int,
        image_shape: Sequence[int],
        input_layer: Mapping[str, Any],
        data_dir: str = "data",
        batch_size: int = 256,
        eval_batch_size: int | None = None,
        val_size: int = 1000,
        augmentation: Augmentation = "none",
        num_workers: int = 0,
        download: bool = True,
        split_seed: int = 0,
        pin_memory: bool = False,
        title: str = "",
        test_size: int | None = None,
        published_as: str | None = None,
        aliases: Sequence[str] = (),
    ) -> None:
        super().__init__()
        for key, value in {"batch_size": batch_size, "num_classes": num_classes}.items():
            if value < 1:
                raise ValueError(f"dataset.{key} must be >= 1, got {value}")
        if val_size < 0:
            raise ValueError(f"dataset.val_size must be >= 0, got {val_size}")
        self.name = name
        self.family = family
        self.source = source
        self.num_classes = num_classes
        self.image_shape = tuple(int(s) for s in image_shape)
        self.input_layer = dict(input_layer)
        self.data_dir = Path(data_dir).expanduser()
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.val_size = val_size
        self.augmentation = augmentation
        self.num_workers = num_workers
        self.download = download
        self.split_seed = split_seed
        self.pin_memory = pin_memory
        self.title = title or name
        self.test_size = test_size
        self.published_as = published_as or name
        self.aliases = tuple(aliases)
        self.train_transform, self.eval_transform = build_transforms(augmentation, self.image_shape[-1])
        self.train_dataset: IndexedDataset | None = None
        self.val_dataset: Dataset | None = None
        self._test_dataset: Dataset | None = None

    def prepare_data(self) -> None:
        """Download what is missing (once per machine), or fail with where the files must go."""
        self.source(self.data_dir, True, None, self.download)
        self.source(self.data_dir, False, None, self.download)

    def setup(self, stage: str | None = None) -> None:
        """Build the splits needed by ``stage`` (fit/validate: train and validation; test: test)."""
        if stage in (None, "fit", "validate") and self.train_dataset is None:
            augmented = self.source(self.data_dir, True, self.train_transform, False)
            plain = self.source(self.data_dir, True, self.eval_transform, False)
            labels = dataset_labels(plain)
            kept, held = stratified_split(labels, self.val_size, self.split_seed)
            self.train_dataset = IndexedDataset(augmented, kept)
            self.val_dataset = Subset(plain, held)
            self._check(plain, "training", labels)
        if stage in (None, "test", "predict"):
            self._check(self.test_dataset, "test", dataset_labels(self.test_dataset))

    @property
    def test_dataset(self) -> Dataset:
        """The test split with evaluation transforms (what CERTIFY runs on)."""
        if self._test_dataset is None:
            self._test_dataset = self.source(self.data_dir, False, self.eval_transform, False)
        return self._test_dataset

    def train_dataloader(self) -> DataLoader:
        """Shuffled training batches of ``(image, label, index)``; the last incomplete batch is kept.

        A method that draws its own training order (Sun et al. 2025: hard images dropped, the rest reweighted) gives
        it as ``train_sampler(dataset) -> Sampler`` on the LightningModule being fit; it replaces the shuffle.
        """
        if self.train_dataset is None:
            self.setup("fit")
        module = getattr(self.trainer, "lightning_module", None) if self.trainer is not None else None
        make_sampler = getattr(module, "train_sampler", None)
        if callable(make_sampler):
            return self._loader(
                self.train_dataset, self.batch_size, shuffle=False, sampler=make_sampler(self.train_dataset)
            )
        return self._loader(self.train_dataset, self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader | list[DataLoader]:
        """Validation batches of ``(image, label)``, or no loader when ``val_size`` is 0."""
        if self.val_dataset is None:
            self.setup("fit")
        if self.val_size == 0:
            return []
        return self._loader(self.val_dataset, self.eval_batch_size, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        """Test batches of ``(image, label)`` in dataset order."""
        return self._loader(self.test_dataset, self.eval_batch_size, shuffle=False)

    def _loader(
        self, dataset: Dataset | None, batch_size: int, shuffle: bool, sampler: Sampler[int] | None = None
    ) -> DataLoader:
        assert dataset is not None
        return DataLoader(
            dataset,
            batch_size=batch_size,
            shuffle=shuffle,
            sampler=sampler,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            persistent_workers=self.num_workers > 0,
        )

    def _check(self, dataset: Dataset, split: str, labels: Sequence[int]) -> None:
        image = dataset[0][0]
        if tuple(image.shape) != self.image_shape:
            raise ValueError(
                f"{self.name} {split} images have shape {list(image.shape)}, but dataset.image_shape is "
                f"{list(self.image_shape)}"
            )
        label = next((label for label in labels if not 0 <= label < self.num_classes), None)
        if label is not None:
            raise ValueError(
                f"{self.name} {split} label {label} is outside [0, dataset.num_classes={self.num_classes})"
            )
