"""Turn a released checkpoint into an rsbench checkpoint: weights mapped by name, the input layer and sigma stated.

:func:`import_checkpoint` reads the file with ``torch.load(weights_only=True)``, checks it against its origin's
layout (its method card's: :mod:`rsbench.importer.layouts`), resolves the architecture (the file's own ``arch``
entry, the dataset's default for the origin, or what the user names; they must agree) and the input layer (the one
the authors document for this file, or the one the user states where the authors' models differ; they must agree),
strips the layout's key prefix and loads every tensor into rsbench's network by name, refusing any missing,
unexpected or misshapen key. The result carries the full rsbench signature (architecture, classes, input layer with
its constants, sigma, method), so ``python -m rsbench.certify model.path=<it>`` and ``python -m rsbench train=false
ckpt_path=<it>`` refuse to load it into a model that differs, and a record of where it came from (``rsbench_import``).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, cast

import torch

from rsbench.archs.input_layer import INPUT_LAYER_KINDS, InputLayerKind
from rsbench.archs.registry import NETWORKS, build_classifier
from rsbench.checkpoint import make_checkpoint, write_checkpoint
from rsbench.errors import CheckpointMismatchError, ConfigError
from rsbench.importer.layouts import (
    AUTHOR_ARCHS,
    UNSUPPORTED_ARCHS,
    Layout,
    guess_origins,
    layout_of,
    origin_method,
    origins,
)
from rsbench.loading import file_digest, load_strict, load_weights_only
from rsbench.noise import check_sigma

log = logging.getLogger(__name__)

IMPORT_KEY = "rsbench_import"  # where an imported checkpoint records its source


@dataclass(frozen=True)
class DatasetFacts:
    """What the importer needs to know of the dataset a model was trained on.

    Attributes:
        name: rsbench's dataset name (``cifar10``, ``mnist``, ...).
        num_classes: the number of classes.
        in_channels: image channels.
        mean: per-channel mean of its normalize/center input layer (``None`` for identity datasets).
        std: per-channel std of its normalize input layer.
    """

    name: str
    num_classes: int
    in_channels: int
    mean: list[float] | None = None
    std: list[float] | None = None

    @classmethod
    def from_config(cls, dataset: Mapping[str, Any]) -> DatasetFacts:
        """From a ``dataset`` config node (``conf/dataset/<name>.yaml``)."""
        layer = dataset["input_layer"]
        return cls(
            name=str(dataset["name"]),
            num_classes=int(dataset["num_classes"]),
            in_channels=int(dataset["image_shape"][0]),
            mean=[float(m) for m in layer["mean"]] if layer.get("mean") else None,
            std=[float(s) for s in layer["std"]] if layer.get("std") else None,
        )


def _checked_layout(origin: str, dataset: DatasetFacts, sigma: float) -> Layout:
    """The checkpoint layout of ``origin``, once the origin, its dataset and ``sigma`` are known to be valid.

    Raises:
        ConfigError: an unknown origin, a dataset the origin released no model for, or a sigma that is not > 0.
    """
    layout = layout_of(origin)
    if layout is None:
        raise ConfigError(f"origin must be one of {sorted(origins())}, got {origin!r}")
    try:
        check_sigma(sigma, "sigma")
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if dataset.name not in layout.input_layers:
        raise ConfigError(
            f"{origin} ({layout.repository}) released models for {sorted(layout.input_layers)}, "
            f"not dataset={dataset.name}"
        )
    return layout


def import_checkpoint(
    origin: str,
    path: str | Path,
    dataset: DatasetFacts,
    sigma: float,
    *,
    arch: str | None = None,
    input_layer: str = "auto",
    method: str | None = None,
) -> dict[str, Any]:
    """Read a released checkpoint of ``origin`` and return it as an rsbench checkpoint (see the module docstring).

    Args:
        origin: the codebase that saved it: cohen, smoothadv, macer, consistency, smoothmix, catrs, ddrs (the
            ``origin`` of a method card, :func:`rsbench.methods.card.origins`).
        path: the file.
        dataset: the dataset it was trained on.
        sigma: the noise level it was trained at (not in the file; see the authors' folder names).
        arch: rsbench's architecture name, or ``None`` to take it from the file or the origin's default.
        input_layer: ``auto`` (the authors' documented layer for this file) or ``normalize``/``center``/``identity``.
        method: the training method to record (default: the origin's; e.g. ``stability`` for a Jeong-lineage
            baseline).

    Raises:
        ConfigError: an unknown origin, dataset, architecture or input layer, or a sigma that is not > 0.
        CheckpointMismatchError: the file is not in the origin's layout, names another architecture, or its
            weights do not fit (the message names the keys and shapes that differ).
        UnsafeFileError: the file needs arbitrary unpickling.
    """
    layout = _checked_layout(origin, dataset, sigma)
    path = Path(path).expanduser()
    saved = load_weights_only(path)
    _check_file(saved, layout, origin, path)
    network_arch, source_arch = _resolve_arch(saved, layout, origin, dataset, arch, path)
    kind, reason = _resolve_input_layer(layout, origin, dataset, input_layer, path)
    layer_spec = _input_layer_spec(kind, dataset)
    classifier = build_classifier(network_arch, dataset.num_classes, layer_spec, dataset.in_channels)
    weights, prefix = _strip_prefix(saved[layout.weights_key], layout, origin, path)
    notes = _fill_num_batches_tracked(weights, classifier[1].state_dict())
    load_strict(classifier[1], weights, f"{path} ({origin} layout, prefix {prefix!r} removed, arch={network_arch})")
    _warn_on_sigma_in_path(path, sigma)
    notes.extend(layout.notes)
    record = {
        "origin": origin,
        "repository": layout.repository,
        "source": str(path),
        "sha256": file_digest(path),
        "source_arch": source_arch,
        "epoch": saved.get("epoch"),
        "input_layer": reason,
        "notes": notes,
    }
    return make_checkpoint(classifier, float(sigma), method or origin_method(origin), {IMPORT_KEY: record})


def save_imported(checkpoint: Mapping[str, Any], out: str | Path, overwrite: bool = False) -> Path:
    """Write an imported checkpoint (:func:`rsbench.checkpoint.write_checkpoint`); replace a file if ``overwrite``.

    Raises:
        ConfigError: ``out`` exists (without ``overwrite``) or cannot be written (see :func:`check_output`).
    """
    out = check_output(out, overwrite)
    try:
        return write_checkpoint(checkpoint, out)
    except (OSError, RuntimeError) as error:  # torch.save reports a failed write as "[enforce fail at ...]"
        raise ConfigError(f"cannot write {out} ({_reason(error)}); choose another place with out=<path>") from None


def check_output(out: str | Path, overwrite: bool = False) -> Path:
    """``out`` as a path the checkpoint can be written to; refuse it before any work when it cannot be.

    Raises:
        ConfigError: it exists (without ``overwrite``), or its folder is missing or not writable.
    """
    out = Path(out).expanduser()
    if out.exists() and not overwrite:
        raise ConfigError(f"{out} exists; choose another out=... or pass overwrite=true")
    folder = out.parent
    if not folder.is_dir():
        raise ConfigError(f"cannot write {out}: the folder {folder} does not exist; create it or choose out=<path>")
    probe = folder / f".{out.name}.probe{os.getpid()}"
    try:  # os.access cannot tell (root passes it on a read-only mount): try to create a file there
        probe.touch(exist_ok=False)
    except OSError as error:
        raise ConfigError(
            f"cannot write {out}: {folder} is not writable ({_reason(error)}); the importer writes beside the "
            "released file unless told otherwise: choose another place with out=<path>"
        ) from None
    probe.unlink(missing_ok=True)
    return out


def _reason(error: BaseException) -> str:
    """The OS's words for a failed write (``Permission denied``), not torch's ``[enforce fail at ...]`` wrapper."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    text = str(error).strip()
    if text.startswith("[enforce fail") and "]" in text:  # "[enforce fail at inline_container.cc:747] . <reason>"
        text = text.split("]", 1)[1].strip(" .") or "the write failed"
    return text


def default_output(path: str | Path) -> Path:
    """Beside the source, named after it: ``.../noise_0.25/checkpoint.pth.tar`` -> ``.../checkpoint.rsbench.ckpt``."""
    path = Path(path).expanduser()
    return path.with_name(path.name.split(".")[0] + ".rsbench.ckpt")


def _check_file(saved: Any, layout: Layout, origin: str, path: Path) -> None:
    """Refuse a file that does not hold what ``origin``'s code saves, suggesting the origin it looks like."""
    required = {layout.weights_key} | ({layout.arch_key} if layout.arch_key else set())
    if isinstance(saved, Mapping) and required <= set(saved) and isinstance(saved[layout.weights_key], Mapping):
        return
    held = sorted(saved) if isinstance(saved, Mapping) else type(saved).__name__
    hint = ""
    if isinstance(saved, Mapping):
        others = [o for o in guess_origins(set(saved)) if layout_of(o) is not layout]
        hint = f"; it looks like a checkpoint of {' or '.join(others)}: import it with origin=<that>" if others else ""
    raise CheckpointMismatchError(
        f"{path} is not a {origin} checkpoint: {layout.repository} saves {sorted(layout.file_keys)} with the weights "
        f"under {layout.weights_key!r}, this file holds {held}{hint}"
    )


def _resolve_arch(
    saved: Mapping[str, Any], layout: Layout, origin: str, dataset: DatasetFacts, arch: str | None, path: Path
) -> tuple[str, str | None]:
    """rsbench's architecture for the file, and the file's own name for it (if it has one)."""
    if arch is not None and arch not in NETWORKS:
        raise ConfigError(f"arch must be one of {sorted(NETWORKS)}, got {arch!r}")
    source = str(saved[layout.arch_key]) if layout.arch_key else None
    if source is not None:
        if source in UNSUPPORTED_ARCHS:
            raise ConfigError(f"{path} holds a {source} ({UNSUPPORTED_ARCHS[source]}), which cannot be imported")
        if source not in AUTHOR_ARCHS:
            raise CheckpointMismatchError(
                f"{path} names its architecture {source!r}, which {origin}'s code does not build "
                f"({sorted(AUTHOR_ARCHS)})"
            )
        mapped = AUTHOR_ARCHS[source]
        if arch is not None and arch != mapped:
            raise CheckpointMismatchError(
                f"{path} holds a {source} (its {layout.arch_key!r} entry), which is rsbench's {mapped}; "
                f"arch={arch} asks for another network. Drop arch= or pass arch={mapped}"
            )
        return mapped, source
    if arch is not None:
        return arch, None
    if dataset.name not in layout.default_archs:
        raise ConfigError(f"{path} does not name its architecture: pass arch=<one of {sorted(NETWORKS)}>")
    return layout.default_archs[dataset.name], None


def _resolve_input_layer(
    layout: Layout, origin: str, dataset: DatasetFacts, requested: str, path: Path
) -> tuple[InputLayerKind, str]:
    """The input layer to put in front of the weights, and why (recorded with the checkpoint)."""
    allowed = layout.input_layers[dataset.name]
    documented = layout.documented_input_layer(dataset.name, PurePath(path))
    if requested not in ("auto", *INPUT_LAYER_KINDS):
        raise ConfigError(f"input_layer must be 'auto' or one of {list(INPUT_LAYER_KINDS)}, got {requested!r}")
    if requested == "auto":
        if documented is None:
            raise ConfigError(
                f"{origin}'s released {dataset.name} models differ in their input layer ({' or '.join(allowed)}) "
                f"and {path} is not in a released folder that tells which: state it with input_layer="
                f"{'|'.join(allowed)} (see {layout.repository}'s README)"
            )
        return documented, f"{documented}: documented for {origin} {dataset.name} models"
    if requested not in allowed:
        raise CheckpointMismatchError(
            f"{origin}'s {dataset.name} models have a {' or '.join(allowed)} input layer ({layout.repository}), "
            f"not {requested}: weights behind the wrong input layer load without error and certify silently lower"
        )
    if documented is not None and requested != documented:
        raise CheckpointMismatchError(
            f"{path} is a {origin} model whose authors document a {documented} input layer for it "
            f"({layout.repository}'s README maps each released folder to its layer), not {requested}: "
            "weights behind the wrong input layer load without error and certify silently lower"
        )
    return cast(InputLayerKind, requested), f"{requested}: stated"


def _input_layer_spec(kind: InputLayerKind, dataset: DatasetFacts) -> dict[str, Any]:
    """The input layer's kind with the dataset's constants (the authors' are the same; see the layouts)."""
    if kind != "identity" and dataset.mean is None:
        raise ConfigError(f"dataset={dataset.name} has no mean/std constants for a {kind} input layer")
    return {"kind": kind, "mean": dataset.mean if kind != "identity" else None, "std": dataset.std}


def _strip_prefix(
    weights: Mapping[str, Any], layout: Layout, origin: str, path: Path
) -> tuple[dict[str, torch.Tensor], str]:
    """The state dict with the layout's container prefix removed (the first prefix every key has)."""
    for prefix in layout.prefixes:
        if weights and all(key.startswith(prefix) for key in weights):
            return {key.removeprefix(prefix): value for key, value in weights.items()}, prefix
    first = ", ".join(list(weights)[:3])
    raise CheckpointMismatchError(
        f"the weight keys of {path} ({first}, ...) do not all start with one of {list(layout.prefixes)}, the "
        f"prefixes of {origin}'s saved models"
    )


def _fill_num_batches_tracked(weights: dict[str, torch.Tensor], expected: Mapping[str, torch.Tensor]) -> list[str]:
    """Add BatchNorm's ``num_batches_tracked`` counters when the file has none (saved before PyTorch 0.4.1)."""
    counters = [key for key in expected if key.endswith("num_batches_tracked")]
    if not counters or any(key in weights for key in counters):
        return []
    for key in counters:
        weights[key] = torch.zeros((), dtype=torch.long)
    return [
        f"the file has no BatchNorm num_batches_tracked counters (saved before PyTorch 0.4.1); {len(counters)} set to 0"
    ]


def _warn_on_sigma_in_path(path: Path, sigma: float) -> None:
    """Warn when the authors' folder name (``noise_0.25``, ``sig0_tr_0.25``) names another sigma than the one stated.

    Only a warning: folder names have been wrong before (SmoothAdv issue #2: a ``noise_0.00`` model trained at 0.12).
    """
    found = re.search(r"(?:noise|sig0_tr)_(\d+(?:\.\d+)?)", str(path))
    if found and abs(float(found.group(1)) - sigma) > 1e-9:
        log.warning("%s sits in a folder named for sigma=%s, but sigma=%s was stated", path, found.group(1), sigma)
