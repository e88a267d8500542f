"""Run folders name the threat model: a Laplace (l1) run does not land beside the Gaussian (l2) runs (issue 49)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rsbench.runs.resolvers import threat_suffix
from tests.helpers import ROOT


def output_dir(module: str, *overrides: str) -> str:
    """The ``output_dir`` the command resolves to (``--cfg job --resolve``: composed, nothing run)."""
    result = subprocess.run(
        [sys.executable, "-m", module, *overrides, "--cfg", "job", "--resolve"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return next(line.split(": ", 1)[1] for line in result.stdout.splitlines() if line.startswith("output_dir:"))


@pytest.mark.parametrize(
    ("module", "overrides", "folder"),
    [
        ("rsbench", (), "outputs/mnist_embedded/gaussian/sigma_0.25/"),
        ("rsbench", ("noise=laplace",), "outputs/mnist_embedded/gaussian/sigma_0.25_laplace/"),
        ("rsbench.certify", ("model.path=m.ckpt",), "outputs/mnist_embedded/certify_checkpoint-m/"),
        (
            "rsbench.certify",
            ("model.path=m.ckpt", "certify.noise=laplace"),
            "outputs/mnist_embedded/certify_checkpoint-m_laplace/",
        ),
    ],
)
def test_the_run_folder_names_a_threat_model_other_than_l2(
    module: str, overrides: tuple[str, ...], folder: str
) -> None:
    assert output_dir(module, *overrides).startswith(folder)


def test_gaussian_runs_keep_their_folders() -> None:
    assert threat_suffix("gaussian") == ""
    assert threat_suffix(None) == ""
    assert threat_suffix("uniform") == "_uniform"
