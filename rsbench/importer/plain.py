"""``python -m rsbench.importer.plain IN OUT``: rewrite a checkpoint you trust as tensors and plain values only.

rsbench reads every file with ``torch.load(weights_only=True)``. Checkpoints that also pickled other objects (an
``argparse.Namespace`` of the training arguments, a NumPy scalar, a whole ``nn.Module``) cannot be read that way.
This command unpickles IN -- which runs whatever code IN names, so only for a file from a source you trust -- and
saves what rsbench needs: tensors, numbers, strings, and lists and dictionaries of them; an ``nn.Module`` becomes
its state dict, NumPy values become numbers or tensors, ``argparse.Namespace`` a dictionary, and anything else is
dropped (and listed).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rsbench.runs.floor import CommandParser, refuse

Plain = Any  # a tensor, a number, a string, None, or a list or dict of them


def to_plain(value: Any, where: str, dropped: list[str]) -> Plain:
    """``value`` as tensors and plain values (see the module docstring); what cannot be converted is dropped.

    Args:
        value: the object.
        where: its path inside the file (for the report of dropped values).
        dropped: receives the path and type of each dropped value.

    >>> dropped = []
    >>> to_plain({"a": np.float64(0.5), "b": argparse.Namespace(lr=0.1), "c": object()}, "", dropped)
    {'a': 0.5, 'b': {'lr': 0.1}}
    >>> dropped
    ['c (object)']
    """
    import torch  # (here, not above: the command line is checked before torch loads)
    from torch import nn

    if isinstance(value, np.generic):  # before float: np.float64 is a float subclass, but not a safe global
        return value.item()
    if isinstance(value, torch.Tensor) or value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, nn.Module):
        return to_plain(value.state_dict(), where, dropped)
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    if isinstance(value, argparse.Namespace):
        value = vars(value)
    if isinstance(value, Mapping):
        converted = {}
        for key, item in value.items():
            name = f"{where}.{key}" if where else str(key)
            plain = to_plain(item, name, dropped)
            if plain is not None or item is None:
                converted[key if isinstance(key, str | int) else str(key)] = plain
        return converted
    if isinstance(value, list | tuple):
        return [to_plain(item, f"{where}[{i}]", dropped) for i, item in enumerate(value)]
    dropped.append(f"{where} ({type(value).__name__})")
    return None


def main(argv: list[str] | None = None) -> None:
    """Convert IN to OUT and list what was dropped; a bad command line is one error line, before torch loads."""
    parser = CommandParser("python -m rsbench.importer.plain", description=__doc__)
    parser.add_argument("source", type=Path, help="the checkpoint to convert (it will be unpickled: trust it)")
    parser.add_argument("out", type=Path, help="where to write the plain checkpoint")
    args = parser.parse_args(argv)
    if args.out.exists():
        refuse(f"{args.out} exists; choose another name")
    if not args.source.is_file():
        refuse(f"{args.source} is not a file: give the checkpoint to convert")
    import torch

    dropped: list[str] = []
    plain = to_plain(torch.load(args.source, map_location="cpu", weights_only=False), "", dropped)
    torch.save(plain, args.out)
    torch.load(args.out, weights_only=True)  # it must now read safely
    print(f"wrote {args.out}" + (f"; dropped {', '.join(dropped)}" if dropped else ""))


if __name__ == "__main__":
    main()
