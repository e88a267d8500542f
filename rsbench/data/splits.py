"""Seeded, stratified splits: the validation split is carved from training data, never from the test set."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from torch.utils.data import Dataset


def stratified_split(labels: Sequence[int], holdout_size: int, seed: int) -> tuple[list[int], list[int]]:
    """Split ``range(len(labels))`` into (kept, held out) with ``holdout_size`` held-out indices, per-class balanced.

    Each class gives the held-out part a share proportional to its size (largest remainders get the leftover
    places). The same labels, size and seed always give the same split; both lists are sorted.

    >>> kept, held = stratified_split([0, 0, 1, 1, 1, 1], 3, seed=0)
    >>> len(held), sorted({[0, 0, 1, 1, 1, 1][i] for i in held})
    (3, [0, 1])
    """
    labels_array = np.asarray(labels)
    total = len(labels_array)
    if not 0 <= holdout_size < total:
        raise ValueError(f"held-out size must be in [0, {total}), got {holdout_size}")
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(labels_array, return_counts=True)
    exact = holdout_size * counts / total
    quota = np.floor(exact).astype(int)
    leftover = holdout_size - int(quota.sum())
    quota[np.argsort(-(exact - quota), kind="stable")[:leftover]] += 1
    held: list[int] = []
    for cls, take in zip(classes, quota, strict=True):
        members = np.flatnonzero(labels_array == cls)
        held.extend(rng.permutation(members)[:take].tolist())
    held_set = set(held)
    kept = [i for i in range(total) if i not in held_set]
    return kept, sorted(held)


def dataset_labels(dataset: Dataset) -> list[int]:
    """The label of every item, read from the dataset's label attribute without loading images."""
    for attribute in ("targets", "labels"):
        values = getattr(dataset, attribute, None)
        if values is not None:
            return [int(v) for v in values]
    tensors = getattr(dataset, "tensors", None)
    if tensors is not None and len(tensors) >= 2:
        return [int(v) for v in tensors[1]]
    return [int(dataset[i][1]) for i in range(len(dataset))]  # type: ignore[arg-type]
