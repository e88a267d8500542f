"""``python -m rsbench.dual``: dual randomized smoothing (Sun, Mao and Vechev, ICLR 2026) from experts to certificates.

Tools layer: it composes the dataset, the experts (``rsbench.models.builders``), the router (``conf/router/``) and
the certification settings, and runs one stage (:mod:`rsbench.dual.stages`): ``labels``, ``route``, ``iterate`` or
``certify``. The algorithm itself is :mod:`rsbench.certify.algorithm.dual`; the router's training is ``python -m rsbench
method=router`` (:mod:`rsbench.methods.router`). See docs/dual_smoothing.md.
"""
