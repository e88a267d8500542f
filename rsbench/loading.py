"""Reading checkpoint and weight files without running code from them, and loading weights by name only.

A ``torch.load`` of a pickle may execute arbitrary code, so every file rsbench reads (released checkpoints, your own
weights, and rsbench's own checkpoints) is loaded with ``weights_only=True``: tensors, numbers, strings and plain
containers only. A file that holds anything else (an ``argparse.Namespace`` of training arguments, a NumPy scalar, a
whole pickled ``nn.Module``) is refused with the reason and the one-off conversion that makes it readable:
``python -m rsbench.importer.plain IN OUT`` (which unpickles the file, so only for a file you trust).
"""

from __future__ import annotations

import hashlib
import pickle
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rsbench.errors import CheckpointMismatchError, ConfigError, DamagedFileError, UnsafeFileError


def load_weights_only(path: str | Path, what: str = "checkpoint") -> Any:
    """``torch.load(path, weights_only=True)`` on the CPU, or a clear refusal.

    Args:
        path: the file.
        what: how to name it in messages (``checkpoint``, ``weights file``).

    Raises:
        ConfigError: there is no such file.
        UnsafeFileError: the file holds objects other than tensors and plain values.
        DamagedFileError: the file is not a PyTorch file at all (truncated, corrupt, another format).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"{what} {path} does not exist")
    return read_plain(path, what, named=f"{what} {path}")


def read_plain(path: Path, what: str, named: str, advice: str = "") -> Any:
    """``torch.load(path, weights_only=True)`` on the CPU, its failures turned into rsbench's two errors.

    Raises:
        UnsafeFileError: the file holds objects other than tensors and plain values (named ``what`` and ``path``).
        DamagedFileError: any other failure (zip, pickle, EOF): ``"<named> cannot be read (<reason>)[: <advice>]"``.
    """
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # every way a load fails (zip, pickle, EOF) means the same to the user
        unsafe = unsafe_file_error(path, what, error)
        if unsafe is not None:
            raise unsafe from None
        suffix = f": {advice}" if advice else ""
        raise DamagedFileError(f"{named} cannot be read ({load_failure_reason(error)}){suffix}") from None


def load_failure_reason(error: BaseException) -> str:
    """Why ``torch.load`` failed, in one line: the weights-only unpickler's own reason, not its boilerplate."""
    message = str(error)
    if "WeightsUnpickler error:" in message:
        detail = message.split("WeightsUnpickler error:", 1)[1].strip().splitlines()
        return f"not a PyTorch file: {detail[0]}" if detail else "not a PyTorch file"
    return f"{type(error).__name__}: {message.splitlines()[0]}" if message else type(error).__name__


def unsafe_file_error(path: Path, what: str, error: BaseException) -> UnsafeFileError | None:
    """The refusal for a readable file that holds objects other than tensors and plain values.

    ``None`` when ``error`` (raised by ``torch.load(weights_only=True)``) is something else, e.g. a corrupt file.
    """
    found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(error))
    if not isinstance(error, pickle.UnpicklingError) or found is None:
        return None
    return UnsafeFileError(
        f"{what} {path} cannot be read safely: it holds an object of type {found.group(1)}. Reading it would mean "
        "unpickling it, and unpickling runs whatever code the file names, so rsbench loads files with "
        "torch.load(weights_only=True) only. If you trust the file, convert it once into tensors and plain values "
        "(this unpickles it):\n"
        f"  python -m rsbench.importer.plain {path} {path.with_name(path.stem + '.plain.pt')}\n"
        "and use the converted file."
    )


def file_digest(path: str | Path) -> str:
    """The SHA-256 of a file's bytes (hex), to record which file a model came from."""
    digest = hashlib.sha256()
    with Path(path).expanduser().open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_strict(network: nn.Module, weights: Mapping[str, torch.Tensor], source: str) -> None:
    """Load ``weights`` into ``network`` by name, refusing any missing, unexpected or misshapen tensor.

    Raises:
        CheckpointMismatchError: naming the keys (up to ten of each kind) and the shapes that differ.
    """
    problems = state_dict_differences(network.state_dict(), weights)
    if problems:
        raise CheckpointMismatchError(f"{source} does not fit the network:\n" + "\n".join(problems))
    network.load_state_dict(weights, strict=True)


def state_dict_differences(expected: Mapping[str, torch.Tensor], found: Mapping[str, Any]) -> list[str]:
    """What keeps ``found`` from loading into a model whose state dict is ``expected``, one line per kind."""
    missing = [k for k in expected if k not in found]
    unexpected = [k for k in found if k not in expected]
    misshapen = [
        f"{k}: file {tuple(found[k].shape)}, model {tuple(expected[k].shape)}"
        for k in expected
        if k in found and isinstance(found[k], torch.Tensor) and found[k].shape != expected[k].shape
    ]
    problems = []
    for label, keys in (("missing", missing), ("unexpected", unexpected), ("different shapes", misshapen)):
        if keys:
            more = f" (and {len(keys) - 10} more)" if len(keys) > 10 else ""
            problems.append(f"  {len(keys)} {label}: {', '.join(keys[:10])}{more}")
    return problems
