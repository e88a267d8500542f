"""What a method needs before it can train: runs whose checkpoints fill some of its arguments.

A method declares them with :meth:`rsbench.methods.base.SmoothingModule.prerequisites`, a class method that reads the
method's config (before anything is built) and returns :class:`Prerequisite` s. CAT-RS, for example, needs the
authors' teacher, a Gaussian model at sigma 0.25 trained with the student's recipe and schedule, whenever it labels
with a teacher and none is given. The run layer (:mod:`rsbench.runs.prerequisites`) resolves them for any method: it
composes each prerequisite's config from the run's own command line, names its folder after what it trains, trains
it first (or reuses it, or waits for another run training it), and passes its checkpoint to the method.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Prerequisite:
    """A run that must have trained before this method can, and the method argument its checkpoint fills.

    Attributes:
        argument: the method argument (``method.<argument>``) that receives the checkpoint's path; when the config
            sets it, the prerequisite is the user's file and nothing is trained.
        overrides: what the prerequisite changes in this run's recipe, as Hydra overrides (``method=gaussian``,
            ``sigma=0.25``); everything else of the command line (dataset, arch, optimizer, trainer, seed,
            experiment, ...) is kept.
        keep: keys of this run's composed config the prerequisite takes as they are, e.g. its schedule
            (``trainer.max_epochs``, ``scheduler.milestones``) where a method's own recipe set one.
        checkpoint: which checkpoint of the prerequisite fills the argument: ``best`` or ``last``.
        folder: the folder its runs are kept in under the run's ``prerequisite_dir`` (``outputs/``, a sweep's own
            folder, or ``$RSBENCH_PREREQUISITE_DIR``), each in ``<dataset>/<arch>_sigma<sigma>_seed<seed>_<digest of
            its training settings>``, so that later runs reuse them; the method's card names it
            (:attr:`rsbench.methods.card.MethodCard.prerequisite_folder`, CAT-RS: ``teachers``).
        name: how the log names it (``CAT-RS teacher``).
        description: what is trained, for the log (``the sigma=0.25 Gaussian model``).
    """

    argument: str
    overrides: tuple[str, ...]
    name: str
    description: str
    keep: tuple[str, ...] = ()
    checkpoint: Literal["best", "last"] = "best"
    folder: str = "prerequisites"
