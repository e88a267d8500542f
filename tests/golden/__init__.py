"""Loader of the golden fixtures: numbers produced by the authors' own code on a tiny float64 model.

The JSON files beside this module, and their README.md, describe one optimizer step of each method (inputs, the
injected random draws, adversarial points, loss, every parameter's gradient, BatchNorm buffers after the step);
SOURCE.md says where they came from. This module turns them into tensors and into the tiny model, built as an
rsbench :class:`~rsbench.archs.Classifier` so that the methods under test run on it unchanged.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from rsbench.archs import Classifier

GOLDEN_DIR = Path(__file__).resolve().parent

# Golden parameter/buffer name -> the same tensor's name inside the rsbench Classifier (index 0 is the input layer).
MODULE_NAMES = {"fc1": "1.1", "bn": "1.2", "fc2": "1.4"}
PARAMETERS = ("fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "fc2.weight", "fc2.bias")
BUFFERS = ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked")


@cache
def _read(name: str) -> dict[str, Any]:
    with (GOLDEN_DIR / f"{name}.json").open() as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def load(name: str) -> dict[str, Any]:
    """The fixture ``<name>.json`` (smoothadv, smoothmix, catrs, consistency, stability, macer, ddrs_sigma)."""
    return _read(name)


def case(fixture: dict[str, Any], name: str) -> dict[str, Any]:
    """The case called ``name`` of a loaded fixture."""
    for entry in fixture["cases"]:
        if entry["name"] == name:
            return dict(entry)
    raise KeyError(f"no case {name!r}; the fixture has {[entry['name'] for entry in fixture['cases']]}")


def tensor(encoded: dict[str, Any]) -> Tensor:
    """Decode ``{"shape", "dtype", "data"}``: float64 values round-trip exactly (shortest repr in the JSON)."""
    dtype = {"float64": torch.float64, "int64": torch.int64}[encoded["dtype"]]
    return torch.tensor(encoded["data"], dtype=dtype).reshape(encoded["shape"])


def inputs(fixture: dict[str, Any]) -> Tensor:
    """The B = 3 images ``[3, 1, 4, 4]`` in [0,1] (``x_uint8 / 255`` in float64)."""
    return tensor(fixture["inputs"]["x"])


def _local(name: str) -> str:
    module, attribute = name.split(".", 1)
    return f"{MODULE_NAMES[module]}.{attribute}"


def tiny_model(fixture: dict[str, Any]) -> Classifier:
    """The fixture's model in float64 with its parameters and buffers before the step, in train mode.

    flatten -> fc1 = Linear(16, 16) -> bn = BatchNorm1d(16) -> ReLU -> fc2 = Linear(16, 3), behind an identity
    input layer (the fixtures have no input normalisation).
    """
    body = nn.Sequential(nn.Flatten(), nn.Linear(16, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
    net = Classifier("golden_tiny", body, {"kind": "identity"}).double()
    model = fixture["model"]
    state = {_local(k): tensor(v) for k, v in {**model["parameters"], **model["buffers_before"]}.items()}
    net.load_state_dict(state)  # strict: every parameter and buffer of the model is given, nothing else
    return net.train()


def gradients(net: nn.Module) -> dict[str, Tensor]:
    """Every parameter's ``.grad`` under its golden name."""
    named = dict(net.named_parameters())
    return {name: named[_local(name)].grad for name in PARAMETERS}  # type: ignore[misc]


def bn_buffers(net: nn.Module) -> dict[str, Tensor]:
    """The BatchNorm buffers under their golden names."""
    named = dict(net.named_buffers())
    return {name: named[_local(name)] for name in BUFFERS}


def image_major(noise_major: Tensor) -> Tensor:
    """``[m, B, ...]`` (row ``j*B + i`` is copy j of image i) -> rsbench's ``[B*m, ...]`` (row ``i*m + j``)."""
    return noise_major.transpose(0, 1).reshape(-1, *noise_major.shape[2:])


def noise_major(image_major_rows: Tensor, num_copies: int) -> Tensor:
    """The inverse of :func:`image_major`: ``[B*m, ...] -> [m, B, ...]``."""
    rows = image_major_rows.reshape(-1, num_copies, *image_major_rows.shape[1:])
    return rows.transpose(0, 1)
