"""The field's leaderboard: every published randomized-smoothing result and your runs, paired on the same images.

``python -m rsbench.leaderboard dataset=cifar10 runs=[path]`` (see ``__main__``) shows, per dataset and threat model,
every released per-image certification result (``rsbench/report/released/``: the logs with their cards) and the
runs you name, with certified accuracy at the standard radii and ACR with their intervals, the images, n and cost;
entries that share images paired; the best entry per radius and the Pareto front over radii; as Markdown, CSV, LaTeX
and a plot. ``python -m rsbench.published.importer <clones>`` rebuilds the data from the authors' repositories.

Modules: ``sources`` (what a released log's path says, per repository), ``importer`` (rebuild the data),
``entries`` (published settings and runs as entries), ``board`` (numbers, pairs, envelope, Pareto front), ``render``
and ``plot`` (outputs), ``make`` (boards and the docs pages). Importing this package imports nothing heavy.
"""
