"""The rsbench checkpoint format, owned here: its keys, its signature check, one reader and one writer.

An rsbench checkpoint is a ``torch.save``-d dictionary (Lightning writes the ones training saves) with

- ``state_dict``: the weights. The base classifier's (``Sequential(InputLayer, network)``; for ``method=denoiser`` a
  DnCNN in front of its frozen classifier) are under :data:`NET_PREFIX`, as a ``SmoothingModule`` holds them.
- ``rsbench`` (:data:`SIGNATURE_KEY`): the signature, what the weights fit and how they were trained: ``arch``,
  ``num_classes``, ``input_layer`` (kind, mean, std; ``resize``, ``interpolation``, ``antialias`` and ``channels``
  only when set), ``sigma`` and ``method``; a timm or Hugging Face network adds ``network``, how to rebuild it
  (:mod:`rsbench.archs.pretrained`: its kind, name or config, options, the weights it started from, and ``lora``,
  the adapters' configuration, when only LoRA adapters were trained); a denoiser checkpoint adds
  ``denoiser`` (the DnCNN's shape) and ``classifier`` (its frozen classifier's signature). :func:`check_signature`
  compares it with the model a checkpoint is loaded into.
- whatever else its writer adds: Lightning's ``epoch``, ``hyper_parameters`` and loop state, the importer's
  ``rsbench_import`` record.

Every file is read with ``torch.load(weights_only=True)`` (:mod:`rsbench.loading`), so no code runs from it.
:func:`read_classifier` is the one reader of a classifier (built from the signature, or loaded into a copy of a
given one), :func:`read_denoiser` the reader of a denoiser checkpoint's DnCNN; :func:`load_checkpoint` reads the
dictionary itself (resuming training needs its loop state). :func:`make_signature` is what training stores through
Lightning's ``on_save_checkpoint``; :func:`make_checkpoint` and :func:`write_checkpoint` make and write a checkpoint
rsbench builds itself (the importer's).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rsbench.archs.classifier import Classifier
from rsbench.archs.denoiser import DenoisedClassifier, DnCNN, build_denoiser
from rsbench.archs.registry import build_classifier
from rsbench.errors import CheckpointMismatchError, ConfigError, DamagedFileError
from rsbench.files import save_atomically
from rsbench.loading import load_strict, read_plain

SIGNATURE_KEY = "rsbench"
"""Where a checkpoint keeps its signature."""
NET_PREFIX = "net."
"""The state-dict prefix of the base classifier's weights (a ``SmoothingModule``'s ``net``)."""
DENOISER_PREFIX = f"{NET_PREFIX}denoiser."
"""The state-dict prefix of a denoiser checkpoint's DnCNN (``DenoisedClassifier.denoiser``)."""
TRAINED_BEHIND = "router_denoiser"
"""The signature key of a router trained behind a denoiser (``method=router method.denoiser_ckpt=...``): that
denoiser's ``{kind, path, sha256, sigma}``."""
UNSIGNED = (
    "train it with rsbench (python -m rsbench ...), or import a released checkpoint with python -m rsbench.importer"
)
"""What to do with a file that has no signature."""

_HINTS = {
    "arch": " (choose it with arch=<name>)",
    "num_classes": " (choose the dataset it was trained on: dataset=<name>)",
    "input_layer": " (choose the dataset it was trained on, or set dataset.input_layer to the checkpoint's)",
    "sigma": " (pass the training sigma, or allow_sigma_mismatch=true to load it at another sigma on purpose)",
}


def make_signature(
    net: nn.Module, sigma: float, method: str, noise: str = "gaussian", dataset: str | None = None
) -> dict[str, Any]:
    """The signature stored with ``net``'s weights: its own (:meth:`Classifier.signature`), the sigma, the method.

    A network trained with another noise than Gaussian adds ``noise``; a signature without it is Gaussian (every
    checkpoint written before other noises existed). ``dataset``, when known, is the dataset it was trained on
    (:func:`trained_on` reads it; it is not compared when loading).
    """
    trained_with = {} if noise == "gaussian" else {"noise": noise}
    data = {} if dataset is None else {"dataset": dataset}
    return {**net.signature(), "sigma": sigma, "method": method, **trained_with, **data}  # type: ignore[operator]


def refuse_as_plain_weights(loaded: Any, source: str) -> None:
    """Refuse an rsbench checkpoint given where a plain state dict was asked for, naming the option that reads it.

    Plain state dicts are asked for by ``model.weights`` of ``model=timm``, ``model=module``, ``model=torchvision``.

    Raises:
        ConfigError: ``loaded`` carries rsbench's signature.
    """
    if isinstance(loaded, Mapping) and isinstance(loaded.get(SIGNATURE_KEY), Mapping):
        raise ConfigError(
            f"{source} is an rsbench checkpoint (it carries rsbench's signature: architecture, input layer, sigma), "
            f"not a state dict of this network: did you mean model=checkpoint model.path={source}? (it rebuilds the "
            "network from the signature)"
        )


