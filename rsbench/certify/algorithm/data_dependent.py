"""Data-dependent certification (DDRS), reported as what it is.

``certify_data_dependent`` optimises sigma per input (:mod:`rsbench.certify.algorithm.sigma_search`, the paper's
Algorithm 1) and runs Cohen et al.'s CERTIFY at that sigma, as the DDRS paper did. Such a radius is *not* a certificate
for the classifier that is actually deployed, G(x) = g_{sigma(x)}(x): at x + delta the classifier smooths with sigma(x +
delta), which neither the radius nor the search controls (certify_theory.md section 2; Súkeník et al. 2022). rsbench
therefore writes these rows with ``sound = false`` and always reports the fixed-sigma certificate beside them.

The memory-based repair of these certificates, replayed over a run's rows, is the pipeline's
(:mod:`rsbench.certify.pipeline.memory_replay`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from torch import Tensor

from rsbench.certify.algorithm.seeding import make_generator
from rsbench.certify.algorithm.sigma_search import OBJECTIVES, optimize_sigma
from rsbench.certify.algorithm.smooth import Certificate, Smooth, eval_mode

SIGMA_SEARCH = 3  # the seeding phase of the sigma-search noise (selection 0, estimation 1, prediction 2)
DEFAULT_SAMPLES = 1  # the DDRS paper's n "unless stated otherwise" (Sec. 4)
DEFAULT_OBJECTIVE = "radius"  # the proxy itself, as OptimzeSigma and most of the authors' scripts

UNSOUND_NOTE = (
    "data-dependent sigma: Cohen radius at each input's own sigma, NOT a sound certificate for the input-dependent "
    "classifier (nearby inputs get other sigmas); the fixed-sigma certificate is the sound one"
)


@dataclass(frozen=True)
class SigmaSearch:
    """Settings of the per-input sigma search (Algorithm 1).

    Attributes:
        iterations: K, gradient-ascent steps.
        lr: alpha, the ascent step size.
        samples: n, noise draws per input and step; ``None``: the model's method's (:meth:`with_defaults`).
        init: sigma_0; ``None`` starts from the certification sigma.
        min_sigma: sigma never goes below this.
        objective: ``radius`` or ``relu_radius``; ``None``: the model's method's.
    """

    iterations: int = 100
    lr: float = 1e-4
    samples: int | None = None
    init: float | None = None
    min_sigma: float = 1e-3
    objective: str | None = None

    def __post_init__(self) -> None:
        if self.iterations < 0:
            raise ValueError(f"sigma_iters must be >= 0, got {self.iterations}")
        if self.samples is not None and self.samples < 1:
            raise ValueError(f"sigma_samples must be >= 1 (or null: the paper's), got {self.samples}")
        if self.lr < 0:
            raise ValueError(f"sigma_lr must be >= 0, got {self.lr}")
        if self.init is not None and self.init <= 0:
            raise ValueError(f"sigma_init must be > 0 (or null: the certification sigma), got {self.init}")
        if self.objective is not None and self.objective not in OBJECTIVES:
            raise ValueError(f"sigma_objective must be one of {list(OBJECTIVES)} (or null), got {self.objective!r}")

    def with_defaults(self, samples: int | None = None, objective: str | None = None) -> SigmaSearch:
        """These settings with an unset n and objective taken from ``samples`` and ``objective``, else the paper's.

        The caller passes the certified model's method's values (its config's ``certify_defaults``: the DDRS paper
        certifies MACER models with n = 8 and the authors' DS-SmoothAdv script ascends ``relu_radius``); what neither
        sets is the paper's "unless stated otherwise" (Sec. 4): n = :data:`DEFAULT_SAMPLES`, the ``radius`` objective.
        """
        return replace(
            self,
            samples=self.samples if self.samples is not None else (samples or DEFAULT_SAMPLES),
            objective=self.objective if self.objective is not None else (objective or DEFAULT_OBJECTIVE),
        )


def certify_data_dependent(
    smooth: Smooth,
    xs: Tensor,
    n0: int,
    n: int,
    alpha: float,
    batch_size: int,
    search: SigmaSearch,
    *,
    seeds: Sequence[int],
) -> list[Certificate]:
    """Optimise each image's sigma (in eval mode), then CERTIFY each image at its own sigma.

    The certificates carry the per-image sigma in ``sigma``; they are not sound (see the module docstring).

    Args:
        smooth: the fixed-sigma smoothed classifier (its base classifier, precision and sigma, the search start).
        xs: images ``[K, C, H, W]``.
        n0: selection samples.
        n: estimation samples.
        alpha: the failure probability of each (per-sigma) certificate.
        batch_size: noisy samples per forward pass.
        search: the sigma-search settings, n and objective set (:meth:`SigmaSearch.with_defaults`).
        seeds: one seed per image; the search and both CERTIFY streams derive from it.
    """
    if search.samples is None or search.objective is None:
        raise ValueError("the sigma search needs n and its objective: resolve them with SigmaSearch.with_defaults")
    device = smooth.device_for(xs)
    start = search.init if search.init is not None else smooth.sigma
    sigmas: list[float] = []
    with eval_mode(smooth.base_classifier):
        for x, seed in zip(xs, seeds, strict=True):
            optimized = optimize_sigma(
                smooth.base_classifier,
                x.unsqueeze(0).to(device),
                start,
                iterations=search.iterations,
                lr=search.lr,
                samples=search.samples,
                min_sigma=search.min_sigma,
                generator=make_generator(device, seed, SIGMA_SEARCH),
                objective=search.objective,
            )
            sigmas.append(float(optimized[0]))
    certificates = []
    for x, sigma, seed in zip(xs, sigmas, seeds, strict=True):
        at_sigma = Smooth(
            smooth.base_classifier,
            smooth.num_classes,
            sigma,
            precision=smooth.precision,
            channels_last=smooth.channels_last,
        )
        certificates.append(at_sigma.certify_with_details(x, n0, n, alpha, batch_size, seed=seed))
    return certificates
