"""The Lightning callbacks of the training benchmarks, apart so that their commands check arguments before torch loads.

:mod:`rsbench.bench.training_cost` counts passes with :class:`PassCounter`; :mod:`rsbench.bench.training_throughput`
times steps with :class:`StepClock`. Both import this module after their command line is checked.
"""

from __future__ import annotations

import time
from typing import Any

import pytorch_lightning as pl
import torch

from rsbench.methods.base import SmoothingModule
from rsbench.methods.denoiser import DenoiserTraining


class PassCounter(pl.Callback):
    """Times every training batch and counts the rows the trained network sees forward and backward.

    The trained network is the base classifier, or for denoised smoothing the denoiser in front of the frozen one.
    """

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.forward_rows = 0
        self.backward_rows = 0
        self._start = 0.0

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Hook the counters onto the method's trained network."""
        assert isinstance(pl_module, SmoothingModule)
        net = pl_module.composed.denoiser if isinstance(pl_module, DenoiserTraining) else pl_module.net
        net.register_forward_hook(self._count_forward)
        net.register_full_backward_hook(self._count_backward)

    def _count_forward(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], output: Any) -> None:
        if module.training or torch.is_grad_enabled():
            self.forward_rows += inputs[0].shape[0]

    def _count_backward(self, module: torch.nn.Module, grad_input: Any, grad_output: tuple[torch.Tensor, ...]) -> None:
        self.backward_rows += grad_output[0].shape[0]

    def on_train_batch_start(self, *args: Any) -> None:
        """Start the batch's clock."""
        self._start = time.perf_counter()

    def on_train_batch_end(self, *args: Any) -> None:
        """Record the batch's time."""
        self.seconds.append(time.perf_counter() - self._start)


class StepClock(pl.Callback):
    """The wall-clock seconds from the start of batch 2 to the end of the epoch's last batch (loader included)."""

    def __init__(self) -> None:
        self.start = 0.0
        self.end = 0.0

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: object, idx: int) -> None:
        """Start the clock at the second batch."""
        if idx == 1:
            self.start = time.perf_counter()

    def on_train_batch_end(self, *args: object) -> None:
        """Move the end to this batch's end."""
        self.end = time.perf_counter()
