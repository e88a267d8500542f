"""The stages of ``python -m rsbench.dual``: router labels, routing, the iterative training, dual certification.

* ``labels``: CERTIFY every expert at a small n on the training images (the subset ``labels.start/skip/max_images``)
  and keep every expert's radius per image (0 where it abstains or is wrong), from which ``method=router`` makes
  the paper's soft labels; the argmax label is kept too (:func:`rsbench.certify.dual.router_labels`). Writes
  ``router_labels.pt`` (:data:`~rsbench.methods.router_loss.LABELS_VERSION`: ``version``, ``labels`` [N_train], -1
  where not labelled, ``radii`` [N_train, K], NaN where not labelled, ``sigmas``, ``protocol``); resumable
  (``router_labels.partial.pt``, saved every minute).
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
  :mod:`rsbench.certify.dual_checks`): then only the router runs.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import Tensor

from rsbench.archs.classifier import weights_fingerprint
from rsbench.certify.caps import fixed_n_cap
from rsbench.certify.dual import (
    DUAL_RECORD,
    RECORD,
    Certifier,
    DualSmooth,
    dual_row,
    dual_rows,
    fixed_n,
    format_dual_summary,
    router_labels,
    summarize_dual,
)
from rsbench.certify.dual_checks import check_dual_threat, expert_record_problems, refuse_expert_record, unsound_rows
from rsbench.certify.environment import environment
from rsbench.certify.grid_noise import GridSmooth
from rsbench.certify.pipeline import recorded_provenance
from rsbench.certify.plot import Curve, plot_certified_accuracy
from rsbench.certify.progress import progress
from rsbench.certify.records import PROTOCOL, RecordWriter, check_protocol, read_records, read_rows, write_protocol
from rsbench.certify.seeding import derive_seed
from rsbench.certify.sequential import certify_group
from rsbench.certify.settings import CertifySettings
from rsbench.certify.smooth import Certificate, Smooth
from rsbench.certify.subset import indices_digest, require_images
from rsbench.certify.summary import write_metrics
from rsbench.errors import ConfigError
from rsbench.files import record_path, save_atomically
from rsbench.methods.router_loss import LABELS_VERSION
from rsbench.models import router as routers
from rsbench.stop import raise_if_stop_requested, stop_requested

log = logging.getLogger(__name__)

SAVE_EVERY_SECONDS = 60.0
LABELS = "router_labels.pt"
ROUTES = "router_routes.pt"


# ------------------------------------------------------------------------------------------- shared pieces


def device_of(cfg: DictConfig) -> torch.device:
    """``cfg.device``, or cuda when there is one, else cpu."""
    return torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "cpu"))


def build_experts(cfg: DictConfig, datamodule: Any) -> list[Any]:
    """The experts of ``cfg.experts`` (checkpoint paths) and ``cfg.expert_models`` (``conf/model/`` nodes)."""
    models = [instantiate(node) for node in cfg.get("expert_models") or []]
    return routers.experts(list(cfg.experts or []), models, datamodule.num_classes, int(datamodule.image_shape[0]))


def smooth_of(
    classifier: torch.nn.Module, classes: int, sigma: float, settings: CertifySettings, device: torch.device
) -> Smooth:
    """The smoothed ``classifier`` at ``sigma`` with the settings' precision, memory format and grid noise.

    On ``device``. ``certify.noise_grid`` draws the Gaussian noise on the input grid
    (:class:`~rsbench.certify.grid_noise.GridSmooth`) for the router and every expert alike; other threat models are
    refused (:func:`rsbench.certify.dual_checks.check_dual_threat`).
    """
    classifier = classifier.to(device).eval()
    if settings.speed.channels_last:
        classifier.to(memory_format=torch.channels_last)
    precision, channels_last = settings.speed.precision, settings.speed.channels_last
    levels = settings.protocol.noise_grid
    if levels is not None:
        return GridSmooth(classifier, classes, sigma, levels=levels, precision=precision, channels_last=channels_last)
    return Smooth(classifier, classes, sigma, precision=precision, channels_last=channels_last)


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
    experts = experts if experts is not None else build_experts(cfg, datamodule)
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
    path, partial_path = output_dir / LABELS, output_dir / (LABELS + ".partial")
    if path.is_file():
        stored = torch.load(path, map_location="cpu", weights_only=True)
        if stored.get("protocol") == protocol:
            log.info("router labels already written: %s", path)
            return path
        raise ConfigError(f"{path} holds labels of another protocol; write to another output_dir")
    radii = torch.full((total, len(experts)), float("nan"), dtype=torch.float64)
    if partial_path.is_file():
        stored = torch.load(partial_path, map_location="cpu", weights_only=True)
        if stored.get("protocol") == protocol:
            radii = stored["radii"]
            log.info("resuming the router labels from %s", partial_path)
    smooths = [smooth_of(e.classifier, e.num_classes, e.sigma, settings, device) for e in experts]
    todo = [i for i in indices if bool(torch.isnan(radii[i]).any())]
    together = max(1, settings.speed.batch_size // (int(spec.n0) + int(spec.n))) * 4
    counter = progress(len(indices), "router labels", "images", len(indices) - len(todo))
    last_save = time.monotonic()
    for first in range(0, len(todo), together):
        group = todo[first : first + together]
        items = [images[i] for i in group]
        xs = torch.stack([item[0] for item in items])
        labels = [int(item[1]) for item in items]
        seeds = [derive_seed(int(spec.seed), i) for i in group]
        for k, smooth in enumerate(smooths):
            certs = smooth.certify_batch(
                xs, int(spec.n0), int(spec.n), float(spec.alpha), settings.speed.batch_size, seeds=seeds
            )
            for position, cert in zip(group, certs, strict=True):
                label = labels[group.index(position)]
                radii[position, k] = cert.radius if cert.prediction == label else 0.0
        counter.update(len(group))
        stopping = stop_requested() is not None
        if stopping or time.monotonic() - last_save > SAVE_EVERY_SECONDS:
            save_atomically({"protocol": protocol, "radii": radii}, partial_path)
            last_save = time.monotonic()
        raise_if_stop_requested()
    counter.close()
    labelled = torch.full((total,), -1, dtype=torch.int64)
    chosen = torch.as_tensor(router_labels(radii[indices].numpy()))
    labelled[torch.as_tensor(indices)] = chosen
    table = {"version": LABELS_VERSION, "protocol": protocol, "labels": labelled, "radii": radii, "sigmas": sigmas}
    save_atomically(dict(table), path)
    partial_path.unlink(missing_ok=True)
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
    router = router if router is not None else instantiate(cfg.router)
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
                *spec.router_overrides,
            ],
        )
        router_ckpt = str(router_dir / "checkpoints" / "last.ckpt")
        router = routers.checkpoint(router_ckpt, int(datamodule.image_shape[0]))
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


def certifier_for(settings: CertifySettings, n0: int, n: int) -> Certifier:
    """Fixed-n CERTIFY with (n0, n), or the sequential design of ``certify.*`` up to n samples."""
    batch_size = settings.speed.batch_size
    if settings.sequential is None:
        return fixed_n(n0, n, batch_size)
    schedule = settings.sequential

    def certify(smooth: Smooth, xs: Tensor, seeds: list[int], alpha: float) -> list[Certificate]:
        protocol = replace(settings.protocol, n0=n0, n=n, alpha=alpha)
        return certify_group(smooth, xs, n0, batch_size, schedule.make(smooth.sigma, protocol), seeds=seeds)

    return certify


def cap_for(settings: CertifySettings, sigma: float, n0: int, n: int, alpha: float) -> float:
    """The largest radius reported at ``sigma`` with (n0, n, alpha): fixed-n's cap, or the sequential design's."""
    if settings.sequential is None:
        return fixed_n_cap(sigma, n, alpha)
    return settings.sequential.cap(sigma, replace(settings.protocol, n0=n0, n=n, alpha=alpha))


def expert_record_reader(
    folders: Sequence[str], experts: Sequence[Any], settings: CertifySettings, indices: Sequence[int], dataset: str
) -> Callable[[int], dict[int, Certificate]]:
    """Each expert's certificates from its own certification (checked: same protocol, seed, model and images).

    A record is refused, naming what differs and what is allowed, unless it is a sound Gaussian l2 certificate of
    ``dataset`` at this run's precision and grid noise, every reused row marked sound
    (:func:`rsbench.certify.dual_checks.expert_record_problems`), and certified with this run's n0, n, alpha, seed, mode
    (and sequential design) of the same expert's weights at its sigma.
    """
    protocol = settings.protocol
    cache: dict[int, dict[int, Certificate]] = {}

    def read(k: int) -> dict[int, Certificate]:
        if k in cache:
            return cache[k]
        folder = Path(folders[k])
        stored = json.loads((folder / PROTOCOL).read_text()) if (folder / PROTOCOL).is_file() else None
        if stored is None:
            raise ConfigError(f"expert_records[{k}]={folder}: no {PROTOCOL} (not an rsbench certification)")
        metrics_path = folder / "metrics.json"
        metrics = json.loads(metrics_path.read_text()) if metrics_path.is_file() else None
        precision, grid = settings.speed.precision, settings.protocol.noise_grid
        refuse_expert_record(
            k, folder, expert_record_problems(stored, metrics, dataset=dataset, precision=precision, noise_grid=grid)
        )
        wanted = {
            "n0": protocol.n0,
            "n": protocol.n,
            "alpha": protocol.alpha,
            "seed": protocol.seed,
            "mode": settings.mode,
            "sigma": float(experts[k].sigma),
            "model_fingerprint": weights_fingerprint(experts[k].classifier),
        }
        if settings.sequential is not None:
            wanted["design"] = settings.sequential.design
        different = {key: (stored.get(key), value) for key, value in wanted.items() if stored.get(key) != value}
        if different:
            raise ConfigError(
                f"expert_records[{k}]={folder} was certified otherwise than this run asks (stored, asked): {different}"
            )
        rows = read_records(folder)
        missing = [i for i in indices if i not in rows]
        if missing:
            raise ConfigError(f"expert_records[{k}]={folder} lacks {len(missing)} of the images (first: {missing[0]})")
        refuse_expert_record(k, folder, unsound_rows(rows[i] for i in indices))
        cache[k] = {
            i: Certificate(
                prediction=rows[i].predict,
                radius=rows[i].radius,
                p_a_lower=rows[i].pA_lower,
                count=rows[i].count or 0,  # (an expert's own record always has it)
                selected=rows[i].predict,
                n0=protocol.n0,
                n=rows[i].n,
                alpha=protocol.alpha,
                sigma=rows[i].sigma,
                seconds=rows[i].time,
            )
            for i in indices
        }
        return cache[k]

    return read


def certify_stage(
    cfg: DictConfig, output_dir: Path, on_ready: Callable[[], None] | None = None
) -> dict[str, Any] | None:
    """Dual CERTIFY of the test subset (see the module docstring); returns the summary (``None`` if stopped).

    ``on_ready`` is called once every check has passed (models, subset, expert records, the stored protocol), before
    the first file is written.
    """
    check_dual_threat(cfg.certify)
    settings = CertifySettings.from_config(cfg.certify)
    if settings.sigma_mode != "fixed":
        raise ConfigError(
            "stage=certify: dual smoothing certifies each expert at its own sigma (certify.sigma_mode=fixed)"
        )
    protocol = settings.protocol
    beta = float(cfg.beta)
    router_n0, router_n = int(cfg.router_n0), int(cfg.router_n)
    datamodule = instantiate(cfg.dataset)
    datamodule.prepare_data()
    datamodule.setup("test")
    experts = build_experts(cfg, datamodule)
    router: routers.Router = instantiate(cfg.router)
    sigmas = [float(e.sigma) for e in experts]
    if len(router.sigmas) != len(sigmas) or any(abs(a - b) > 1e-9 for a, b in zip(router.sigmas, sigmas, strict=False)):
        raise ConfigError(f"the router routes to sigmas {list(router.sigmas)}, the experts are at {sigmas}")
    device = device_of(cfg)
    test = datamodule.test_dataset
    indices = require_images(
        len(test), settings.subset.start, settings.subset.skip, settings.subset.max_images, "the test split"
    )
    reuse = list(cfg.expert_records or [])
    if reuse and len(reuse) != len(experts):
        raise ConfigError(f"expert_records: give one folder per expert ({len(experts)}), got {len(reuse)}")
    fingerprints = [weights_fingerprint(e.classifier) for e in experts]
    record = {
        "kind": "dual_rs",
        "dataset": datamodule.name,
        "seed": protocol.seed,
        "n0": protocol.n0,
        "n": protocol.n,
        "alpha": protocol.alpha,
        "beta": beta,
        "failure_probability": protocol.alpha + beta,
        "router_n0": router_n0,
        "router_n": router_n,
        "mode": settings.mode,
        **({"design": settings.sequential.design} if settings.sequential is not None else {}),
        "sigmas": sigmas,
        "router_sigma": router.sigma,
        "router_fingerprint": weights_fingerprint(router.classifier),
        "expert_fingerprints": fingerprints,
        "start": settings.subset.start,
        "skip": settings.subset.skip,
        "max_images": settings.subset.max_images,
        "test_size": len(test),
        "precision": settings.speed.precision,
        "channels_last": settings.speed.channels_last,
        **({"noise_grid": protocol.noise_grid} if protocol.noise_grid is not None else {}),
    }
    read_expert = expert_record_reader(reuse, experts, settings, indices, datamodule.name) if reuse else None
    if read_expert is not None:
        for k in range(len(experts)):
            read_expert(k)  # checks every record before the first row is written
    check_protocol(output_dir, record, ("max_images",))
    if on_ready is not None:
        on_ready()
    write_protocol(output_dir, record)
    router_smooth = smooth_of(router.classifier, router.num_choices, router.sigma, settings, device)
    expert_smooths = [smooth_of(e.classifier, e.num_classes, e.sigma, settings, device) for e in experts]
    dual = DualSmooth(
        router_smooth,
        expert_smooths,
        certifier_for(settings, router_n0, router_n),
        certifier_for(settings, protocol.n0, protocol.n),
    )
    path = output_dir / RECORD
    done = {row.idx for row in dual_rows(read_rows(path), path)} if path.exists() else set()
    todo = [i for i in indices if i not in done]
    together = settings.speed.images_together(protocol)
    counter = progress(len(indices), "dual certification", "images", len(indices) - len(todo))
    with RecordWriter(path, DUAL_RECORD) as writer:
        for first in range(0, len(todo), together):
            group = todo[first : first + together]
            items = [test[i] for i in group]
            xs = torch.stack([item[0] for item in items])
            seeds = [derive_seed(protocol.seed, i) for i in group]
            given = None if read_expert is None else _reuse(read_expert, group)
            certificates = dual.certify_batch(xs, seeds, protocol.alpha, beta, expert_certificates=given)
            for idx, item, cert in zip(group, items, certificates, strict=True):
                writer.append(dual_row(idx, int(item[1]), cert))
                counter.update(1)
            if stop_requested() is not None:
                counter.close()
                log.warning("dual certification stopped on request; rerun into %s to resume", output_dir)
                return None
    counter.close()
    rows_by_idx = {row.idx: row for row in dual_rows(read_rows(path), path)}
    rows = [rows_by_idx[i] for i in indices]
    router_cap = cap_for(settings, router.sigma, router_n0, router_n, beta)
    expert_cap = max(cap_for(settings, s, protocol.n0, protocol.n, protocol.alpha) for s in sigmas)
    cap = min(router_cap, expert_cap)
    seconds = float(sum(row.time for row in rows))
    samples = int(
        sum((row.router_n or 0) + row.n + router_n0 + (protocol.n0 if (row.expert or 0) >= 0 else 0) for row in rows)
    )
    env = environment(device)
    extra = {
        "dataset": datamodule.name,
        "arch": router.description.get("arch"),
        "seed": protocol.seed,
        "n0": protocol.n0,
        "n": protocol.n,
        "router_n0": router_n0,
        "router_n": router_n,
        "mode": settings.mode,
        **({"design": settings.sequential.design} if settings.sequential is not None else {}),
        "router": {
            **dict(router.description),
            "provenance": recorded_provenance(router.provenance, output_dir),
            "sigma": router.sigma,
        },
        "experts": [recorded_provenance(e.provenance, output_dir) for e in experts],
        "expert_records": [record_path(folder, output_dir) for folder in reuse] if reuse else None,
        **({"noise_grid": protocol.noise_grid} if protocol.noise_grid is not None else {}),
        "radius_caps": {
            "router": router_cap,
            "experts": {repr(s): cap_for(settings, s, protocol.n0, protocol.n, protocol.alpha) for s in sigmas},
        },
        "subset": {
            "start": settings.subset.start,
            "skip": settings.subset.skip,
            "max_images": settings.subset.max_images,
            "test_size": len(test),
            "digest": indices_digest(indices),
            "indices": indices,
        },
        "environment": env,
        "cost": {
            "device": device.type,
            "device_name": env["device_name"],
            "torch": env["torch"],
            "precision": settings.speed.precision,
            "threads": env["threads"],
            "train_seconds": None,
            "certify_seconds": seconds,
            "samples": samples,
            "images": len(rows),
            "note": "expert rows reused from expert_records keep the time of their own certification" if reuse else "",
        },
    }
    summary = summarize_dual(
        rows, sigmas=sigmas, router_sigma=router.sigma, cap=cap, radius_step=protocol.radius_step, extra=extra
    )
    write_metrics(summary, output_dir / "metrics.json")
    curves = [Curve("dual RS", [r.radius for r in rows], [r.correct for r in rows])]
    for k, folder in enumerate(reuse):
        expert_rows = read_records(Path(folder))
        curves.append(
            Curve(
                f"sigma={sigmas[k]} alone",
                [expert_rows[i].radius for i in indices],
                [expert_rows[i].predict == expert_rows[i].label for i in indices],
                dashed=True,
            )
        )
    title = f"dual RS on {datamodule.name}: router at sigma={router.sigma}, experts at {sigmas}"
    note = f"{len(rows)} images, alpha={protocol.alpha} + beta={beta}, {settings.mode} CERTIFY"
    plot_certified_accuracy(curves, cap, output_dir / "certified_accuracy.png", title, note)
    log.info("%s\nchosen sigmas %s", format_dual_summary(summary), summary["chosen_sigma"])
    return summary


def _reuse(
    read: Callable[[int], dict[int, Certificate]], group: list[int]
) -> Callable[[int, list[int]], list[Certificate]]:
    """The expert certificates of ``group``'s images at ``positions``, read from the experts' own records."""
    return lambda k, positions: [read(k)[group[p]] for p in positions]
