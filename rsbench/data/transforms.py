"""Image transforms to [0,1] tensors, with the papers' training augmentation. No normalization: it is in the model."""

from __future__ import annotations

from typing import Literal

from torchvision import transforms as T

Augmentation = Literal["none", "crop_flip", "imagenet"]
AUGMENTATIONS: tuple[str, ...] = ("none", "crop_flip", "imagenet")


def build_transforms(augmentation: Augmentation, image_size: int) -> tuple[T.Compose, T.Compose]:
    """The (training, evaluation) transforms of a dataset.

    Args:
        augmentation: ``none`` (MNIST, SVHN), ``crop_flip`` (CIFAR: random crop with 4-pixel padding and
            horizontal flip) or ``imagenet`` (random-resized crop + flip for training; resize to 256/224 of the
            crop size and center crop for evaluation, Cohen et al.'s ImageNet protocol).
        image_size: the side of the (square) images the model sees.
    """
    if augmentation == "none":
        plain = T.Compose([T.ToTensor()])
        return plain, plain
    if augmentation == "crop_flip":
        train = T.Compose([T.RandomCrop(image_size, padding=4), T.RandomHorizontalFlip(), T.ToTensor()])
        return train, T.Compose([T.ToTensor()])
    if augmentation == "imagenet":
        train = T.Compose([T.RandomResizedCrop(image_size), T.RandomHorizontalFlip(), T.ToTensor()])
        evaluation = T.Compose([T.Resize(image_size * 256 // 224), T.CenterCrop(image_size), T.ToTensor()])
        return train, evaluation
    raise ValueError(f"augmentation must be one of {list(AUGMENTATIONS)}, got {augmentation!r}")
