"""An attack beside every certificate: SmoothAdv (Salman et al., NeurIPS 2019) on the smoothed classifier.

A certificate is a lower bound on robustness; an attack gives an upper bound, and on the same images the two bracket
the truth. This package attacks each certified image at the radii of the certified-accuracy table, reports the
empirical robust accuracy beside the certified accuracy, and counts the images where the attack changed the
prediction within the certified radius, which a sound certifier allows only with probability about alpha
(:mod:`rsbench.attack.evaluate`). It sits above ``rsbench.certify`` (it reads its records and uses ``Smooth``) and
reuses the training methods' SmoothAdv search (:func:`rsbench.methods.attacks.pgd_l2_smoothed`), a lower layer;
``python -m rsbench.certify attack=smoothadv`` and the certification callback of ``python -m rsbench`` call it.
"""

from rsbench.attack.evaluate import CertificateContradictionError, attack_certified
from rsbench.attack.settings import AttackSettings

__all__ = ["AttackSettings", "CertificateContradictionError", "attack_certified"]
