"""``train_layout``: the memory layout a method trains its network in (``contiguous``, ``channels_last`` or ``auto``).

Channels-last (NHWC) is the same network on the same data with its 4-D weights and activations stored in another
order: convolutions on CPUs (oneDNN) and on GPUs (cuDNN, with tensor cores) run faster in it. Nothing else changes.
The training noise is drawn as before, contiguous and in fp32 in [0,1] pixel space (:mod:`rsbench.noise`), so every
noisy image has the same values in either layout; only the order in which the convolutions sum their products
differs, which moves the weights by float rounding (bit-identical only within one layout, machine and thread count).
Measured on one CPU thread: experiments/training_throughput/ (``python -m rsbench.bench.training_throughput``).

The layout is set for the fit only: validation during the fit runs in it too, and the network is returned to the
contiguous layout when the fit ends, so the test stage and certification run exactly as without the option
(certification has its own ``certify.channels_last``). ``auto`` picks channels-last on the CPU for a network with a
2-D convolution, and the contiguous layout otherwise.

bf16 autocast is Lightning's own ``trainer.precision=bf16-mixed``; :func:`bf16_warning` says when the CPU has no
native bf16 (no AVX-512 BF16 or AMX), where autocast is emulated and several times slower than fp32.
"""

from __future__ import annotations

import logging
from typing import Literal

import pytorch_lightning as pl
import torch
from torch import nn

from rsbench.runs.layout_choice import Layout, check_layout

log = logging.getLogger(__name__)


def has_conv2d(module: nn.Module) -> bool:
    """Whether ``module`` holds a 2-D convolution (the layers channels-last speeds up)."""
    return any(isinstance(layer, nn.Conv2d) for layer in module.modules())


def resolve_layout(layout: Layout, module: nn.Module, device: torch.device) -> Literal["contiguous", "channels_last"]:
    """The layout ``layout`` trains ``module`` in on ``device``: ``auto`` is channels-last on a CPU with a conv net."""
    if layout != "auto":
        return layout
    return "channels_last" if device.type == "cpu" and has_conv2d(module) else "contiguous"


class TrainingLayout(pl.Callback):
    """Train the LightningModule in ``layout`` (:data:`LAYOUTS`) for the fit, and return it to contiguous after.

    Args:
        layout: ``contiguous`` (eager NCHW), ``channels_last`` or ``auto`` (the config's default).
    """

    def __init__(self, layout: Layout = "contiguous") -> None:
        self.layout = check_layout(layout)
        self.converted = False

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        """Before the fit builds its optimizer, put the module's 4-D parameters and buffers in the layout."""
        if stage != "fit":
            return
        chosen = resolve_layout(self.layout, pl_module, trainer.strategy.root_device)
        if chosen == "channels_last":
            pl_module.to(memory_format=torch.channels_last)
            self.converted = True
            log.info("training in the channels-last memory layout (train_layout=%s)", self.layout)

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        """After the fit, return the module to the contiguous layout (testing and certification run as without it)."""
        if stage == "fit" and self.converted:
            pl_module.to(memory_format=torch.contiguous_format)
            self.converted = False


def bf16_warning(precision: object, accelerator: str) -> str | None:
    """A warning when ``trainer.precision`` is bf16 on a CPU without native bf16, else ``None``.

    Without AVX-512 BF16 or AMX, oneDNN emulates bf16 and autocast runs several times slower than fp32 (LeNet on an
    AMD EPYC with AVX2: experiments/training_throughput/report/gaussian_bf16.txt).
    """
    on_cpu = accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available())
    if not (on_cpu and str(precision).startswith("bf16")):
        return None
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return None
    return (
        f"trainer.precision={precision} on a CPU without native bf16 ({torch.backends.cpu.get_cpu_capability()}, no "
        "AVX-512 BF16 or AMX): autocast is emulated there and trains several times slower than fp32 "
        "(trainer.precision=32-true; train_layout=channels_last is the faster option on such a CPU)"
    )
