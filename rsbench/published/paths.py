"""What the path of a released certification log says, per repository: the rules the importer reads logs with.

Every repository that released per-image certification logs lays them out its own way (Cohen et al.'s
``<arch>/noise_<trained>/test/sigma_<certified>``, the Jeong lineage's ``<method>/<hyperparameters>/noise_<s>_<run>``,
Salman et al.'s ``<attack>_<steps>/<m>-multitrain/eps_<e>``, ...). :func:`parse` turns a path of one of the repositories
listed in ``released/sources.yaml`` into what the log certifies, in rsbench's names, or None for a file that is not a
certification log of the test set of a dataset the leaderboard covers (the reason is in :data:`LEFT_OUT`).

Hyperparameters are written with rsbench's names (``conf/method/<method>.yaml``) where the method has them, as
``key=value;...``; ``setting`` keeps the authors' own name of the configuration (their folder), which is what their
papers and scripts call it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath, PurePosixPath

from rsbench.methods.card import method_of_log_folder
from rsbench.runs.datasets import dataset_info

CIFAR_ARCHS = {  # the authors' folder names of architectures (any other name is rsbench's own)
    "resnet110": "cifar_resnet110",
    "cifar_resnet110": "cifar_resnet110",
    "cifar_resnet20": "cifar_resnet20",
    "cifar_densenet40": "cifar_densenet40",
}
LEFT_OUT = {
    "catrs2023": "data/cifar10c, data/mnistc (corrupted test sets: another threat model), data/cifar100 (CIFAR-100)",
    "cohen2019": "data/predict (PREDICT, not CERTIFY)",
    "salman2019": (
        "data/certify/<everything but best_models> (2,600 logs of their hyperparameter sweeps; best_models holds the "
        "configurations of their tables); three empty best_models logs (imagenet/PGD_1step/eps_2048)"
    ),
    "jeong2020": "data/certify/cifar10/salman/pgd_512.0_10_10/num_2/cifar_densenet40/noise_0.50_1149 (9 images; "
    "noise_0.50_1149_o beside it is the whole run); the *_acc files (certified accuracy curves, not per image)",
    "jeong2021": "the *_acc files; logs byte-identical to jh-jeong/smoothing-consistency's (listed there)",
    "sun2025": "data/ecdf (curves, not per image)",
}


@dataclass(frozen=True)
class Parsed:
    """What a log certifies, read from its path.

    Attributes:
        method: rsbench's method name (where a folder names it, the method whose card lists that folder in its
            ``log_folders``: ``cat-rs`` is catrs, Sun et al.'s ``ours`` sun2025).
        dataset, arch: rsbench's names.
        sigma: the noise level the log certifies at.
        trained_sigma: the noise level the model was trained at (differs from ``sigma`` in Cohen et al.'s
            mismatched-noise logs).
        setting: the authors' name of the configuration (their folder path), "" for a method's one configuration.
        hparams: the configuration in rsbench's hyperparameter names, ``key=value;...`` ("" when none).
        seed: the run's id where a setting has several runs (the authors' run folder or suffix), else "".
        training: the training data.
        variant: hyperparameters a rsbench row must have to be paired with the log by ``python -m rsbench.report
            --against-released`` (``one_step=true``), as in the CAT-RS index.
        split: ``test``, or ``train`` for a log certified on training images.
    """

    method: str
    dataset: str
    arch: str
    sigma: float
    trained_sigma: float
    setting: str = ""
    hparams: str = ""
    seed: str = ""
    training: str = ""
    variant: str = ""
    split: str = "test"


def parse(source: str, path: str) -> Parsed | None:
    """The log at ``path`` in the repository of ``source`` (a key of ``released/sources.yaml``), or None.

    >>> parse("cohen2019", "data/certify/cifar10/resnet110/noise_0.25/test/sigma_0.50").trained_sigma
    0.25
    >>> parse("jeong2020", "data/certify/mnist/stab/lbd_2/noise_0.5_1297").hparams
    'lbd=2'
    >>> parse("catrs2023", "data/cifar10c/severity_1/cohen/noise_0.25.tsv") is None
    True
    """
    return _PARSERS[source](path)


def _catrs(path: str) -> Parsed | None:
    parts = path.split("/")
    folders = {"cifar10": "cifar10", "mnist": "mnist", "fmnist": "fashion_mnist"}
    if path == "data/imagenet/noise_1.0.tsv":
        return Parsed("catrs", "imagenet", "resnet50", 1.0, 1.0, training=dataset_info("imagenet").training_set)
    if not path.endswith(".tsv") or len(parts) < 4 or parts[0] != "data" or parts[1] not in folders:
        return None
    dataset, sigma = folders[parts[1]], float(parts[2].removeprefix("noise_"))
    # data/<dataset>/noise_<s>/<folder>/: the method whose card lists the folder; data/mnist/noise_s/noise_s.tsv: CAT-RS
    # (App. C)
    method = method_of_log_folder(parts[3]) if len(parts) == 5 else "catrs"
    variant = ""
    if method == "smoothmix" and dataset == "cifar10":
        # CAT-RS EXPERIMENTS.MD: SmoothMix's released CIFAR-10 models use the one-step adversary at sigma 0.5 and 1.0;
        # nothing states the variant of the Fashion-MNIST logs, so they match either.
        variant = f"one_step={'false' if sigma == 0.25 else 'true'}"
    return Parsed(
        method,
        dataset,
        dataset_info(dataset).arch,
        sigma,
        sigma,
        training=dataset_info(dataset).training_set,
        variant=variant,
    )


@dataclass(frozen=True)
class CohenLayout:
    """What the folders of Cohen et al.'s released logs say: ``<arch>/noise_<trained>/<split>/sigma_<certified>``."""

    method: str
    arch: str
    trained_sigma: float | None
    split: str = "test"


