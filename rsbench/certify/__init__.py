"""Certification: Cohen et al.'s PREDICT/CERTIFY, their bounds, per-image records and summaries."""

from rsbench.certify.smooth import Certificate, Smooth

__all__ = ["Certificate", "Smooth"]
