"""rsbench: train and certify randomized-smoothing classifiers with every well-known l2 method.

``from rsbench import Smooth`` gives Cohen et al.'s PREDICT and CERTIFY; ``python -m rsbench`` trains and certifies.
"""

from rsbench.certify import Certificate, Smooth
from rsbench.resolvers import register_resolvers

register_resolvers()

__version__ = "0.1.0"
__all__ = ["Certificate", "Smooth", "__version__"]
