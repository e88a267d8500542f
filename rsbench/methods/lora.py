"""Fine-tuning under noise with LoRA: any method whose loss trains the base classifier, on its adapters only.

``python -m rsbench arch=timm arch.network.name=... +lora=default method=gaussian`` (``conf/lora/default.yaml`` puts
the options under ``method.lora``) injects LoRA adapters into the pretrained network
(:mod:`rsbench.archs.lora`) before the method is built, and freezes everything else but the head: the optimizer then
sees only the adapters and the head (:meth:`~rsbench.methods.base.SmoothingModule.trainable_parameters` skips frozen
parameters), as FT-CADIS (Jang et al. 2024) fine-tunes timm ViTs for smoothing. The loss is the method's own, so
Gaussian augmentation, consistency, SmoothMix, SmoothAdv, MACER and stability training all work; a method whose loss
trains something else, or that needs another run's classifier of the same architecture, refuses it (its card's
``lora_refusal`` says why).

Checkpoints hold the whole classifier, adapters included, and their signature names the base network (timm name and
options, or the transformers config; the weights it started from with their SHA-256) and the LoRA configuration,
so ``python -m rsbench.certify model.path=<best.ckpt>`` rebuilds and certifies it with nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from omegaconf import OmegaConf

from rsbench.archs.classifier import Classifier
from rsbench.archs.lora import inject, lora_spec, trainable_counts
from rsbench.errors import ConfigError
from rsbench.methods.card import find_card

log = logging.getLogger(__name__)


def apply_lora(method: str, net: Classifier, options: Mapping[str, Any]) -> dict[str, Any]:
    """Inject LoRA adapters into ``net`` for ``method`` and freeze the rest (but the head).

    Returns:
        The options as plain values (what the method's hyperparameters record: a checkpoint is read weights-only).

    Raises:
        ConfigError: the method refuses LoRA (its card's ``lora_refusal``), the network is not a pretrained one, or
            an option is out of range (named as ``method.lora.<key>``).
    """
    card = find_card(method)
    if card is not None and card.lora_refusal:
        raise ConfigError(f"method={method} cannot fine-tune with LoRA (method.lora): {card.lora_refusal}")
    container = OmegaConf.to_container(options, resolve=True) if OmegaConf.is_config(options) else dict(options)
    assert isinstance(container, dict)
    plain = {str(key): value for key, value in container.items()}
    spec = lora_spec(net, plain)
    inject(net, spec)
    trained, total = trainable_counts(net)
    log.info(
        "LoRA r=%d alpha=%g on %d linear layers; training %d of %d parameters (%.2f%%): the adapters and %s",
        spec["r"],
        spec["alpha"],
        len(spec["targets"]),
        trained,
        total,
        100 * trained / max(total, 1),
        ", ".join(spec["trainable"]),
    )
    return plain