def trained_on(signature: Mapping[str, Any], path: str | Path) -> str | None:
    """The dataset the checkpoint at ``path`` was trained on, where it is recorded; ``None`` where it is not.

    The signature's ``dataset`` (checkpoints rsbench trains record it), else, for a checkpoint in a run's
    ``checkpoints/`` folder, the run's ``.hydra/config.yaml`` (``dataset.name``) or ``metrics.json`` (``dataset``).
    """
    if signature.get("dataset"):
        return str(signature["dataset"])
    folder = Path(path).expanduser().parent
    if folder.name != "checkpoints":
        return None
    import json

    import yaml

    try:
        config = yaml.safe_load((folder.parent / ".hydra" / "config.yaml").read_text())
        name = ((config or {}).get("dataset") or {}).get("name")
        if isinstance(name, str) and "${" not in name:
            return name
    except (OSError, yaml.YAMLError, AttributeError):
        pass
    try:
        name = json.loads((folder.parent / "metrics.json").read_text()).get("dataset")
    except (OSError, ValueError, AttributeError):
        return None
    return str(name) if isinstance(name, str) else None


def check_signature(saved: Mapping[str, Any], expected: Mapping[str, Any], source: str = "checkpoint") -> None:
    """Raise :class:`CheckpointMismatchError` naming every field where ``saved`` differs from ``expected``.

    Numbers are equal within a relative 1e-9 (a sigma written as 0.25 or read back as 0.25000000001).

    Args:
        saved: the signature stored in the checkpoint.
        expected: the signature of the model (and run) it is being loaded into; only its keys are compared.
        source: how to name the checkpoint in the message (e.g. its path).
    """
    problems = []
    for key, want in expected.items():
        have = saved.get(key, "<missing>")
        if not _same(have, want):
            problems.append(f"  {key}: checkpoint has {have!r}, this run expects {want!r}{_HINTS.get(key, '')}")
    if problems:
        raise CheckpointMismatchError(f"{source} does not fit the requested model:\n" + "\n".join(problems))


