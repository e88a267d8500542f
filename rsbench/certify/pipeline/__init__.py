"""The certification run: settings, records, resume, shards and their merge, summary, plot, progress, cost.

:class:`rsbench.certify.pipeline.certification.Certification` certifies a test set with the algorithm
(:mod:`rsbench.certify.algorithm`) and writes the output contract (``certify.tsv``, ``certify_protocol.json``,
``metrics.json``, the plot); the other modules are its parts.
"""