def cohen_layout(path: PurePath) -> CohenLayout | None:
    """Cohen et al.'s log layout (locuslab/smoothing ``data/certify/cifar10/resnet110/noise_0.25/test/sigma_0.50``).

    The file is named ``sigma_<s>`` (the certification sigma) in a ``test`` or ``train`` folder under
    ``noise_<s>`` (the training sigma) under the architecture; the method is Gaussian augmentation. None for any
    other layout. The one reader of this layout: for a log of the repository (:func:`parse`) and for a file a user
    gives the report (:func:`rsbench.report.load.read_cohen_tsv`).

    >>> cohen_layout(PurePath("cifar10/resnet110/noise_0.25/test/sigma_0.50"))
    CohenLayout(method='gaussian', arch='cifar_resnet110', trained_sigma=0.25, split='test')
    >>> cohen_layout(PurePath("data/fmnist/noise_0.25/cohen/noise_0.25.tsv")) is None
    True
    """
    parts = path.parts
    if len(parts) < 4 or not parts[-1].startswith("sigma_") or parts[-2] not in ("test", "train"):
        return None
    trained = re.fullmatch(r"noise_(\d+(?:\.\d+)?)", parts[-3])
    if trained is None:
        return None
    return CohenLayout("gaussian", CIFAR_ARCHS.get(parts[-4], parts[-4]), float(trained.group(1)), parts[-2])


def _cohen(path: str) -> Parsed | None:
    """A log of locuslab/smoothing: which paths are logs (CERTIFY folders), read by :func:`cohen_layout`."""
    match = re.fullmatch(r"data/certify/(cifar10|imagenet)/\w+/noise_[\d.]+/(?:test|train)/sigma_([\d.]+)", path)
    layout = cohen_layout(PurePosixPath(path)) if match else None
    if match is None or layout is None or layout.trained_sigma is None:
        return None
    dataset, sigma = match.groups()
    return Parsed(
        layout.method,
        dataset,
        layout.arch,
        float(sigma),
        layout.trained_sigma,
        training=dataset_info(dataset).training_set,
        split=layout.split,
    )


PRETRAINED = "CIFAR-10 training set, fine-tuned for 30 epochs from a SmoothAdv model trained on ImageNet32"
SELF_TRAINED = "CIFAR-10 training set + 500K pseudo-labelled 80M Tiny Images (self-training, Carmon et al. 2019)"


def _salman(path: str) -> Parsed | None:
    match = re.fullmatch(
        r"data/certify/best_models/(cifar10|imagenet)/(.+)/(resnet110|resnet50)/noise_([\d.]+)/test/sigma_([\d.]+)",
        path,
    )
    if match is None:
        return None
    dataset, middle, arch, trained, sigma = match.groups()
    arch = CIFAR_ARCHS.get(arch, arch)
    training = dataset_info(dataset).training_set
    if middle in ("cohen", "replication"):
        return Parsed("gaussian", dataset, arch, float(sigma), float(trained), setting=middle, training=training)
    group, _, setting = middle.partition("/")
    if dataset == "cifar10":  # ours/cifar10/<setting>/cifar10, ours_pretraining/cifar10/<setting>/cifar10, ...
        setting = setting.removeprefix("cifar10/").removesuffix("/cifar10")
        training = {
            "ours": training,
            "ours_pretraining": PRETRAINED,
            "ours_selftraining": SELF_TRAINED,
            "ours_pretraining_selftraining": f"{PRETRAINED}; + self-training on 500K 80M Tiny Images",
        }[group]
    else:
        setting = middle
    return Parsed(
        "smoothadv",
        dataset,
        arch,
        float(sigma),
        float(trained),
        setting=setting,
        hparams=_smoothadv_hparams(setting),
        training=training,
    )


