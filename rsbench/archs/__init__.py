"""Architectures. Every model is ``Classifier = Sequential(InputLayer, net)``; pick one with ``arch=<name>``."""

from rsbench.archs.cifar_resnet import CifarResNet
from rsbench.archs.classifier import Classifier, weights_fingerprint
from rsbench.archs.input_layer import InputLayer
from rsbench.archs.lenet import LeNet
from rsbench.archs.registry import NETWORKS, build_classifier

__all__ = [
    "NETWORKS",
    "CifarResNet",
    "Classifier",
    "InputLayer",
    "LeNet",
    "build_classifier",
    "weights_fingerprint",
]
