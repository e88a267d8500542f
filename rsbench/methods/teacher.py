"""CAT-RS's teacher soft labels: the smoothed vote histogram of a pretrained Gaussian model on every training image.

Jeong, Kim and Shin (AAAI 2023) set y_hat(x) to the smoothed prediction of a Gaussian-trained classifier: the
authors' ``smooth_prediction.py --split train --N 10000`` stores, for every training image, the hard-vote
histogram counts / N of the sigma = 0.25 Gaussian model (``Smooth.confidence_top2``), and every CAT-RS run, whatever
its own sigma, loads that sigma = 0.25 file. rsbench computes the same table once per (teacher weights, dataset,
N, teacher sigma, seed) and caches it on disk, one process at a time (runs started together with the same teacher,
e.g. a sweep over lambda or sigma, wait for the first to compute the table instead of each computing it); a training
batch looks its rows up by ``Batch.indices`` (positions in the full training set).

Deviation: the votes are computed on the evaluation view of each image (no crop/flip), in eval mode. The authors
computed them on the training split as their loader served it, i.e. on one random crop/flip of each CIFAR image.
On datasets without training augmentation (MNIST, the embedded subset) the two coincide.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from filelock import FileLock, Timeout
from torch import Tensor
from torch.utils.data import Dataset

from rsbench.archs.classifier import Classifier, weights_fingerprint
from rsbench.certify.algorithm.seeding import make_generator
from rsbench.certify.algorithm.smooth import Smooth
from rsbench.certify.pipeline.progress import progress
from rsbench.checkpoint import read_classifier
from rsbench.files import ImageTable
from rsbench.stop import raise_if_stop_requested

log = logging.getLogger(__name__)

WAIT_POLL_SECONDS = 1.0
"""While another process computes the same table, how often a waiting run checks for a stop request."""


@dataclass(frozen=True)
class TeacherKey:
    """Everything the soft labels depend on; two runs with equal keys share one cache file.

    Attributes:
        teacher: the teacher's weights fingerprint (:func:`rsbench.archs.weights_fingerprint`).
        dataset: the dataset's name.
        num_images: the size of the full training set.
        labels_digest: a digest of the training labels (catches a different version of the data).
        num_classes: C.
        num_samples: N, noisy votes per image.
        sigma: the teacher's noise level.
        seed: the seed of the vote noise (image i's noise comes from (seed, i)).
        view: which view of each image was labelled (``eval``: the evaluation transform).
    """

    teacher: str
    dataset: str
    num_images: int
    labels_digest: str
    num_classes: int
    num_samples: int
    sigma: float
    seed: int
    view: str = "eval"

    def digest(self) -> str:
        """A short hash of the key, used in the cache file name."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


def labels_digest(labels: Sequence[int]) -> str:
    """A short hash of a label list."""
    return hashlib.sha256(",".join(str(int(v)) for v in labels).encode()).hexdigest()[:16]


def load_teacher(path: str | Path, like: Classifier, option: str = "method.teacher_ckpt") -> tuple[Classifier, float]:
    """The rsbench checkpoint at ``path`` in a frozen copy of ``like``, with the sigma it was trained at.

    The teacher must have the student's architecture, class count and input layer (the authors' teacher is the
    same network trained with Gaussian augmentation); its sigma may differ. DS^2 fine-tuning loads its starting
    weights the same way (``option="method.init_ckpt"``). The file is read by
    :func:`rsbench.checkpoint.read_classifier`, whose errors name ``option``.
    """
    what = f"{option}={str(Path(path).expanduser())!r}"
    teacher, saved = read_classifier(path, what, like=like, advice="train that model again, or pass another")
    return teacher, float(saved["sigma"])


def vote_histograms(
    teacher: Classifier,
    images: Dataset,
    num_classes: int,
    sigma: float,
    num_samples: int,
    batch_size: int,
    seed: int,
    table: ImageTable | None = None,
) -> Tensor:
    """The smoothed hard-vote histogram counts / N of ``teacher`` on every image of ``images``: ``[len, C]``.

    Image i's N noisy copies are drawn from a generator seeded by (seed, i), so the table does not depend on the
    batch size or on an interruption. Runs in eval mode on the teacher's device, ``batch_size`` noisy copies per
    forward pass, with a progress bar; the rows go into ``table`` (:class:`rsbench.files.ImageTable`), which
    saves them every minute and on a stop request, so an interrupted computation resumes with the rows it lacks.

    Args:
        teacher: the base classifier (its device is used).
        images: a dataset of ``(image, label, ...)`` with images in [0,1].
        num_classes: C.
        sigma: the teacher's noise level.
        num_samples: N.
        batch_size: noisy copies per forward pass.
        seed: the vote-noise seed.
        table: the table to fill, with the rows an interrupted run computed (``None``: a new one in memory).
    """
    total = len(images)  # type: ignore[arg-type]
    if table is None:
        table = ImageTable(None, {}, (total, num_classes), torch.float32, "CAT-RS teacher votes")
    todo = table.missing()
    smooth = Smooth(teacher, num_classes, sigma)
    device = next(iter(teacher.parameters())).device
    counter = progress(total, "CAT-RS teacher votes", "images", initial=total - len(todo))  # lines with time left
    together = max(1, batch_size // num_samples)  # small N: several images per forward pass, each its own noise
    for first in range(0, len(todo), together):
        indices = todo[first : first + together]
        xs = torch.stack([images[index][0] for index in indices])
        generators = [make_generator(device, seed, index) for index in indices]
        counts = smooth.sample_counts_batch(xs, num_samples, batch_size, generators)
        table.put(indices, torch.as_tensor(counts, dtype=torch.float32) / num_samples)
        counter.update(len(indices))
        table.checkpoint()  # saves the rows so far every minute, and stops here on a stop request (rsbench.stop)
    counter.close()
    return table.values


def cache_path(cache_dir: Path, key: TeacherKey) -> Path:
    """Where the soft labels of ``key`` are cached."""
    return cache_dir / f"catrs_soft_labels_{key.dataset}_{key.digest()}.pt"


def teacher_soft_labels(
    teacher: Classifier,
    images: Dataset,
    key: TeacherKey,
    cache_dir: Path,
    batch_size: int,
) -> Tensor:
    """The soft labels ``[len(images), C]`` of ``key``: read from the cache, or computed and cached.

    A cache file whose stored key differs from ``key`` (a hash collision, or a hand-edited file) is refused, naming
    the settings that differ, never trusted or overwritten. A ``.partial.pt`` file left by an interrupted computation
    is resumed (:class:`rsbench.files.ImageTable`). Processes that ask for the
    same table at once compute it once: the first holds ``<cache file>.lock`` while it reads or computes, the others
    wait for it (a stop request ends the wait) and then read its cache.

    Args:
        teacher: the teacher model, on the device to compute on.
        images: the full training set with the evaluation transform, in training-set order.
        key: what the labels depend on (its ``teacher`` must be ``teacher``'s fingerprint).
        cache_dir: the cache folder (created if missing).
        batch_size: noisy copies per forward pass.
    """
    path = cache_path(cache_dir, key)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _computing(path.with_suffix(".lock")):
        return _read_or_compute(teacher, images, key, path, batch_size)


@contextmanager
def _computing(lock_path: Path) -> Iterator[None]:
    """Hold ``lock_path`` (an OS file lock, released if the process dies) while the table is read or computed.

    A process that finds it held says so and waits, checking for a stop request every :data:`WAIT_POLL_SECONDS`.
    """
    lock = FileLock(lock_path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.info("CAT-RS teacher soft labels: another process is computing them (%s held); waiting for it", lock_path)
        while not _acquired(lock, WAIT_POLL_SECONDS):
            raise_if_stop_requested()
    try:
        yield
    finally:
        lock.release()


def _acquired(lock: FileLock, seconds: float) -> bool:
    """Whether ``lock`` was acquired within ``seconds``."""
    try:
        lock.acquire(timeout=seconds)
    except Timeout:
        return False
    return True


def _read_or_compute(teacher: Classifier, images: Dataset, key: TeacherKey, path: Path, batch_size: int) -> Tensor:
    """:func:`teacher_soft_labels` under the lock: the cache at ``path`` if it holds ``key``, else computed there.

    Raises:
        ProtocolMismatchError: the cache file (or its partial file) holds votes of another key (a hand-edited or
            copied file: its name is the key's digest), naming each setting that differs.
    """
    table = ImageTable(
        path,
        asdict(key),
        (key.num_images, key.num_classes),
        torch.float32,
        "CAT-RS teacher votes",
        values_name="soft_labels",
        partial=path.with_suffix(".partial.pt"),
        legacy_key=lambda stored: asdict(key),  # a partial file of before: the file's name is the key's digest
    )
    if table.finished:
        log.info("CAT-RS teacher soft labels: cache hit %s", path)
        return table.values
    log.info(
        "CAT-RS teacher soft labels: cache miss, computing %s: N=%d votes for each of %d training images (%.1f million "
        "noisy forward passes; at the authors' N=10,000 a LeNet takes about 2 s per image on 2 busy CPU cores, a GPU "
        "a fraction of that; method.teacher_num_samples sets N, experiment=smoke uses 16)",
        path,
        key.num_samples,
        key.num_images,
        key.num_samples * key.num_images / 1e6,
    )
    if table.resumed:
        log.info("resuming from %s", table.partial)
    vote_histograms(teacher, images, key.num_classes, key.sigma, key.num_samples, batch_size, key.seed, table)
    return table.finish()


def teacher_key(
    teacher: Classifier, dataset: str, labels: Sequence[int], num_samples: int, sigma: float, seed: int
) -> TeacherKey:
    """The :class:`TeacherKey` of ``teacher``'s N-vote labels at ``sigma`` on a training set with ``labels``."""
    return TeacherKey(
        teacher=weights_fingerprint(teacher),
        dataset=dataset,
        num_images=len(labels),
        labels_digest=labels_digest(labels),
        num_classes=teacher.num_classes,
        num_samples=num_samples,
        sigma=sigma,
        seed=seed,
    )
