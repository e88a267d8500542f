"""The stages of ``python -m rsbench.dual``: router labels, routing, the iterative training, dual certification.

* ``labels``: CERTIFY every expert at a small n on the training images (the subset ``labels.start/skip/max_images``)
  and keep every expert's radius per image (0 where it abstains or is wrong), from which ``method=router`` makes
  the paper's soft labels; the argmax label is kept too (:func:`rsbench.certify.algorithm.dual.router_labels`). Writes
  ``router_labels.pt`` (:data:`~rsbench.methods.router_loss.LABELS_VERSION`: ``version``, ``labels`` [N_train], -1
  where not labelled, ``radii`` [N_train, K], NaN where not labelled, ``sigmas``, ``protocol``); resumable
  (``router_labels.pt.partial``, saved every minute: :class:`rsbench.files.ImageTable`; labels of another
  protocol are refused, naming each setting that differs).
* ``route``: the smoothed router's choice (majority of ``route.n`` noisy votes) on the training images:
  ``router_routes.pt`` for ``method=routed_expert``.
* ``iterate``: ``iterate.rounds`` rounds of labels -> ``python -m rsbench method=router`` -> route ->
  ``python -m rsbench method=routed_expert`` for every expert, each round from the previous round's experts; every
  step is skipped when its output exists, so rerunning continues.
* ``certify``: dual CERTIFY of the test subset (``certify.*``, fixed n or sequential; by default alpha = beta =
  0.0005, the paper's total 0.001): the router at ``beta`` with
  ``router_n0`` / ``router_n`` samples, the routed expert at ``certify.alpha``; ``certify.tsv`` (rsbench's columns,
  the routed expert's, then the router's and the expert's certificates: one row type, ``read_rows``),
  ``certify_protocol.json``, ``metrics.json`` (with alpha, beta and their sum) and the plot. ``expert_records``
  reuses each expert's own certification of the same images (same seed and protocol, checked against its
  ``certify_protocol.json`` and the expert's weights; a sound Gaussian l2 certificate,
  :mod:`rsbench.certify.pipeline.dual_checks`): then only the router runs. The stage builds the
  :class:`~rsbench.certify.pipeline.dual_run.DualSubject` and certifies it with the one pipeline
  (:class:`rsbench.certify.pipeline.certification.Certification`): resume, shards (``certify.shard`` / ``num_shards``,
  merged by the last), progress, cost, summary and plot are the pipeline's.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

from rsbench.archs.classifier import weights_fingerprint
from rsbench.certify.algorithm.dual import router_labels
from rsbench.certify.algorithm.seeding import derive_seed
from rsbench.certify.algorithm.smooth import Smooth
from rsbench.certify.pipeline.dual_checks import check_dual_threat
from rsbench.certify.pipeline.dual_run import smoothed
from rsbench.certify.pipeline.progress import progress
from rsbench.certify.pipeline.settings import CertifySettings
from rsbench.certify.pipeline.subset import indices_digest, require_images
from rsbench.errors import ConfigError
from rsbench.files import ImageTable, save_atomically
from rsbench.methods.router_loss import LABELS_VERSION
from rsbench.models import dual as dual_models
from rsbench.models import router as routers
from rsbench.runs.run import certification_dir
from rsbench.stop import raise_if_stop_requested

log = logging.getLogger(__name__)

LABELS = "router_labels.pt"
ROUTES = "router_routes.pt"


# ------------------------------------------------------------------------------------------- shared pieces


def device_of(cfg: DictConfig) -> torch.device:
    """``cfg.device``, or cuda when there is one, else cpu."""
    return dual_models.device_of(cfg.device)


def smooth_of(
    classifier: torch.nn.Module, classes: int, sigma: float, settings: CertifySettings, device: torch.device
) -> Smooth:
    """The smoothed ``classifier`` on ``device`` at ``sigma`` (:func:`rsbench.certify.pipeline.dual_run.smoothed`)."""
    return smoothed(classifier.to(device), classes, sigma, settings)


def training_images(datamodule: Any) -> Any:
    """The full training set in training-set order, with the evaluation transform (indices = ``Batch.indices``)."""
    datamodule.prepare_data()
    return datamodule.source(datamodule.data_dir, True, datamodule.eval_transform, False)


# ------------------------------------------------------------------------------------------- labels


def labels_stage(cfg: DictConfig, output_dir: Path, experts: list[Any] | None = None) -> Path:
    """Label training images with the expert of the largest certified radius at a small n (see the module doc)."""
    check_dual_threat(cfg.certify)
    settings = CertifySettings.from_config(cfg.certify)
    datamodule = instantiate(cfg.dataset)
    experts = experts if experts is not None else dual_models.build_experts(cfg, datamodule)
    device = device_of(cfg)
    spec = cfg.labels
    images = training_images(datamodule)
    total = len(images)
    indices = require_images(total, spec.start, spec.skip, spec.max_images, "the training split")
    sigmas = [float(e.sigma) for e in experts]
    protocol = {
        "n0": int(spec.n0),
        "n": int(spec.n),
        "alpha": float(spec.alpha),
        "seed": int(spec.seed),
        "sigmas": sigmas,
        "experts": [weights_fingerprint(e.classifier) for e in experts],
        "indices": indices_digest(indices),
        "train_size": total,
        **({"noise_grid": settings.protocol.noise_grid} if settings.protocol.noise_grid is not None else {}),
    }
    path = output_dir / LABELS
    table = ImageTable(
        path,
        protocol,
        (total, len(experts)),
        torch.float64,
        "router labels",
        values_name="radii",
        key_name="protocol",
        partial=output_dir / (LABELS + ".partial"),
    )
    if table.finished:
        log.info("router labels already written: %s", path)
        return path
    if table.resumed:
        log.info("resuming the router labels from %s", table.partial)
    smooths = [smooth_of(e.classifier, e.num_classes, e.sigma, settings, device) for e in experts]
    todo = table.missing(indices)
    together = max(1, settings.speed.batch_size // (int(spec.n0) + int(spec.n))) * 4
    counter = progress(len(indices), "router labels", "images", len(indices) - len(todo))
    for first in range(0, len(todo), together):
        group = todo[first : first + together]
        items = [images[i] for i in group]
        xs = torch.stack([item[0] for item in items])
        labels = [int(item[1]) for item in items]
        seeds = [derive_seed(int(spec.seed), i) for i in group]
        radii = torch.zeros((len(group), len(experts)), dtype=torch.float64)
        for k, smooth in enumerate(smooths):
            certs = smooth.certify_batch(
                xs, int(spec.n0), int(spec.n), float(spec.alpha), settings.speed.batch_size, seeds=seeds
            )
            for row, (cert, label) in enumerate(zip(certs, labels, strict=True)):
                radii[row, k] = cert.radius if cert.prediction == label else 0.0
        table.put(group, radii)
        counter.update(len(group))
        table.checkpoint()  # saved every minute and on a stop request, which stops here (rsbench.stop)
    counter.close()
    labelled = torch.full((total,), -1, dtype=torch.int64)
    chosen = torch.as_tensor(router_labels(table.values[indices].numpy()))
    labelled[torch.as_tensor(indices)] = chosen
    radii = table.finish({"version": LABELS_VERSION, "labels": labelled, "sigmas": sigmas})
    counts = {repr(s): int((chosen == k).sum()) for k, s in enumerate(sigmas)}
    none = int((radii[indices] == 0).all(dim=1).sum())
    summary = {"version": LABELS_VERSION, "images": len(indices), "labels": counts, "no_expert_certifies": none}
    (output_dir / "router_labels.json").write_text(json.dumps({**summary, **protocol}, indent=2) + "\n")
    log.info(
        "router labels of %d training images: argmax %s; %d that no expert certifies (method=router drops them "
        "by default; their argmax label is the smallest sigma)",
        len(indices),
        counts,
        none,
    )
    return path


# ------------------------------------------------------------------------------------------- route


def route_stage(cfg: DictConfig, output_dir: Path, router: routers.Router | None = None) -> Path:
    """The smoothed router's choice (majority of ``route.n`` noisy votes) for the training images."""
    check_dual_threat(cfg.certify)
    settings = CertifySettings.from_config(cfg.certify)
    datamodule = instantiate(cfg.dataset)
    router = router if router is not None else dual_models.build_router(cfg)
    spec = cfg.route
    images = training_images(datamodule)
    total = len(images)
    indices = require_images(total, spec.start, spec.skip, spec.max_images, "the training split")
    path = output_dir / ROUTES
    if path.is_file():
        log.info("routes already written: %s", path)
        return path
    smooth = smooth_of(router.classifier, router.num_choices, router.sigma, settings, device_of(cfg))
    routes = torch.full((total,), -1, dtype=torch.int64)
    together = max(1, settings.speed.batch_size // int(spec.n)) * 4
    counter = progress(len(indices), "routing the training images", "images")
    for first in range(0, len(indices), together):
        group = indices[first : first + together]
        xs = torch.stack([images[i][0] for i in group])
        chosen = smooth.select(
            xs, int(spec.n), settings.speed.batch_size, seeds=[derive_seed(int(spec.seed), i) for i in group]
        )
        routes[torch.as_tensor(group)] = torch.as_tensor(chosen)
        counter.update(len(group))
        raise_if_stop_requested()
    counter.close()
    save_atomically({"routes": routes, "sigmas": list(router.sigmas), "n": int(spec.n)}, path)
    counts = {repr(s): int((routes == k).sum()) for k, s in enumerate(router.sigmas)}
    log.info("routes of %d training images: %s", len(indices), counts)
    return path


# ------------------------------------------------------------------------------------------- iterate


def iterate_stage(cfg: DictConfig, output_dir: Path) -> dict[str, Any]:
    """``iterate.rounds`` rounds of: labels, router training, routing, each expert fine-tuned on its images."""
    datamodule = instantiate(cfg.dataset)
    experts = [str(p) for p in cfg.experts or []]
    if not experts or cfg.get("expert_models"):
        raise ConfigError("stage=iterate fine-tunes rsbench checkpoints: give them as experts=[a.ckpt,b.ckpt,...]")
    spec = cfg.iterate
    common = [f"dataset={spec.dataset}", f"data_dir={cfg.data_dir}", "protocol=authors", "test=false", "certify=off"]
    router_ckpt = ""
    denoiser = dual_models.training_denoiser(cfg)  # a router certified behind a DnCNN trains behind it too
    behind = [f"method.denoiser_ckpt={denoiser}"] if denoiser is not None else []
    for round_number in range(1, int(spec.rounds) + 1):
        folder = output_dir / f"round{round_number}"
        current = routers.experts(experts, [], datamodule.num_classes, int(datamodule.image_shape[0]))
        labels = labels_stage(cfg, folder / "labels", current)
        sigmas = [float(e.sigma) for e in current]
        router_dir = folder / "router"
        _train(
            router_dir,
            [
                "method=router",
                f"method.labels_file={labels}",
                f"arch.num_classes={len(sigmas)}",
                f"sigma={spec.router_sigma}",
                *common,
                *behind,
                *spec.router_overrides,
            ],
        )
        router_ckpt = str(router_dir / "checkpoints" / "last.ckpt")
        router = dual_models.behind_denoiser(routers.checkpoint(router_ckpt, int(datamodule.image_shape[0])), cfg)
        routes = route_stage(cfg, folder / "route", router)
        routed = torch.load(routes, map_location="cpu", weights_only=True)["routes"]
        tuned = []
        for k, (path, sigma) in enumerate(zip(experts, sigmas, strict=True)):
            if not bool((routed == k).any()):
                log.warning(
                    "round %d: the router sends no training image to expert %d; it keeps its weights", round_number, k
                )
                tuned.append(path)
                continue
            expert_dir = folder / f"expert{k}"
            _train(
                expert_dir,
                [
                    "method=routed_expert",
                    f"method.routes_file={routes}",
                    f"method.expert={k}",
                    f"method.init_ckpt={path}",
                    f"sigma={sigma}",
                    *common,
                    *spec.expert_overrides,
                ],
            )
            tuned.append(str(expert_dir / "checkpoints" / "last.ckpt"))
        experts = tuned
    result = {"router": router_ckpt, "experts": experts}
    (output_dir / "iterate.json").write_text(json.dumps(result, indent=2) + "\n")
    log.info(
        "iterative training done; certify with:\n  python -m rsbench.dual stage=certify router=checkpoint "
        "router.path=%s 'experts=[%s]' dataset=%s",
        router_ckpt,
        ",".join(experts),
        spec.dataset,
    )
    return result


def _train(run_dir: Path, overrides: Sequence[str]) -> None:
    """``python -m rsbench <overrides>`` into ``run_dir``, unless it completed there; resumed when it stopped."""
    status_path = run_dir / "status.json"
    if status_path.is_file():
        status = json.loads(status_path.read_text())
        if status.get("status") == "completed":
            return
        command = [sys.executable, "-m", "rsbench", f"resume={run_dir}"]
    else:
        command = [
            sys.executable,
            "-m",
            "rsbench",
            *overrides,
            "trainer.enable_progress_bar=false",
            f"hydra.run.dir={run_dir}",
        ]
    log.info("running %s", " ".join(command))
    subprocess.run(command, check=True)


# ------------------------------------------------------------------------------------------- certify


def certify_stage(
    cfg: DictConfig, output_dir: Path, on_ready: Callable[[], None] | None = None
) -> dict[str, Any] | None:
    """Dual CERTIFY of the test subset through the one pipeline (see the module docstring).

    Returns the summary, ``None`` if stopped (or a shard whose siblings are still certifying). ``on_ready`` is
    called once the models are built and the expert records checked, before the first file is written.
    """
    sharded = int(cfg.certify.get("num_shards", 1) or 1) > 1
    folder = certification_dir(cfg) if sharded else output_dir  # (shards share one folder)
    return dual_models.certify_dual(cfg, cfg, folder, on_ready).summary
