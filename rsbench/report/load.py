"""Read certification results from the files runs write: rsbench run folders and Cohen-format TSVs.

A run folder holds ``metrics.json`` (the protocol and the summary), ``certify.tsv`` (one row per image) and, when
Hydra wrote it, ``.hydra/overrides.yaml`` (what the command line changed) and ``.hydra/config.yaml``. Nothing else is
read, so copied result folders work. A run certified with a per-input sigma gives two results: the sound fixed-sigma
certificates (``certify_fixed_sigma.tsv``) and the labelled unsound ones (``certify.tsv``). A dual
randomized-smoothing run (``python -m rsbench.dual stage=certify``) gives one, whose certificates hold at alpha + beta
(its ``beta``, and its variant says both).

A TSV in the format of Cohen et al.'s ``certify.py`` (``idx label predict radius correct time``, radius often with
3 significant digits, time as seconds or ``0:00:01.234``), as the authors of the papers released them, is read when
given as a file; its sigma comes from ``--sigma`` or the path (``noise_0.25``, ``sigma_0.5``, ``sigma=1.0``).

Every result has a threat model, the norm of its radii and its smoothing noise: ``metrics.json``'s ``norm`` and
``noise`` (a TSV's ``norm`` and ``noise`` columns), and l2 with Gaussian noise where they are absent, as in every
record rsbench wrote before it certified other threat models and in every released log. A run attacked after
certification (``attack=smoothadv``) also brings its ``attack.tsv`` rows and ``metrics.json["attack"]``. A run's
cost (:func:`rsbench.report.cost.run_cost`) comes from ``metrics.json["cost"]``, or for an older run from its
``environment`` and the sum of ``certify.tsv``'s ``time``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from omegaconf import OmegaConf

from rsbench.attack.records import read_attack_rows
from rsbench.certify.algorithm.caps import fixed_n_cap
from rsbench.certify.pipeline.checked_runs import check_run
from rsbench.certify.pipeline.records import PROTOCOL, CertificationRow
from rsbench.certify.pipeline.subset import indices_digest
from rsbench.certify.pipeline.validate import FIXED_STEM, Facts, read_json_object, read_table, sigma_from_path
from rsbench.errors import DamagedFileError, RsbenchError
from rsbench.methods.card import method_of_log_folder
from rsbench.published.paths import cohen_layout
from rsbench.report.cost import Cost, run_cost
from rsbench.runs.datasets import path_names, published_as
from rsbench.runs.naming import describes_setting, execution_keys, override_key
from rsbench.runs.quoting import override_value

log = logging.getLogger(__name__)


class ReportError(RsbenchError):
    """Input the report cannot use: the message names the file or value and what to do."""


@dataclass(frozen=True)
class Result:
    """One set of certificates: a run's record (one per image), with what it was trained and certified under.

    Attributes:
        source: the run folder, or the TSV file.
        method: the training method (or the label given to a TSV).
        variant: what sets these certificates apart from the run's plain ones ("" for ordinary runs;
            "sequential", "sequential betting", "fixed sigma, sound", "data_dependent sigma, NOT sound", ...).
        sound: whether every certificate is a sound guarantee.
        protocol: what the certificates depend on besides the model: n0, n, alpha, mode, the image subset.
        seed: the training seed (``seed`` in the Hydra config), None when unknown.
        overrides: the run's descriptive Hydra overrides, ``key -> value`` (paths and loggers left out).
        choices: the option chosen in each config group (``.hydra/hydra.yaml``: ``certify -> quick``, ...).
        config: the run's ``.hydra/config.yaml`` (None when absent), to look up keys a run did not override.
        hparams: the method's hyperparameters as recorded in ``metrics.json``.
        hparams_recorded: whether ``metrics.json`` records them (runs of rsbench before it did, and TSVs, do not;
            ``group_rows`` may then adopt a recorded setting that the run's own config agrees with).
        records: one row per image, sorted by ``idx``: label, predict, radius, correct, pA_lower.
        rounded_radii: radii were written with 3 significant digits (Cohen's format), so a radius counted at a grid
            radius may have been rounded up to it.
        device: the device that certified (``metrics.json["environment"]["device_name"]``), None when not recorded.
        norm: the norm of the radii (``l1``, ``l2``, ``linf``).
        noise: the smoothing noise.
        attack: ``metrics.json["attack"]`` of a run attacked after certification, else None.
        attack_records: its ``attack.tsv`` rows (idx, radius, correct, ...), else None.
        cost: what the run cost (GPU- or core-hours), None when unknown (TSVs: a paper's cost is the leaderboard's).
        beta: a dual randomized-smoothing run's router failure probability (its certificates hold at alpha + beta;
            ``protocol["beta"]`` too), None for every other result. A dual result's ``sigma`` is its largest
            expert's.
        expert_records: a dual run's experts' own certifications it reused (``metrics.json["expert_records"]``,
            found beside the run or from the working directory), empty when it has none or one is not found.
    """

    source: Path
    method: str
    dataset: str
    family: str
    arch: str
    sigma: float
    protocol: Mapping[str, Any]
    records: pd.DataFrame = field(repr=False)
    variant: str = ""
    sound: bool = True
    seed: int | None = None
    overrides: Mapping[str, str] = field(default_factory=dict)
    choices: Mapping[str, str] = field(default_factory=dict)
    config: Any = None
    hparams: Mapping[str, Any] = field(default_factory=dict)
    hparams_recorded: bool = True
    epochs: int | None = None
    mean_samples: float | None = None
    rounded_radii: bool = False
    device: str | None = None
    norm: str = "l2"
    noise: str = "gaussian"
    attack: Mapping[str, Any] | None = None
    attack_records: pd.DataFrame | None = field(default=None, repr=False)
    cost: Cost | None = None
    beta: float | None = None
    expert_records: tuple[Path, ...] = ()

    @property
    def label(self) -> str:
        """The method with its variant, as shown in tables."""
        return f"{self.method} ({self.variant})" if self.variant else self.method

    @cached_property
    def images(self) -> tuple[int, ...]:
        """The certified image indices, in order (computed once: ``records`` is read-only)."""
        return tuple(int(i) for i in self.records["idx"])

    @property
    def scores(self) -> np.ndarray:
        """Per image: the certified radius if the prediction is correct, else 0 (ACR is their mean)."""
        return np.where(self.records["correct"].to_numpy(bool), self.records["radius"].to_numpy(float), 0.0)

    def on_images(self, indices: Iterable[int]) -> Result:
        """This result with only the records of ``indices`` (which it must hold), in that order."""
        return replace(self, records=self.records.set_index("idx").loc[list(indices)].reset_index())

    def certified(self, radius: float) -> np.ndarray:
        """Per image: correct and certified at ``radius`` or more (abstentions count as wrong)."""
        return self.records["correct"].to_numpy(bool) & (self.records["radius"].to_numpy(float) >= radius)

    @property
    def cap(self) -> float:
        """The largest radius the protocol can certify, sigma * Phi^-1(alpha^(1/n)) (inf when n or alpha is unknown)."""
        if self.protocol.get("radius_cap") is not None:
            return float(self.protocol["radius_cap"])
        if self.threat != "l2 (gaussian noise)":
            return math.inf  # a TSV of another threat model: its cap needs the dimension, which it does not say
        n, alpha = self.protocol.get("n"), self.protocol.get("alpha")
        return fixed_n_cap(self.sigma, int(n), float(alpha)) if n and alpha else math.inf

    @property
    def threat(self) -> str:
        """The threat model, e.g. ``l1 (laplace noise)``."""
        return f"{self.norm} ({self.noise} noise)"

    def setting(self, key: str) -> str:
        """The value of config key ``key`` in this run, as text.

        Its override, else the option chosen for a config group (``certify``, ``experiment``), else the method's
        recorded hyperparameter (``method.<name>``; ``-`` when the method has no such hyperparameter), else the
        run's config; ``?`` when unknown.
        """
        if key in self.overrides:
            return self.overrides[key]
        if key in self.choices:
            return canonical(self.choices[key])
        if key.startswith("method.") and self.hparams:  # recorded: the method has this hyperparameter, or "-"
            return canonical(self.hparams[key[len("method.") :]]) if key[len("method.") :] in self.hparams else "-"
        if self.config is not None:
            try:
                value = OmegaConf.select(self.config, key, default=None)
            except Exception:  # an interpolation only a live Hydra run can resolve (${hydra:...})
                value = None
            if value is not None:
                return canonical(OmegaConf.to_container(value) if OmegaConf.is_config(value) else value)
        return "?"


def canonical(value: Any) -> str:
    """A value as text that compares equal however it was written (``5``, ``5.0`` -> ``5``; ``True`` -> ``true``).

    >>> canonical("5.0"), canonical(5), canonical("True"), canonical("cifar10")
    ('5', '5', 'true', 'cifar10')
    """
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"  # not "null", which CSV readers take for a missing value
    if isinstance(value, int | float):
        return f"{float(value):g}"
    return str(value) if not isinstance(value, list | dict) else json.dumps(value)


def find_results(
    paths: Iterable[Path],
    *,
    label: str | None = None,
    sigma: float | None = None,
    dataset: str | None = None,
    n: int | None = None,
    alpha: float | None = None,
) -> list[Result]:
    """Every result under ``paths``: run folders (searched recursively for ``metrics.json``) and TSV files.

    Keyword arguments describe TSV files, which carry no metadata (inferred from the path when not given).

    Raises:
        ReportError: a path holds no result, or a result cannot be read (the message names it).
    """
    results: list[Result] = []
    seen: set[Path] = set()  # a run reached twice (its folder and its sweep's) is read once
    for path in map(Path, paths):
        if path.is_file() and path.name != "metrics.json":
            if path.resolve() not in seen:
                seen.add(path.resolve())
                results.append(read_cohen_tsv(path, label=label, sigma=sigma, dataset=dataset, n=n, alpha=alpha))
            continue
        if path.is_file() and path.name == "metrics.json":
            path = path.parent
        if not path.is_dir():
            raise ReportError(f"{path} is neither a run folder, a sweep folder nor a certify TSV file")
        found = sorted(p.parent for p in path.rglob("metrics.json"))
        for unfinished in sorted({p.parent for p in path.rglob("certify*.tsv")} - set(found)):
            log.warning("%s has certification records but no metrics.json (unfinished?): left out", unfinished)
        if not found:
            raise ReportError(
                f"{path} holds no results: no metrics.json under it (a run writes one when certification ends). "
                "Pass run or sweep folders, or certify TSV files."
            )
        for run in found:
            if run.resolve() not in seen:
                seen.add(run.resolve())
                results.extend(read_run(run))
    return results


def read_run(run: Path) -> list[Result]:
    """The results of one run folder: one, or two for runs certified with a per-input sigma (sound one first)."""
    metrics = _read_json(run / "metrics.json")
    hydra = _read_hydra(run)
    protocol = _read_json(run / PROTOCOL) if (run / PROTOCOL).is_file() else None
    if protocol is not None:
        hydra["overrides"] = as_certified(hydra["overrides"], protocol)
    try:
        records = check_run(run, metrics, protocol)
    except DamagedFileError as error:
        raise ReportError(str(error)) from None
    if any(row.is_dual for row in records["certify"].values()):
        return [_dual_result(run, metrics, hydra, records["certify"])]
    if "fixed_sigma" not in metrics:
        variant = _sequential_variant(metrics) if metrics.get("mode") == "sequential" else ""
        return [_run_result(run, "certify", metrics, metrics, hydra, variant, records["certify"])]
    mode = metrics.get("sigma_mode", "data_dependent")
    fixed = {**metrics, **metrics["fixed_sigma"]}
    return [
        _run_result(run, FIXED_STEM, fixed, metrics, hydra, "fixed sigma, sound", records[FIXED_STEM]),
        _run_result(run, "certify", metrics, metrics, hydra, f"{mode} sigma, NOT sound", records["certify"]),
    ]


def _dual_result(
    run: Path, metrics: dict[str, Any], hydra: dict[str, Any], rows: dict[int, CertificationRow]
) -> Result:
    """A dual randomized-smoothing run's result: its certificates hold at alpha + beta, which its variant says.

    Its sigma is input-dependent: the result stands at the largest expert sigma (the table it is compared in), and
    the variant names every expert's sigma and the router's.
    """
    sigmas, alpha, beta = metrics.get("sigmas"), metrics.get("alpha"), metrics.get("beta")
    if not sigmas or not isinstance(alpha, int | float) or not isinstance(beta, int | float):
        raise ReportError(f"{run / 'metrics.json'} is a dual run's but lacks sigmas, alpha or beta: not rsbench's")
    experts = ", ".join(f"{float(s):g}" for s in sigmas)
    variant = f"experts at sigma {experts}, router at {float(metrics.get('router_sigma', math.nan)):g}"
    variant += f"; alpha + beta = {alpha:g} + {beta:g}"
    if metrics.get("mode") == "sequential":
        variant = f"{_sequential_variant(metrics)}; {variant}"
    samples = metrics.get("mean_samples")  # the router's and the expert's estimation samples per image
    samples = sum(samples.values()) if isinstance(samples, Mapping) else samples
    summary = {**metrics, "sigma": max(float(s) for s in sigmas), "mean_samples": samples}
    result = _run_result(run, "certify", summary, metrics, hydra, variant, rows)
    reused = _found(run, metrics.get("expert_records") or [])
    return replace(result, beta=float(beta), protocol={**result.protocol, "beta": float(beta)}, expert_records=reused)


def _found(run: Path, folders: Sequence[str]) -> tuple[Path, ...]:
    """The folders as recorded (relative to the run folder, or to the working directory, or absolute), if all found."""
    found = []
    for folder in folders:
        candidates = [run / folder, Path(folder)]
        where = next((c for c in candidates if (c / "certify.tsv").is_file()), None)
        if where is None:
            return ()
        found.append(where)
    return tuple(found)


def network_evaluation(summary: Mapping[str, Any], run: Path) -> str:
    """How the certified network was evaluated: ``fp32``, or its precision and options (``fp32+channels-last``).

    The certificate holds for the network as evaluated (rsbench/certify/pipeline/settings.py, ``Speed``), so rows
    evaluated differently are different classifiers. ``metrics.json`` records the precision, and channels-last and
    compilation since rsbench recorded them there; for an older run they are read from its ``certify_protocol.json``
    (and taken as off where neither says).
    """
    options = summary
    if "channels_last" not in summary and (run / PROTOCOL).is_file():
        options = _read_json(run / PROTOCOL)
    parts = [str(summary.get("precision", "fp32"))]
    parts += [name for key, name in (("channels_last", "channels-last"), ("compile", "compiled")) if options.get(key)]
    return "+".join(parts)


def _sequential_variant(metrics: dict[str, Any]) -> str:
    """``sequential`` for the first design (runs before #22 record no design), ``sequential <design>`` otherwise."""
    design = metrics.get("design", "looks")
    return "sequential" if design == "looks" else f"sequential {design}"


def _run_result(
    run: Path,
    stem: str,
    summary: dict[str, Any],
    metrics: dict[str, Any],
    hydra: dict[str, Any],
    variant: str,
    rows: dict[int, CertificationRow],
) -> Result:
    """The result of record ``stem`` of a run, from its rows (checked against ``summary`` by :func:`check_run`)."""
    for key in ("method", "dataset", "sigma", "n", "alpha"):
        if key not in summary:
            raise ReportError(f"{run / 'metrics.json'} lacks {key!r}; it was not written by rsbench")
    if not rows:
        raise ReportError(f"{run} has metrics.json but no {stem}.tsv rows; the report needs the per-image records")
    subset = metrics.get("subset", {})
    indices = subset.get("indices") or sorted(rows)
    missing = [i for i in indices if i not in rows]
    if missing:
        raise ReportError(
            f"{run / (stem + '.tsv')} lacks {len(missing)} of the {len(indices)} images metrics.json summarises "
            f"(first: {missing[:5]}); rerun into the same folder to finish it"
        )
    records = pd.DataFrame([asdict(rows[i]) for i in indices])
    config = hydra.get("config")
    # The published numbers a run stands beside are its dataset's (the embedded subset's: MNIST's), not those of
    # dataset.family, which names whose method hyperparameters apply (MNIST's for Fashion-MNIST, CIFAR-10's for SVHN).
    family = published_as(str(summary["dataset"]))
    protocol = {
        "n0": summary.get("n0"),
        "n": summary["n"],
        "alpha": summary["alpha"],
        "mode": summary.get("mode", "standard"),
        "radius_cap": summary.get("radius_cap"),
        "network": network_evaluation(summary, run),
        "test_size": subset.get("test_size"),
        "subset": indices_digest([int(i) for i in indices]),
    }
    seed = _select(config, "seed")
    epochs = _select(config, "trainer.max_epochs")
    attacked = read_attack_rows(run, rows) if stem == "certify" else []
    return Result(
        source=run,
        method=str(summary["method"]),
        dataset=str(summary["dataset"]),
        family=str(family),
        arch=str(summary.get("arch", "?")),
        sigma=float(summary["sigma"]),
        protocol=protocol,
        records=records,
        variant=variant,
        sound=bool(summary.get("sound", True)),
        seed=int(seed) if seed is not None else None,
        overrides=hydra.get("overrides", {}),
        choices=hydra.get("choices", {}),
        config=config,
        hparams=metrics.get("hparams", {}),
        hparams_recorded="hparams" in metrics,
        epochs=int(epochs) if epochs is not None else None,
        mean_samples=summary.get("mean_samples"),
        device=(metrics.get("environment") or {}).get("device_name"),
        norm=str(summary.get("norm", "l2")),
        noise=str(summary.get("noise", "gaussian")),
        attack=metrics.get("attack") if attacked else None,
        attack_records=pd.DataFrame([asdict(row) for row in attacked]) if attacked else None,
        cost=run_cost(metrics, sum(row.time for row in rows.values())),
    )


def read_cohen_tsv(
    path: Path,
    *,
    label: str | None = None,
    sigma: float | None = None,
    dataset: str | None = None,
    n: int | None = None,
    alpha: float | None = None,
) -> Result:
    """A certification TSV in Cohen et al.'s format (or rsbench's, whose first columns are the same).

    Args:
        path: the TSV file.
        label: the row's method name (default: the folder holding the file, or ``gaussian`` in Cohen et al.'s layout,
            see :func:`cohen_layout`); the authors' names ``cohen``, ``stab``, ``salman``, ``cat-rs`` (as folders or
            labels) read as gaussian, stability, smoothadv, catrs. A Cohen log certified at another sigma than it was
            trained at is the variant "trained at sigma <s>", which no published line matches.
        sigma: the noise level (default: from the path, e.g. ``noise_0.25``).
        dataset: the dataset (default: a dataset name found in the path, else ``?``).
        n: estimation samples per image, if known (for the radius cap and protocol checks).
        alpha: the failure probability, if known.
    """
    sigma = sigma if sigma is not None else sigma_from_path(path)
    try:
        table = read_table(path, facts=Facts(sigma, n, alpha), need_rows=True)
    except DamagedFileError as error:
        raise ReportError(str(error)) from None
    if sigma is None:
        raise ReportError(f"{path}: cannot tell sigma from the path; pass --sigma")
    frame = pd.DataFrame(dict(table.columns))
    layout = cohen_layout(path)
    frame = frame.sort_values("idx").reset_index(drop=True)
    radius = frame["radius"].astype(float)
    if "pA_lower" not in frame.columns:
        # radius = sigma * Phi^-1(pA_lower) for every non-abstained image, so the bound can be recovered from it.
        from scipy.stats import norm

        frame["pA_lower"] = np.where(frame["predict"] >= 0, norm.cdf(radius / sigma), np.nan)
    records = frame[["idx", "label", "predict", "radius", "correct", "pA_lower"]].astype(
        {"idx": int, "label": int, "predict": int, "radius": float, "correct": bool, "pA_lower": float}
    )
    dataset = dataset or next((d for d in path_names() if d in [p.lower() for p in path.parts]), "?")
    rounded = bool(np.all([float(f"{r:.3g}") == r for r in radius]))
    method = label or (layout.method if layout else path.parent.name)
    variant = ""
    if layout and layout.trained_sigma is not None and not math.isclose(layout.trained_sigma, sigma):
        variant = f"trained at sigma {layout.trained_sigma:g}"
    certified_norm = str(frame["norm"].iloc[0]) if "norm" in frame.columns and len(frame) else "l2"
    noise = str(frame["noise"].iloc[0]) if "noise" in frame.columns and len(frame) else "gaussian"
    return Result(
        source=path,
        method=method_of_log_folder(method),
        variant=variant,
        dataset=dataset,
        family=published_as(dataset),
        arch=layout.arch if layout else "?",
        sigma=float(sigma),
        protocol={"n0": None, "n": n, "alpha": alpha, "mode": "standard", "subset": indices_digest(list(frame.idx))},
        records=records,
        hparams_recorded=False,
        rounded_radii=rounded,
        norm=certified_norm,
        noise=noise,
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return read_json_object(path)
    except DamagedFileError as error:
        raise ReportError(str(error)) from None


def as_certified(overrides: Mapping[str, str], protocol: Mapping[str, Any]) -> dict[str, str]:
    """``overrides`` with each ``certify.<key>`` the run's ``certify_protocol.json`` records set to the recorded value.

    The protocol file is what the rows were certified under; ``.hydra/overrides.yaml`` is the first command's. They
    differ when a certification was resumed with a larger ``certify.max_images`` (a resume keeps the first
    command's config): such a run is the same setting as one certified to that size in one go.

    >>> as_certified({"certify.max_images": "100", "method.lbd": "5"}, {"max_images": 300})
    {'certify.max_images': '300', 'method.lbd': '5'}
    """
    recorded = {f"certify.{key}": canonical(value) for key, value in protocol.items()}
    return {key: recorded.get(key, value) for key, value in overrides.items()}


def _read_hydra(run: Path) -> dict[str, Any]:
    """The run's descriptive overrides (``key -> value``), group choices and config from ``.hydra/``, if there.

    Execution settings (:func:`~rsbench.runs.naming.execution_keys`: batch sizes, loader processes) are left out:
    runs differing only there sample the same distributions, so they are seeds of one setting.
    """
    hydra: dict[str, Any] = {"overrides": {}, "choices": {}, "config": None}
    overrides_file, config_file = run / ".hydra" / "overrides.yaml", run / ".hydra" / "config.yaml"
    hydra_file = run / ".hydra" / "hydra.yaml"
    if hydra_file.exists():
        runtime = (yaml.safe_load(hydra_file.read_text()) or {}).get("hydra", {}).get("runtime", {})
        hydra["choices"] = dict(runtime.get("choices") or {})
    if overrides_file.exists():
        execution = execution_keys()
        for override in yaml.safe_load(overrides_file.read_text()) or []:
            key, _, value = str(override).partition("=")
            key = override_key(key)
            if describes_setting(key, value) and key not in execution and not str(override).startswith("~"):
                hydra["overrides"][key] = canonical(override_value(str(override)))
    if config_file.exists():
        hydra["config"] = OmegaConf.load(config_file)
    return hydra


def _select(config: Any, key: str) -> Any:
    if config is None:
        return None
    try:
        return OmegaConf.select(config, key, default=None)
    except Exception:  # an interpolation only a live Hydra run can resolve
        return None
