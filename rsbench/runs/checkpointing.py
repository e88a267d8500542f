"""``MethodCheckpoint``: a ``ModelCheckpoint`` that selects only among the epochs whose weights are the method.

A method whose schedule starts with another method's loss (Sun et al. 2025 trains as Gaussian augmentation until
``ds_epoch``; MACER deferred has lambda = 0 before ``lbd_from_epoch``; DDRS searches no sigma before
``sigma_search_from_epoch``) declares on its card from which epoch a checkpoint is the method
(:class:`rsbench.methods.card.MethodEpoch`). ``conf/callbacks/default.yaml`` gives that epoch to the best-checkpoint
callback (``first_epoch: ${rs.first_method_epoch:${method}}``), which then never considers an earlier epoch: the
monitored metric of epochs before it is not compared, and ``best.ckpt`` is first written at ``first_epoch``. With
``first_epoch = 0`` (Gaussian and every method without such a phase) it is ``ModelCheckpoint`` exactly, down to the
key its state is saved under, so runs checkpointed before this class existed resume with their best score.
"""

from __future__ import annotations

import logging
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from torch import Tensor

log = logging.getLogger(__name__)


class MethodCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` whose top-k selection only looks at epochs ``first_epoch`` and later.

    Args:
        first_epoch: the first (0-indexed) epoch whose checkpoint may be selected (the method's, from its card).
        *args: ``ModelCheckpoint``'s arguments.
        **kwargs: ``ModelCheckpoint``'s arguments.

    Raises:
        ValueError: ``first_epoch`` is not an integer >= 0.
    """

    def __init__(self, *args: Any, first_epoch: int = 0, **kwargs: Any) -> None:
        if isinstance(first_epoch, bool) or not isinstance(first_epoch, int) or first_epoch < 0:
            raise ValueError(f"the first epoch a checkpoint may be selected from must be >= 0, got {first_epoch!r}")
        super().__init__(*args, **kwargs)
        self.first_epoch = first_epoch

    @property
    def state_key(self) -> str:
        """``ModelCheckpoint``'s key for the same settings (a checkpoint's callback state is found by it)."""
        return super().state_key.replace(type(self).__qualname__, ModelCheckpoint.__qualname__, 1)

    def _save_topk_checkpoint(self, trainer: pl.Trainer, monitor_candidates: dict[str, Tensor]) -> None:
        """Select (and save) as ``ModelCheckpoint`` does, from ``first_epoch`` on; earlier epochs are not compared."""
        if trainer.current_epoch < self.first_epoch:
            return
        super()._save_topk_checkpoint(trainer, monitor_candidates)

    def state_dict(self) -> dict[str, Any]:
        """``ModelCheckpoint``'s state and the first epoch it selected from."""
        return {**super().state_dict(), "first_epoch": self.first_epoch}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the state; a best checkpoint chosen under an earlier first epoch is kept only as a file to replace.

        A run checkpointed before its method declared a later first epoch (no ``first_epoch`` in its state: 0) may
        hold a best checkpoint from before it: its score is forgotten, so the first eligible epoch replaces it.
        """
        super().load_state_dict(state_dict)
        selected_from = state_dict.get("first_epoch", 0)
        if self.first_epoch <= selected_from or not self.best_k_models:
            return
        log.warning(
            "%s was selected among the epochs from %d on; the method is itself from epoch %d: the first epoch from "
            "then on replaces it",
            self.best_model_path,
            selected_from,
            self.first_epoch,
        )
        worst = torch.tensor(float("-inf") if self.mode == "max" else float("inf"))
        self.best_k_models = dict.fromkeys(self.best_k_models, worst)
        self.kth_value = self.best_model_score = worst
