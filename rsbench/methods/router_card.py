"""The card of dual randomized smoothing's router (:class:`rsbench.methods.router.RouterTraining`, ``method=router``).

Paper: Sun, Mao and Vechev, "Dual Randomized Smoothing: Beyond Global Noise Variance", ICLR 2026 (arXiv
2512.01782). The router is a classifier over the experts' sigmas, trained with Gaussian noise at its own sigma on
the table ``python -m rsbench.dual stage=labels`` writes (per training image, every expert's small-n CERTIFY radius),
by default with the paper's recipe as reported (soft labels softmax(radii), uncertified images dropped, 1/q
rebalancing, a consistency term on m = 2 noisy copies, AdamW: :mod:`rsbench.methods.router_loss`); its training
costs about m Gaussian runs with K outputs. It reproduces no published row by itself:
``python -m rsbench.dual stage=certify`` certifies it with the experts, and that certificate, min(R_sigma, R_c),
holds at failure probability alpha + beta (docs/dual_smoothing.md).
"""

from rsbench.methods.card import MethodCard

CARD = MethodCard(
    name="router",
    target="rsbench.methods.router.RouterTraining",
    paper="Sun, Mao and Vechev, ICLR 2026 (dual randomized smoothing)",
    checkpoint_arguments=("denoiser_ckpt",),  # a method=denoiser checkpoint the router trains behind (optional)
    path_arguments=("labels_file",),
    prerequisites=(
        "the router labels table (each expert's radius per training image) of python -m rsbench.dual stage=labels over "
        "one trained expert per sigma (method.labels_file)"
    ),
)