def _smoothadv_hparams(setting: str) -> str:
    """rsbench's SmoothAdv hyperparameters from Salman et al.'s folder names (``PGD_10steps.../4-multitrain/eps_255``).

    >>> _smoothadv_hparams("PGD_10steps_multiNoiseSamples/4-multitrain/eps_255")
    'attack=pgd;num_steps=10;num_noise=4;epsilon=1'
    >>> _smoothadv_hparams("PGD_1step/eps_512")
    'attack=pgd;num_steps=1;num_noise=1;epsilon=2.00784'
    """
    attack = re.search(r"(PGD|DDN)_(\d+)steps?", setting)
    noise = re.search(r"(\d+)-multi", setting)
    epsilon = re.search(r"(?:^|/)eps_(\d+)", setting)  # not the "eps_30" of "DDN_2steps_30epochs"
    pairs = []
    if attack:
        pairs += [f"attack={attack.group(1).lower()}", f"num_steps={attack.group(2)}"]
    pairs.append(f"num_noise={noise.group(1) if noise else 1}")
    if epsilon:
        pairs.append(f"epsilon={int(epsilon.group(1)) / 255:.6g}")
    return ";".join(pairs)


def _jeong2020(path: str) -> Parsed | None:
    match = re.fullmatch(r"data/certify/(cifar10|mnist|imagenet)/(.+)/noise_([\d.]+)(?:_(\d+))?(_o)?", path)
    if match is None:
        return None
    dataset, middle, sigma_text, run, _ = match.groups()
    parts = middle.split("/")
    arch = dataset_info(dataset).arch
    if parts[-1] in CIFAR_ARCHS:
        arch = CIFAR_ARCHS[parts.pop()]
    folder, config = parts[0], parts[1:]
    values = dict(part.split("_", 1) for part in config if "_" in part)  # num_2 -> num: 2, lbd_10.0 -> lbd: 10.0
    method, pairs = folder, []
    if folder == "cohen":
        method = "gaussian"
    elif folder == "stab":
        method, pairs = "stability", [f"lbd={_number(values['lbd'])}"]
    elif folder in ("macer", "macer_deferred30"):
        method = "macer"
        pairs = [
            f"num_noise={values['num']}",
            f"lbd={_number(values['lbd'])}",
            f"gamma={_number(values['gamma'])}",
            f"beta={_number(values['beta'])}",
            f"lbd_schedule={'deferred' if folder == 'macer_deferred30' else 'constant'}",
        ]
    elif folder == "salman":
        epsilon, steps, _ = config[0].removeprefix("pgd_").split("_")
        method = "smoothadv"
        pairs = [
            "attack=pgd",
            f"num_steps={steps}",
            f"num_noise={values['num']}",
            f"epsilon={float(epsilon) / 255:.6g}",
        ]
    elif folder == "consistency":
        base = config[0]
        pairs = [f"num_noise={values['num']}", f"lbd={_number(values['lbd'])}", f"eta={_number(values['eta'])}"]
        if base.startswith("salman_"):
            epsilon, steps, _ = base.removeprefix("salman_").split("_")
            pairs += ["adversarial=true", f"epsilon={float(epsilon) / 255:.6g}", f"num_steps={steps}"]
    else:
        return None
    return Parsed(
        method,
        dataset,
        arch,
        float(sigma_text),
        float(sigma_text),
        setting="/".join(config),
        hparams=";".join(pairs),
        seed=run or "",
        training=dataset_info(dataset).training_set,
    )


