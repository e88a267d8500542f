"""Import the checkpoints the field released (Cohen, SmoothAdv, MACER, Consistency, SmoothMix, CAT-RS, DDRS).

``python -m rsbench.importer origin=cohen path=checkpoint.pth.tar dataset=cifar10 sigma=0.25`` writes an rsbench
checkpoint (see :mod:`rsbench.importer.convert`; each codebase's layout is in :mod:`rsbench.importer.layouts`).
The package is not named ``import`` because that is a Python keyword.
"""

from rsbench.importer.convert import DatasetFacts, import_checkpoint, save_imported

__all__ = ["DatasetFacts", "import_checkpoint", "save_imported"]
