"""Dual randomized smoothing's subject from its config: one construction for every entry point that certifies it.

``python -m rsbench.dual stage=certify`` (``conf/dual.yaml``, the keys at its top level) and
``python -m rsbench.certify model=dual`` (``conf/model/dual.yaml``, the same keys under ``model.``) both call
:func:`dual_subject` on the node that holds the keys:

* ``router``: a ``conf/router/`` node (a trained router, any classifier over the sigmas, a constant one);
* ``router_denoiser``: ``null``, or a ``conf/model/`` ``denoised`` / ``diffusion`` node (its ``classifier`` left
  out: the router is it) that puts a denoiser in front of the router (:func:`rsbench.models.router.denoised`);
* ``experts`` (rsbench checkpoints) and ``expert_models`` (``conf/model/`` nodes), one per sigma, increasing;
* ``beta``, ``router_n0``, ``router_n``: the router's failure probability and samples;
* ``expert_records``: the experts' own certifications of the same images, reused (checked here, every one, before
  the first row is written: :func:`expert_record_reader`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from rsbench.archs.classifier import weights_fingerprint
from rsbench.certify.algorithm.smooth import Certificate
from rsbench.certify.pipeline.certification import Certification, Outcome, Subject
from rsbench.certify.pipeline.dual_checks import (
    check_dual_threat,
    expert_record_problems,
    refuse_expert_record,
    unsound_rows,
)
from rsbench.certify.pipeline.dual_run import DualSubject
from rsbench.certify.pipeline.records import PROTOCOL, read_records
from rsbench.certify.pipeline.settings import CertifySettings
from rsbench.certify.pipeline.subset import require_images
from rsbench.checkpoint import TRAINED_BEHIND
from rsbench.errors import ConfigError
from rsbench.models import router as routers
from rsbench.stop import stop_requested

DUAL_KIND = "dual"
"""``model.kind`` of ``python -m rsbench.certify model=dual`` (``conf/model/dual.yaml``)."""
DENOISER_BUILDERS = ("rsbench.models.builders.denoised", "rsbench.models.builders.diffusion")
"""The ``conf/model/`` builders a ``router_denoiser`` node may name (``model=denoised``, ``model=diffusion``)."""


def device_of(name: str | None) -> torch.device:
    """``name``, or cuda when there is one, else cpu."""
    return torch.device(name or ("cuda" if torch.cuda.is_available() else "cpu"))


def build_experts(node: DictConfig, datamodule: Any) -> list[Subject]:
    """The experts of ``node.experts`` (checkpoint paths) and ``node.expert_models`` (``conf/model/`` nodes)."""
    models = [instantiate(model) for model in node.get("expert_models") or []]
    experts = list(node.get("experts") or [])
    return routers.experts(experts, models, datamodule.num_classes, int(datamodule.image_shape[0]))


def build_router(node: DictConfig, key: str = "") -> routers.Router:
    """The router of ``node.router``, behind ``node.router_denoiser`` when one is given (:func:`behind_denoiser`)."""
    return behind_denoiser(instantiate(node.router), node, key)


def behind_denoiser(router: routers.Router, node: DictConfig, key: str = "") -> routers.Router:
    """``router`` behind ``node.router_denoiser`` when one is given, else ``router`` itself.

    A router trained behind a denoiser (``method=router method.denoiser_ckpt=...``: its signature's
    :data:`~rsbench.checkpoint.TRAINED_BEHIND`) is certified only behind that denoiser (the same SHA-256); a
    router trained on bare inputs may be certified behind one.

    Args:
        router: the router (``node.router`` built, or one ``stage=iterate`` just trained).
        node: the node holding (optionally) ``router_denoiser``.
        key: how the command line reaches ``node`` (``model.`` under ``python -m rsbench.certify``), for messages.

    Raises:
        ConfigError: ``router_denoiser`` names another builder than a denoised or diffusion model, or the router was
            trained behind a denoiser and ``router_denoiser`` is missing or another one.
    """
    denoiser = node.get("router_denoiser")
    trained_behind = dict(router.provenance.get("signature") or {}).get(TRAINED_BEHIND)
    if denoiser is None:
        if trained_behind is not None:
            raise ConfigError(
                f"the router {router.provenance.get('path')} was trained behind the denoiser "
                f"{trained_behind['path']} (sha256 {trained_behind['sha256']}): certify it behind the same one, "
                f"{key and 'model@' + key}router_denoiser=denoised {key}router_denoiser.denoiser_ckpt="
                f"{trained_behind['path']}"
            )
        return router
    target = str(denoiser.get("_target_"))
    if target not in DENOISER_BUILDERS:
        raise ConfigError(
            f"{key}router_denoiser._target_={target!r}: a denoiser in front of the router is a conf/model/ denoised "
            f"or diffusion node ({key and 'model@' + key}router_denoiser=denoised or =diffusion)"
        )
    bound = OmegaConf.to_container(denoiser, resolve=True)
    assert isinstance(bound, dict)
    bound.pop("classifier", None)  # the router is the classifier
    composed = routers.denoised(router, instantiate(bound, _partial_=True))
    given = composed.provenance["denoiser"]
    if trained_behind is not None and given.get("sha256") != trained_behind["sha256"]:
        raise ConfigError(
            f"{key}router_denoiser: the router {router.provenance.get('path')} was trained behind the denoiser "
            f"{trained_behind['path']} (sha256 {trained_behind['sha256']}), not {given.get('path')} (sha256 "
            f"{given.get('sha256')}): give {key}router_denoiser.denoiser_ckpt={trained_behind['path']}"
        )
    return composed


def training_denoiser(node: DictConfig) -> str | None:
    """The ``method=denoiser`` checkpoint of ``node.router_denoiser``, for training the router behind it.

    It is ``model=denoised``'s ``denoiser_ckpt`` (for ``method.denoiser_ckpt``); ``None`` without a denoiser, or
    behind a diffusion model (which ``method=router`` does not train behind).
    """
    denoiser = node.get("router_denoiser")
    if denoiser is None or str(denoiser.get("_target_")) != DENOISER_BUILDERS[0]:
        return None
    return str(denoiser.denoiser_ckpt)


def dual_subject(
    node: DictConfig, datamodule: Any, settings: CertifySettings, device: torch.device, key: str = ""
) -> DualSubject:
    """The router and experts of ``node`` on ``device``, their reused records checked (every one, up front).

    ``datamodule`` is set up for the test split; ``key`` is how the command line reaches ``node`` (``model.``), for
    messages. See the module docstring for the keys of ``node``.

    Raises:
        ConfigError: the router routes to other sigmas than the experts', or a reused record does not fit.
    """
    experts = build_experts(node, datamodule)
    built = build_router(node, key)
    sigmas = [float(e.sigma) for e in experts]
    if len(built.sigmas) != len(sigmas) or any(abs(a - b) > 1e-9 for a, b in zip(built.sigmas, sigmas, strict=False)):
        raise ConfigError(f"the router routes to sigmas {list(built.sigmas)}, the experts are at {sigmas}")
    router = Subject(built.classifier.to(device), built.num_choices, built.sigma, built.description, built.provenance)
    experts = [replace(e, classifier=e.classifier.to(device)) for e in experts]
    subset, test = settings.subset, datamodule.test_dataset
    indices = require_images(len(test), subset.start, subset.skip, subset.max_images, "the test split")
    reuse = [str(folder) for folder in node.get("expert_records") or []]
    if reuse and len(reuse) != len(experts):
        raise ConfigError(f"expert_records: give one folder per expert ({len(experts)}), got {len(reuse)}")
    read_expert = expert_record_reader(reuse, experts, settings, indices, datamodule.name) if reuse else None
    if read_expert is not None:
        for k in range(len(experts)):
            read_expert(k)  # checks every record before the first row is written
    return DualSubject(
        router,
        experts,
        beta=float(node.beta),
        router_n0=int(node.router_n0),
        router_n=int(node.router_n),
        description={"dataset": datamodule.name},
        expert_records=reuse,
        reused=read_expert,
    )


def certify_dual(
    cfg: DictConfig, node: DictConfig, folder: Path, on_ready: Callable[[], None] | None = None, key: str = ""
) -> Outcome:
    """Dual CERTIFY of ``cfg.dataset``'s test subset with ``cfg.certify``, the subject of ``node``, into ``folder``.

    The subject is :func:`dual_subject`'s, certified by the one pipeline
    (:class:`~rsbench.certify.pipeline.Certification`: resume, shards, progress, cost, summary, plot). ``on_ready``
    is called once the models are built and the expert records checked, before the first file is written; a stop
    signal ends it after the image in flight.

    Raises:
        ConfigError: another threat model than Gaussian l2
            (:func:`~rsbench.certify.pipeline.dual_checks.check_dual_threat`), or what :func:`dual_subject` refuses.
    """
    check_dual_threat(cfg.certify)
    settings = CertifySettings.from_config(cfg.certify)
    datamodule = instantiate(cfg.dataset)
    datamodule.prepare_data()
    datamodule.setup("test")
    subject = dual_subject(node, datamodule, settings, device_of(cfg.get("device")), key)
    if on_ready is not None:
        on_ready()
    certification = Certification(settings, folder)
    return certification.run(subject, datamodule.test_dataset, should_stop=lambda: stop_requested() is not None)


def expert_record_reader(
    folders: Sequence[str], experts: Sequence[Any], settings: CertifySettings, indices: Sequence[int], dataset: str
) -> Callable[[int], dict[int, Certificate]]:
    """Each expert's certificates from its own certification (checked: same protocol, seed, model and images).

    A record is refused, naming what differs and what is allowed, unless it is a sound Gaussian l2 certificate of
    ``dataset`` at this run's precision and grid noise, every reused row marked sound
    (:func:`rsbench.certify.pipeline.dual_checks.expert_record_problems`), and certified with this run's n0, n,
    alpha, seed, mode (and sequential design) of the same expert's weights at its sigma.
    """
    cache: dict[int, dict[int, Certificate]] = {}

    def read(k: int) -> dict[int, Certificate]:
        if k not in cache:
            folder = Path(folders[k])
            _check_expert_record(k, folder, experts[k], settings, dataset)
            rows = read_records(folder)
            missing = [i for i in indices if i not in rows]
            if missing:
                raise ConfigError(
                    f"expert_records[{k}]={folder} lacks {len(missing)} of the images (first: {missing[0]})"
                )
            refuse_expert_record(k, folder, unsound_rows(rows[i] for i in indices))
            cache[k] = {i: _certificate(rows[i], settings) for i in indices}
        return cache[k]

    return read


def _check_expert_record(k: int, folder: Path, expert: Any, settings: CertifySettings, dataset: str) -> None:
    """Refuse expert k's record unless it is a sound certificate of this protocol and of this expert's weights."""
    protocol = settings.protocol
    stored = json.loads((folder / PROTOCOL).read_text()) if (folder / PROTOCOL).is_file() else None
    if stored is None:
        raise ConfigError(f"expert_records[{k}]={folder}: no {PROTOCOL} (not an rsbench certification)")
    metrics_path = folder / "metrics.json"
    metrics = json.loads(metrics_path.read_text()) if metrics_path.is_file() else None
    precision, grid = settings.speed.precision, protocol.noise_grid
    refuse_expert_record(
        k, folder, expert_record_problems(stored, metrics, dataset=dataset, precision=precision, noise_grid=grid)
    )
    wanted: dict[str, Any] = {
        "n0": protocol.n0,
        "n": protocol.n,
        "alpha": protocol.alpha,
        "seed": protocol.seed,
        "mode": settings.mode,
        "sigma": float(expert.sigma),
        "model_fingerprint": weights_fingerprint(expert.classifier),
    }
    if settings.sequential is not None:
        wanted["design"] = settings.sequential.design
    different = {key: (stored.get(key), value) for key, value in wanted.items() if stored.get(key) != value}
    if different:
        raise ConfigError(
            f"expert_records[{k}]={folder} was certified otherwise than this run asks (stored, asked): {different}"
        )


def _certificate(row: Any, settings: CertifySettings) -> Certificate:
    """An expert's certificate as its own record's row holds it."""
    protocol = settings.protocol
    return Certificate(
        prediction=row.predict,
        radius=row.radius,
        p_a_lower=row.pA_lower,
        count=row.count or 0,  # (an expert's own record always has it)
        selected=row.predict,
        n0=protocol.n0,
        n=row.n,
        alpha=protocol.alpha,
        sigma=row.sigma,
        seconds=row.time,
    )
