"""Published results, one room: the field's released per-image certification logs and everything that knows them.

- :mod:`~rsbench.published.catalogue`: the logs as data (the cards of ``sources.yaml``, ``index.csv``,
  ``summary.csv``, the training logs) and the one record of a released log, :class:`~.catalogue.ReleasedLog`, with its
  reader.
- :mod:`~rsbench.published.paths`: what a log's path says, per repository (Cohen et al.'s layout included: the one
  parser of ``<arch>/noise_<trained>/<split>/sigma_<certified>``).
- :mod:`~rsbench.published.logs`: what a log's rows say (its numbers, its subset as a rule, the alpha it is consistent
  with, its wall clock).
- :mod:`~rsbench.published.pairing`: a run against a published run on the images both certified, for the report's
  ``--against-released`` and the leaderboard alike.
- :mod:`~rsbench.published.importer`: ``python -m rsbench.published.importer <clones...>`` rebuilds the data.

The data lives in ``rsbench/report/released/`` (package data; the generated pages and the cards name that folder).
Adding a source is its card in ``sources.yaml`` and its parser in :mod:`~rsbench.published.paths`.

This package's ``__init__`` imports nothing, so :mod:`rsbench.report.load` can read the Cohen parser of
:mod:`~rsbench.published.paths` while :mod:`~rsbench.published.catalogue` reads results with :mod:`rsbench.report.load`.
"""
