"""What a resumed run may change: the settings that made its checkpoints and its certificates must stay the same.

A run directory keeps the config it was started with in ``.hydra/config.yaml``. Rerunning into it (``resume=<dir>``,
the same ``hydra.run.dir``, or a requeued SLURM job) continues the run only if the requested config trains the same
model (:data:`TRAINED` minus :data:`FREE`) and, once certificates exist, certifies under the same protocol
(:data:`CERTIFIED` minus :data:`FREE`). Everything else (where the data lives, loggers, progress bars, how many
images to certify) may change. Values are compared resolved, so ``method.lbd=1.0`` and the lookup that gave 1.0 are
the same setting. Under ``certify``, only the certification settings count (``rsbench.certify.pipeline.settings``), and
the ones :data:`~rsbench.certify.pipeline.settings.RESUMABLE` lists may change (the pipeline's own protocol check, which
guards the rows themselves, allows the same ones).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rsbench.certify.pipeline.settings import CHOICES, KEYS, RESUMABLE
from rsbench.errors import ResumeMismatchError
from rsbench.methods.card import cards
from rsbench.runs.cli import CHANGED_DEFAULTS, RUN_CONFIG, TRAIN
from rsbench.runs.datasets import FACT_KEYS
from rsbench.runs.quoting import resume_command

STORED_CONFIG = Path(RUN_CONFIG) / "config.yaml"
TRAINED = (
    "sigma",
    "seed",
    "train",
    "allow_sigma_mismatch",
    "ckpt_path",
    "recipe",
    "arch",
    "method",
    "dataset",
    "optimizer",
    "scheduler",
    "trainer",
    "callbacks",
    "noise",
    "train_layout",
)
CERTIFIED = ("certify", "test_ckpt")
CERTIFIED_MODEL = ("model", "dataset", "allow_sigma_mismatch")
"""What a run of ``python -m rsbench.certify`` certifies: a resumed one keeps them (and CERTIFIED, once it has rows)."""
DUAL_RUN = ("stage", "dataset", "experts", "expert_models", "router", "beta", "router_n0", "router_n", "expert_records")
"""What a run of ``python -m rsbench.dual`` does and with which models: a resumed one keeps them (and CERTIFIED, once
it has rows; its stages' own files check the rest)."""
FREE = (
    "dataset.data_dir",
    "dataset.num_workers",
    "dataset.pin_memory",
    "dataset.download",
    *FACT_KEYS,  # facts about the dataset that tools read, added after runs were made: no setting
    "trainer.accelerator",
    "trainer.enable_progress_bar",
    "trainer.enable_model_summary",
    "trainer.log_every_n_steps",
    "trainer.default_root_dir",
    "method.certify_defaults",  # certification defaults: the pipeline's protocol check guards the rows they change
    *(f"certify.{key}" for key in RESUMABLE),
)
CERTIFY_SETTINGS = frozenset({*KEYS, *CHOICES})  # the certify.* keys that are settings (not switches, not wiring)
_MISSING = "<not set>"
ADDED = {
    "noise.name": "gaussian",
    "train_layout": CHANGED_DEFAULTS[TRAIN]["train_layout"],  # the layout before the option: the default before auto
    "certify.noise": "gaussian",
    "certify.norm": None,
    "certify.noise_grid": None,
    "certify.radius_target": None,
    "certify.design": "looks",  # the one sequential design there was
}
"""Keys added after runs were made, with the value a run without them had: such a run resumes under them."""
UPGRADED = {
    "callbacks.model_checkpoint._target_": (
        "pytorch_lightning.callbacks.ModelCheckpoint",
        "rsbench.runs.checkpointing.MethodCheckpoint",
    ),
}
"""Settings whose value changed under a run without changing what it trained: (the run's old value, the new one).
The best checkpoint's callback became :class:`rsbench.runs.checkpointing.MethodCheckpoint`; a run made with
Lightning's resumes under it (with ``first_epoch`` added, which selects only among the method's epochs from now on)."""
SEQUENTIAL_KEYS = tuple(f"certify.{key}" for key in ("design", "radius_cap", "radius_target", "first_look", "growth"))
"""Settings of sequential CERTIFY only: rows certified with the standard mode do not depend on them."""


def free_keys() -> tuple[str, ...]:
    """What a resumed run may change: :data:`FREE` and each method card's execution settings."""
    return (*FREE, *(key for card in cards() for key in card.execution_keys))


def settings(cfg: DictConfig, keys: Iterable[str] = TRAINED, free: Iterable[str] | None = None) -> dict[str, Any]:
    """The resolved leaf values under ``keys`` (``dotted.key -> value``), without ``free`` (:func:`free_keys`)."""
    leaves: dict[str, Any] = {}
    for key in keys:
        try:
            node = OmegaConf.select(cfg, key, default=_MISSING)
        except Exception:  # an interpolation that no longer resolves: compare it as written
            node = OmegaConf.to_container(cfg, resolve=False).get(key)  # type: ignore[union-attr]
        _flatten(cfg, key, node, leaves)
    skipped = tuple(free_keys() if free is None else free)
    return {key: value for key, value in leaves.items() if not any(_under(key, f) for f in skipped) and _counts(key)}


def check_resumable(
    cfg: DictConfig,
    output_dir: Path,
    certified: bool,
    keys: tuple[str, ...] = TRAINED,
    module: str = "rsbench",
) -> None:
    """Refuse to continue the run in ``output_dir`` with settings that change what it trained (or certified).

    Args:
        cfg: the requested config.
        output_dir: the run directory; a directory without ``.hydra/config.yaml`` accepts any config.
        certified: whether certification rows exist (then the certification protocol must match too).
        keys: what made the run (:data:`TRAINED` for ``python -m rsbench``, :data:`CERTIFIED_MODEL` for
            ``python -m rsbench.certify``).
        module: the command that continues it, named in the message.

    Raises:
        ResumeMismatchError: naming every differing key with the run's value and the requested one.
    """
    path = Path(output_dir) / STORED_CONFIG
    if not path.is_file():
        return
    stored = OmegaConf.load(path)
    assert isinstance(stored, DictConfig)
    compared = (*keys, *CERTIFIED) if certified else keys
    before = settings(stored, compared)
    after = settings(cfg, compared)
    for key, value in ADDED.items():
        if key in after and before.get(key, _MISSING) == _MISSING:  # (a top-level key is there, as not set)
            before[key] = value
    for key, (old, new) in UPGRADED.items():
        if before.get(key) == old and after.get(key) == new:
            before[key] = new
            first = "callbacks.model_checkpoint.first_epoch"
            before.setdefault(first, after.get(first, _MISSING))
    if before.get("certify.mode", "standard") == after.get("certify.mode", "standard") == "standard":
        for key in SEQUENTIAL_KEYS:  # (their defaults changed when the sequential designs came)
            before.pop(key, None)
            after.pop(key, None)
    _same_run_checkpoint(before, after, Path(output_dir))
    differences = [
        f"  {key}: the run has {before.get(key, _MISSING)!r}, this command asks for {after.get(key, _MISSING)!r}"
        for key in sorted(set(before) | set(after))
        if before.get(key, _MISSING) != after.get(key, _MISSING)
    ]
    if differences:
        what = "trained or certified" if certified else "trained"
        raise ResumeMismatchError(
            f"{output_dir} was {what} with other settings, so this command cannot continue it:\n"
            + "\n".join(differences)
            + f"\nContinue it with its own settings ({resume_command(module, output_dir)}, adding only "
            "certification or logging options), or write to a new directory."
        )


def _same_run_checkpoint(before: dict[str, Any], after: dict[str, Any], output_dir: Path) -> None:
    """``ckpt_path=<this run>/checkpoints/<x>.ckpt`` asks for the resume itself (the older way), not a change."""
    requested = after.get("ckpt_path")
    if isinstance(requested, str):
        path = Path(requested).expanduser().resolve()
        if path.parent == (output_dir / "checkpoints").resolve():
            after["ckpt_path"] = before.get("ckpt_path")


def _flatten(root: DictConfig, key: str, node: Any, leaves: dict[str, Any]) -> None:
    if isinstance(node, DictConfig):
        raw = OmegaConf.to_container(node, resolve=False)
        assert isinstance(raw, dict)
        for child in node:
            child_key = f"{key}.{child!s}"
            try:
                value = OmegaConf.select(root, child_key, default=_MISSING)
            except Exception:  # an interpolation that no longer resolves: compare it as written
                value = raw[child]
            _flatten(root, child_key, value, leaves)
    elif OmegaConf.is_config(node):
        leaves[key] = OmegaConf.to_container(node, resolve=True)
    else:
        leaves[key] = node


def _counts(key: str) -> bool:
    """Whether a leaf is a setting: under ``certify``, only the certification settings count.

    Not ``enabled``, nor the callback wiring that configs written before the settings schema stored there.
    """
    group, _, name = key.partition(".")
    return group != "certify" or name.split(".")[0] in CERTIFY_SETTINGS


def _under(key: str, prefix: str) -> bool:
    return key == prefix or key.startswith(prefix + ".")