def load_checkpoint(path: str | Path, what: str, advice: str) -> dict[str, Any]:
    """The dictionary of the checkpoint at ``path`` (read on the CPU, weights only), or one clear error.

    Args:
        path: the file.
        what: how to name it in messages (``ckpt_path=...``, ``method.teacher_ckpt='...'``).
        advice: what to do when it cannot be read.

    Raises:
        ConfigError: there is no file at ``path``.
        UnsafeFileError: the file holds objects other than tensors and plain values (the message says how to convert).
        DamagedFileError: the file is truncated, corrupt or not a checkpoint (no ``state_dict``).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"{what} is not a file")
    checkpoint = read_plain(path, what, named=what, advice=advice)  # no code runs from the file
    if not isinstance(checkpoint, Mapping) or "state_dict" not in checkpoint:
        raise DamagedFileError(f"{what} is not a Lightning checkpoint (no state_dict): {advice}")
    return dict(checkpoint)


def signature_of(checkpoint: Mapping[str, Any], what: str, advice: str = UNSIGNED) -> dict[str, Any]:
    """The signature of a loaded checkpoint.

    Raises:
        CheckpointMismatchError: it has none (it was not written by rsbench); the message names ``what`` and ``advice``.
    """
    saved = checkpoint.get(SIGNATURE_KEY)
    if not isinstance(saved, Mapping):
        raise CheckpointMismatchError(f"{what} has no rsbench signature (architecture, input layer, sigma): {advice}")
    return dict(saved)


def read_classifier(
    path: str | Path,
    what: str,
    *,
    like: Classifier | None = None,
    num_classes: int | None = None,
    in_channels: int = 3,
    advice: str = UNSIGNED,
) -> tuple[Classifier, dict[str, Any]]:
    """The base classifier of the rsbench checkpoint at ``path``, with the checkpoint's signature.

    With ``like``, the weights go into a frozen copy of it (a teacher, a denoiser's classifier, a model to fine-tune),
    after the signature is checked against ``like``'s (architecture, class count, input layer; the sigma may differ).
    Without it, the classifier the signature names is built (a denoiser checkpoint gives its DnCNN in front of its
    classifier); ``num_classes``, when given, must be the checkpoint's. Every weight must fit (loaded strictly).

    Args:
        path: the checkpoint.
        what: how to name it in messages.
        like: a classifier of the architecture expected, or ``None``.
        num_classes: the class count the checkpoint must have (without ``like``).
        in_channels: the image channels of the classifier built (without ``like``).
        advice: what to do when the file cannot be read or is not an rsbench checkpoint.

    Raises:
        ConfigError: no file at ``path``.
        CheckpointMismatchError: not an rsbench checkpoint (no signature), or one whose signature or weights do not fit.
        DamagedFileError, UnsafeFileError: the file cannot be read (safely).
    """
    checkpoint = _read_signed(path, what, advice)
    saved = dict(checkpoint[SIGNATURE_KEY])
    weights = classifier_weights(checkpoint)
    if like is not None:
        check_signature(saved, like.signature(), what)
        classifier = copy.deepcopy(like)
        classifier.load_state_dict(weights)
        classifier.requires_grad_(False)
        return classifier, saved
    if num_classes is not None:
        check_signature(saved, {"num_classes": num_classes}, what)
    built: Classifier
    if "denoiser" in saved:  # method=denoiser: a DnCNN in front of its frozen classifier, both in the file
        inner = saved["classifier"]
        network = build_classifier(inner["arch"], saved["num_classes"], inner["input_layer"], in_channels)
        built = DenoisedClassifier(build_denoiser(saved["denoiser"]), network)
    else:
        built = build_classifier(
            saved["arch"], saved["num_classes"], saved["input_layer"], in_channels, network=saved.get("network")
        )
    load_strict(built, weights, what)
    return built, saved


def read_denoiser(path: str | Path, what: str, advice: str) -> tuple[DnCNN, dict[str, Any], dict[str, Any]]:
    """The DnCNN of a ``method=denoiser`` checkpoint, with the checkpoint's signature and whole dictionary.

    Raises:
        ConfigError: no file at ``path``.
        CheckpointMismatchError: it was not written by ``method=denoiser``, or its weights do not fit its signature.
        DamagedFileError, UnsafeFileError: the file cannot be read (safely).
    """
    checkpoint = _read_signed(path, what, advice)
    saved = checkpoint[SIGNATURE_KEY]
    if "denoiser" not in saved:
        raise CheckpointMismatchError(f"{what} is not a denoiser checkpoint (written by method=denoiser)")
    denoiser = build_denoiser(saved["denoiser"])
    weights = {
        key.removeprefix(DENOISER_PREFIX): value
        for key, value in checkpoint["state_dict"].items()
        if key.startswith(DENOISER_PREFIX)
    }
    load_strict(denoiser, weights, what)
    return denoiser, dict(saved), checkpoint


def classifier_weights(checkpoint: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The base classifier's state dict in a loaded checkpoint (its ``state_dict`` entries under ``net.``)."""
    return {
        key.removeprefix(NET_PREFIX): value
        for key, value in checkpoint["state_dict"].items()
        if key.startswith(NET_PREFIX)
    }


def make_checkpoint(
    net: nn.Module, sigma: float, method: str, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The dictionary of an rsbench checkpoint of ``net`` (what Lightning's checkpoints of a run hold, for rsbench).

    Args:
        net: the base classifier.
        sigma: the noise level it was trained at.
        method: the training method to record.
        extra: more top-level entries (e.g. the importer's ``rsbench_import`` record).
    """
    return {
        "state_dict": {NET_PREFIX + key: value for key, value in net.state_dict().items()},
        SIGNATURE_KEY: make_signature(net, sigma, method),
        **dict(extra or {}),
    }


def write_checkpoint(checkpoint: Mapping[str, Any], path: str | Path) -> Path:
    """Write a checkpoint made by :func:`make_checkpoint` to ``path``, whole or not at all (its folder is created).

    Returns the path written.

    Raises:
        ValueError: ``checkpoint`` lacks its weights or its signature.
    """
    if "state_dict" not in checkpoint or not isinstance(checkpoint.get(SIGNATURE_KEY), Mapping):
        raise ValueError(f"an rsbench checkpoint needs 'state_dict' and {SIGNATURE_KEY!r}, got {sorted(checkpoint)}")
    path = Path(path).expanduser()
    save_atomically(dict(checkpoint), path)
    return path


def _read_signed(path: str | Path, what: str, advice: str) -> dict[str, Any]:
    """The dictionary of the file at ``path``, which must hold weights (``state_dict``) and a signature."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"{what} is not a file")
    checkpoint = read_plain(path, what, named=what, advice=advice)  # no code runs from the file
    if not isinstance(checkpoint, Mapping) or "state_dict" not in checkpoint or SIGNATURE_KEY not in checkpoint:
        raise CheckpointMismatchError(
            f"{what} has no rsbench signature and weights, so it is not an rsbench checkpoint: {advice}"
        )
    return dict(checkpoint)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
