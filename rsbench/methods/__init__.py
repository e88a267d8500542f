"""Training methods: one LightningModule subclass per method, each overriding its loss (``training_loss``)."""

from rsbench.methods.base import Batch, SmoothingModule, StepOutput
from rsbench.methods.gaussian import GaussianAugmentation

__all__ = ["Batch", "GaussianAugmentation", "SmoothingModule", "StepOutput"]
