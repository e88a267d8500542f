"""docs/python_api.md's example of reading a trained model runs as written, on a checkpoint a run wrote."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from rsbench import Smooth
from tests.helpers import ROOT

PAGE = ROOT / "docs" / "python_api.md"


def trained_model_example() -> str:
    """The code block of the page that reads a checkpoint with ``read_classifier``."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    return next(block for block in blocks if "read_classifier(" in block)


def test_the_trained_model_example_certifies_a_runs_checkpoint(smoke_run: Path) -> None:
    checkpoint = smoke_run / "checkpoints" / "best.ckpt"
    code = trained_model_example().replace('"outputs/.../checkpoints/best.ckpt"', repr(str(checkpoint)))
    assert repr(str(checkpoint)) in code  # the page still reads the path this test substitutes
    torch.manual_seed(0)
    scope: dict[str, object] = {"x": torch.rand(1, 28, 28)}
    exec(compile(code, str(PAGE), "exec"), scope)  # the documented snippet, run as a user would
    assert isinstance(scope["smooth"], Smooth)
    assert scope["signature"]["sigma"] == 0.25  # type: ignore[index]
    assert scope["prediction"] in (Smooth.ABSTAIN, *range(10))
    assert scope["radius"] >= 0.0  # type: ignore[operator]
