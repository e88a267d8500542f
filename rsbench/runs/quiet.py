"""One clean display per stage: what Lightning prints that says nothing about the run is kept off the terminal.

A run prints its own lines (the method, the stage, the results) and one progress display per stage: Lightning's bar
while training, the certification bar (:func:`rsbench.certify.pipeline.progress.progress`) while certifying. Lightning
adds an advertisement for its cloud logger at every Trainer (``💡 Tip: ... litlogger``), a ``FutureWarning`` from its
own use of a deprecated torch class (``LeafSpec``) at the first batch, and, during ``trainer.test``, a second bar that
never moves (certification runs inside one test step), under which the certification bar, redirected by Lightning's
live display, printed one line per image and the result line was glued onto it. :func:`quiet_lightning` drops the
first two; :func:`certification_owns_the_display` turns the test bar off. Lightning's model summary is off by
default in ``conf/trainer/default.yaml`` (``trainer.enable_model_summary=true`` shows it).
"""

from __future__ import annotations

import logging
import warnings

import pytorch_lightning as pl

ADVERT = "💡 Tip:"  # Lightning's logger connector, at every Trainer without LitLogger
LEAFSPEC = r"`isinstance\(treespec, LeafSpec\)` is deprecated"  # torch's FutureWarning at Lightning's _pytree
RANK_ZERO_LOGGERS = ("pytorch_lightning.utilities.rank_zero", "lightning.pytorch.utilities.rank_zero")


class _DropAdvert(logging.Filter):
    """Drop Lightning's advertisement; pass every other record."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.getMessage()).startswith(ADVERT)


_FILTER = _DropAdvert()


def quiet_lightning() -> None:
    """Keep Lightning's advertisement and its torch deprecation warning off the run's output (idempotent)."""
    for name in RANK_ZERO_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    warnings.filterwarnings("ignore", message=LEAFSPEC, category=FutureWarning)


def certification_owns_the_display(trainer: pl.Trainer) -> None:
    """Turn Lightning's progress bar off for ``trainer.test``: the certification bar is that stage's display."""
    bar = trainer.progress_bar_callback
    if bar is not None:
        bar.disable()
