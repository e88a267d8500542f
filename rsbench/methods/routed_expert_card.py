"""The card of a routed expert (:class:`rsbench.methods.router.RoutedExpert`, ``method=routed_expert``).

Paper: Sun, Mao and Vechev, "Dual Randomized Smoothing: Beyond Global Noise Variance", ICLR 2026 (arXiv
2512.01782): the iterative training fine-tunes each expert with Gaussian augmentation at its sigma on the training
images the smoothed router sends to it (``python -m rsbench.dual stage=route`` writes the routes). Per epoch it
costs Gaussian training on its share of the images. Certified with the router by ``python -m rsbench.dual
stage=certify``: min(R_sigma, R_c) at failure probability alpha + beta (docs/dual_smoothing.md).
"""

from rsbench.methods.card import MethodCard

CARD = MethodCard(
    name="routed_expert",
    target="rsbench.methods.router.RoutedExpert",
    paper="Sun, Mao and Vechev, ICLR 2026 (dual randomized smoothing)",
    checkpoint_arguments=("init_ckpt",),  # the expert to fine-tune
    path_arguments=("routes_file",),
    prerequisites=(
        "the routes of python -m rsbench.dual stage=route (method.routes_file) and, to fine-tune, the expert's "
        "checkpoint at this sigma (method.init_ckpt)"
    ),
)
