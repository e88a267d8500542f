"""The certification algorithm: a smoothed classifier, images and seeds in; certificates out, no file touched.

Cohen et al.'s PREDICT and CERTIFY (:mod:`~rsbench.certify.algorithm.smooth`), their bounds and seeding, the threat
models and radius caps, sequential CERTIFY and its designs, per-input sigma search, dual randomized smoothing's
router and experts, and :func:`rsbench.certify.algorithm.groups.certify_images`, the one composition of "certify a
group of images" that the pipeline runs and ``make bench`` times. It imports nothing of
:mod:`rsbench.certify.pipeline` (``tests/test_certify_split.py``).
"""
