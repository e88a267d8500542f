"""Lightning callbacks."""

from rsbench.callbacks.certify import CertifyCallback

__all__ = ["CertifyCallback"]