def _jeong2021(path: str) -> Parsed | None:
    match = re.fullmatch(r"data/certify/cifar10/smoothmix/noise_([\d.]+)(_adv)?", path)
    if match:
        level, one_step = float(match.group(1)), match.group(2) is not None
        step = {0.25: 0.5, 0.5: 1.0, 1.0: 2.0}[level]  # EXPERIMENTS.MD: --alpha 0.5 / 1.0 / 2.0, --num-steps 4, m = 2
        hparams = f"eta=5;num_noise=2;num_steps=4;alpha={step:g};one_step={str(one_step).lower()}"
        return Parsed(
            "smoothmix",
            "cifar10",
            "cifar_resnet110",
            level,
            level,
            setting=f"smix_{step:g}_4_m{int(one_step)}/eta_5.0/num_2",
            hparams=hparams,
            training=dataset_info("cifar10").training_set,
            variant=f"one_step={str(one_step).lower()}",
        )
    match = re.fullmatch(
        r"data/certify/(mnist/smoothmix|ablation/\w+)/smix_([\d.]+)_(\d+)_m(\d)(_max[\d.]+)?/tau_([\d.]+)/num_(\d+)/"
        r"(\d+)/noise_([\d.]+)",
        path,
    )
    if match is None:
        return None
    folder, alpha, steps, mix_step, restriction, eta, num, run, sigma = match.groups()
    hparams = f"eta={_number(eta)};num_noise={num};num_steps={steps};alpha={_number(alpha)};one_step="
    hparams += "true" if mix_step == "1" else "false"
    if restriction:
        hparams += f";mix_epsilon={_number(restriction.removeprefix('_max'))}"
    setting = f"smix_{alpha}_{steps}_m{mix_step}{restriction or ''}/tau_{eta}/num_{num}"
    if folder.startswith("ablation/"):
        setting = f"{folder}/{setting}"
    return Parsed(
        "smoothmix",
        "mnist",
        "lenet",
        float(sigma),
        float(sigma),
        setting=setting,
        hparams=hparams,
        seed=run,
        training=dataset_info("mnist").training_set,
        variant=f"one_step={'true' if mix_step == '1' else 'false'}",
    )


def _sun(path: str) -> Parsed | None:
    match = re.fullmatch(r"data/certify/(cifar10|imagenet)/(\w+)/noise_([\d.]+?)(?:\.tsv)?", path)
    if match:
        dataset, folder, sigma = match.groups()
        method = method_of_log_folder(folder)  # "ours": sun2025; the other folders are rsbench's names
        return Parsed(
            method,
            dataset,
            dataset_info(dataset).arch,
            float(sigma),
            float(sigma),
            training=dataset_info(dataset).training_set,
        )
    match = re.fullmatch(r"test/certify/(cifar10|imagenet)/(.+)/(\d+)/noise_([\d.]+?)\.tsv", path)
    if match:
        dataset, setting, run, sigma = match.groups()
        return Parsed(
            "sun2025",
            dataset,
            dataset_info(dataset).arch,
            float(sigma),
            float(sigma),
            setting=setting,
            hparams=_sun_hparams(setting),
            seed=run,
            training=dataset_info(dataset).training_set,
        )
    return None


def _sun_hparams(setting: str) -> str:
    """Sun et al.'s training flags from their folder names.

    Their script/*/train_*.sh: ``--epsilon 0.25 --attack_steps 3 --attacker pgd_radius_l2 --ds_epoch 60
    --ds_threshold 0.5 --num-noise-vec 4 --dataset_weight_epoch 10``.

    >>> _sun_hparams("0.25_3_pgd_radius_l2/ds_60_0.5/num_4/dataset_weight_10")
    'attack=pgd_radius_l2;num_steps=3;epsilon=0.25;num_noise=4;ds_epoch=60;ds_threshold=0.5;dataset_weight_epoch=10'
    """
    pairs = []
    attack = re.match(r"([\d.]+)_(\d+)_(\w+?)(?:/|$)", setting)
    if attack:
        pairs += [f"attack={attack.group(3)}", f"num_steps={attack.group(2)}", f"epsilon={_number(attack.group(1))}"]
    noise = re.search(r"num_(\d+)", setting)
    if noise:
        pairs.append(f"num_noise={noise.group(1)}")
    discard = re.search(r"ds_(\d+)_([\d.]+)", setting)
    if discard:
        pairs += [f"ds_epoch={discard.group(1)}", f"ds_threshold={_number(discard.group(2))}"]
    weight = re.search(r"dataset_weight_(\d+)", setting)
    if weight:
        pairs.append(f"dataset_weight_epoch={weight.group(1)}")
    return ";".join(pairs)


def _number(text: str) -> str:
    """``"10.0"`` as ``"10"``, ``"0.5"`` as ``"0.5"``: the way rsbench writes hyperparameters."""
    return f"{float(text):g}"


_PARSERS = {
    "catrs2023": _catrs,
    "cohen2019": _cohen,
    "salman2019": _salman,
    "jeong2020": _jeong2020,
    "jeong2021": _jeong2021,
    "sun2025": _sun,
}
