"""LoRA adapters (Hu et al., ICLR 2022) in a pretrained network, with everything else frozen but the head.

``W x`` becomes ``W x + (alpha / r) B A x`` in each targeted ``nn.Linear``, with ``A`` (``r x in``) initialised as
in the authors' ``loralib`` (Kaiming-uniform) and ``B`` (``out x r``) at zero, so a fresh adapter leaves the network
unchanged. The adapters are injected with peft's ``inject_adapter_in_model`` (no wrapper around the network, so the
classifier stays ``Sequential(InputLayer, network)`` and its state-dict keys keep their names, with the adapters as
``<layer>.lora_A.default.weight`` and ``<layer>.lora_B.default.weight`` and the frozen weights as
``<layer>.base_layer.weight``). The configuration is kept in ``Classifier.network_spec["lora"]``, so a checkpoint's
signature rebuilds the same network (:func:`rsbench.archs.pretrained.build_pretrained`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from torch import nn

from rsbench.archs.classifier import Classifier
from rsbench.errors import ConfigError

LORA_KEYS = ("r", "alpha", "dropout", "targets", "trainable")


def lora_spec(classifier: Classifier, options: Mapping[str, Any]) -> dict[str, Any]:
    """The full LoRA configuration for ``classifier``'s network: ``options`` with the defaults filled in.

    Args:
        classifier: a classifier built from a timm or Hugging Face spec (``network_spec`` set).
        options: ``r`` (rank), ``alpha`` (scale numerator, default ``r``), ``dropout`` (on the adapter's input),
            ``targets`` (module names whose ``nn.Linear`` layers get adapters; ``None``: every linear layer but the
            head) and ``trainable`` (modules trained in full besides the adapters; ``None``: the head).

    Raises:
        ConfigError: an unknown key, a rank below 1, a target or trainable module the network does not have.
    """
    unknown = sorted(set(options) - set(LORA_KEYS))
    if unknown:
        raise ConfigError(f"method.lora has unknown keys {unknown}; it takes {list(LORA_KEYS)}")
    if classifier.network_spec is None:
        raise ConfigError(
            f"LoRA adapts a pretrained network (arch=timm or arch=hf); arch={classifier.arch} is trained in full"
        )
    rank = options.get("r", 8)
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ConfigError(f"method.lora.r={rank!r} must be an integer >= 1")
    dropout = float(options.get("dropout") or 0.0)
    if not 0 <= dropout < 1:
        raise ConfigError(f"method.lora.dropout={dropout} must be in [0, 1)")
    network = classifier[1]
    names = {name for name, _ in network.named_modules() if name}
    trainable = list(options.get("trainable") or [_head(classifier)])
    missing = [name for name in trainable if name not in names]
    if missing:
        raise ConfigError(
            f"method.lora.trainable={missing}: the network has no such module (the head is {_head(classifier)})"
        )
    linear = [
        name
        for name, module in network.named_modules()
        if isinstance(module, nn.Linear) and not any(_within(name, t) for t in trainable)
    ]
    targets = list(options.get("targets") or linear)
    chosen = [name for name in linear if any(name == t or name.endswith(f".{t}") for t in targets)]
    if not chosen:
        raise ConfigError(f"method.lora.targets={targets} match no linear layer of the network (e.g. {linear[:4]})")
    alpha = float(options.get("alpha") or rank)
    return {"r": rank, "alpha": alpha, "dropout": dropout, "targets": chosen, "trainable": trainable}


def inject(classifier: Classifier, spec: Mapping[str, Any]) -> None:
    """Inject the adapters of ``spec`` (from :func:`lora_spec`) and freeze all but them and ``spec["trainable"]``.

    Raises:
        ConfigError: peft is missing.
    """
    try:
        from peft import LoraConfig, inject_adapter_in_model
    except ImportError:
        raise ConfigError("LoRA needs the peft package: pip install 'rsbench[pretrained]'") from None
    config = LoraConfig(
        r=int(spec["r"]),
        lora_alpha=spec["alpha"],  # a float (peft types it int, and scales by alpha / r)
        lora_dropout=float(spec["dropout"]),
        target_modules=list(spec["targets"]),
        bias="none",
    )
    network = classifier[1]
    inject_adapter_in_model(config, network)
    for name, parameter in network.named_parameters():
        parameter.requires_grad_("lora_" in name or any(_within(name, t) for t in spec["trainable"]))
    assert classifier.network_spec is not None
    classifier.network_spec["lora"] = {key: spec[key] for key in LORA_KEYS}


def trainable_counts(module: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts."""
    total = sum(p.numel() for p in module.parameters())
    return sum(p.numel() for p in module.parameters() if p.requires_grad), total


def _head(classifier: Classifier) -> str:
    """The name of the network's classification head: timm's ``pretrained_cfg['classifier']``, transformers'."""
    network = classifier[1]
    config = getattr(network, "pretrained_cfg", None) or {}
    if config.get("classifier"):
        head = config["classifier"]
        return str(head[0] if isinstance(head, Sequence) and not isinstance(head, str) else head)
    for name in ("model.classifier", "head", "fc", "classifier"):
        if name in dict(network.named_modules()):
            return name
    linear = [name for name, module in network.named_modules() if isinstance(module, nn.Linear)]
    return linear[-1] if linear else ""


def _within(name: str, module: str) -> bool:
    return name == module or name.startswith(f"{module}.")
