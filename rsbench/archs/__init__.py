"""Architectures. Every model is ``Classifier = Sequential(InputLayer, net)``; pick one with ``arch=<name>``."""

from rsbench.archs.cifar_resnet import CifarResNet
from rsbench.archs.classifier import Classifier, check_signature, weights_fingerprint
from rsbench.archs.input_layer import InputLayer
from rsbench.archs.lenet import LeNet

__all__ = [
    "CifarResNet",
    "Classifier",
    "InputLayer",
    "LeNet",
    "check_signature",
    "weights_fingerprint",
]
