"""Training methods: one LightningModule subclass per method, each overriding its loss (``training_loss``)."""

from rsbench.methods.base import Batch, SmoothingModule, StepOutput
from rsbench.methods.catrs import CATRS
from rsbench.methods.consistency import ConsistencyRegularization
from rsbench.methods.denoiser import DenoiserTraining
from rsbench.methods.gaussian import GaussianAugmentation
from rsbench.methods.macer import MACER
from rsbench.methods.smoothadv import SmoothAdv
from rsbench.methods.smoothmix import SmoothMix
from rsbench.methods.stability import StabilityTraining
from rsbench.methods.standard import StandardTraining
from rsbench.methods.sun2025 import Sun2025

__all__ = [
    "CATRS",
    "MACER",
    "Batch",
    "ConsistencyRegularization",
    "DenoiserTraining",
    "GaussianAugmentation",
    "SmoothAdv",
    "SmoothMix",
    "SmoothingModule",
    "StabilityTraining",
    "StandardTraining",
    "StepOutput",
    "Sun2025",
]
