"""What can be certified and how it is read: rsbench checkpoints, your own modules, archives, ensembles, denoisers.

Layer 5 of rsbench: each builder in :mod:`rsbench.models.builders` (chosen with ``model=<kind>`` in
``python -m rsbench.certify``) returns a :class:`~rsbench.certify.pipeline.certification.Subject` for the certification
pipeline.
"""
