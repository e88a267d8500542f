"""The run lifecycle: the command line, one job per run directory, the run itself, its prerequisites and sweeps.

Layer 6 of rsbench (see the README's architecture section). Importing this package is cheap (no torch): the command
line (:mod:`rsbench.runs.cli`) answers ``--help`` and ``--cfg job`` before anything heavy is loaded.
"""
