"""``make install-cpu``: PyTorch's CPU-only wheels, then rsbench as ``make install`` installs it (docs/install.md).

On a machine without an NVIDIA GPU, ``make install`` pulls the CUDA build of torch and its nvidia-* wheels from PyPI
(several GB). PyTorch's own instructions for a CPU-only install point pip at its CPU wheel index; the CPU wheel of
the pinned version (``2.14.1+cpu``) satisfies setup.cfg's pin (``torch==2.14.1``), so the editable install after it
keeps it. Nothing is downloaded here: the commands are read with ``make -n``.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess

import pytest
from packaging.specifiers import SpecifierSet

from tests.helpers import ROOT

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def make_dry_run(target: str) -> list[list[str]]:
    """The commands ``make <target>`` would run, split as the shell would."""
    # --no-print-directory: under `make test` (MAKELEVEL set) make would add "Entering/Leaving directory" lines
    command = ["make", "--no-print-directory", "-n", target]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return [shlex.split(line) for line in result.stdout.splitlines() if line.strip()]


def torch_pins() -> list[str]:
    return re.findall(r"^\s*(torch(?:vision)?==[\d.]+)\s*$", (ROOT / "setup.cfg").read_text(), flags=re.MULTILINE)


def test_install_cpu_takes_the_pinned_torch_from_pytorchs_cpu_index_first() -> None:
    pins = torch_pins()
    assert [pin.split("==")[0] for pin in pins] == ["torch", "torchvision"]
    commands = make_dry_run("install-cpu")
    pip = [command for command in commands if command[1:4] == ["-m", "pip", "install"]]
    assert len(pip) == 2
    assert pip[0][4:] == [*pins, "--index-url", CPU_INDEX]  # only torch and torchvision come from that index
    assert pip[1] == make_dry_run("install")[-1]  # then rsbench exactly as `make install` installs it


def test_make_install_is_unchanged_and_uses_no_other_index() -> None:
    commands = make_dry_run("install")
    assert commands[-1][1:] == ["-m", "pip", "install", "-e", ".[dev]"]
    assert not any("--index-url" in command for command in commands)


@pytest.mark.parametrize("local", ["cpu", "cu126"])
def test_the_cpu_wheels_version_satisfies_the_pin_so_the_second_install_keeps_it(local: str) -> None:
    """PEP 440: a pin without a local label (``==2.14.1``) matches any local build (``2.14.1+cpu``)."""
    for pin in torch_pins():
        version = pin.split("==")[1]
        assert SpecifierSet(f"=={version}").contains(f"{version}+{local}")
