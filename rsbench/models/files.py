"""The files a model builder reads, checked without torch, so that a missing one is refused at once.

The builders run these checks first, and so does the command floor before torch is imported
(:func:`rsbench.runs.precheck.check_model_files`): each message exists once.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rsbench.errors import ConfigError

MODEL_FILES: Mapping[str, tuple[str, str]] = {
    "rsbench.models.builders.checkpoint": ("path", "checkpoint {path} is not a file"),
    "rsbench.models.builders.ensemble": ("members", "checkpoint {path} is not a file"),
    "rsbench.models.builders.torchscript": ("path", "TorchScript archive {path} does not exist"),
    "rsbench.models.builders.exported": ("path", "exported program {path} does not exist"),
    "rsbench.models.builders.denoised": ("denoiser_ckpt", "{path} is not a file"),
}
"""Per model builder (``model._target_``): the argument naming its file(s), and the message when one is missing."""


def check_model_file(target: str, path: str | Path) -> None:
    """Refuse ``path`` for builder ``target`` (a key of :data:`MODEL_FILES`) unless it is a file.

    Raises:
        ConfigError: ``checkpoint x.ckpt is not a file`` (the builder's message).
    """
    if not Path(path).expanduser().is_file():
        raise ConfigError(MODEL_FILES[target][1].format(path=path))
