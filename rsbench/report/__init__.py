"""Tables you can publish: ``python -m rsbench.report <run or sweep folders, certify TSVs...>``.

One row per method / sigma / setting with ACR and certified accuracy at chosen radii, each with its uncertainty
over the certified images and over seeds; rows paired against a baseline on the same images; the papers' published
numbers beside rsbench's; the envelope over sigma; curves with interval bands and the distribution of pA lower
bounds. Written as Markdown, LaTeX (booktabs), CSV and PNG, and as a W&B table with ``--wandb``.

Modules: ``load`` (read runs and Cohen-format TSVs), ``rows`` (group runs into settings over seeds), ``stats``
(intervals and tests, scipy/statsmodels), ``tables`` (the results table), ``paired`` (against a baseline),
``published`` (the papers' numbers, ``published.csv``), ``plots``, ``render`` (Markdown/LaTeX/CSV), ``build``.
"""
