"""Method cards (rsbench/methods/<name>_card.py): one per method, the facts the readers used to keep in tables.

The readers (importer, report, training tracking, DDRS's base methods, run names, resume, the checks before a run,
the method YAMLs' certification defaults) take every per-method fact from the cards; a toy card registered here is
picked up by each of them without any reader naming it.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from hydra.utils import get_object
from omegaconf import OmegaConf
from torch import nn

from rsbench.archs import Classifier
from rsbench.archs.input_layer import InputLayerKind as ArchsInputLayerKind
from rsbench.archs.registry import build_classifier
from rsbench.checkpoint import SIGNATURE_KEY
from rsbench.errors import ConfigError
from rsbench.importer.convert import IMPORT_KEY, DatasetFacts, import_checkpoint
from rsbench.importer.layouts import guess_origins, layout_of, origin_method
from rsbench.methods import card as registry
from rsbench.methods.card import CheckpointLayout, MethodCard, cards, find_card, method_card, origins
from rsbench.methods.catrs import CATRS
from rsbench.methods.ddrs import base_methods, data_dependent
from rsbench.report.load import read_cohen_tsv
from rsbench.report.training_tracking import authors_log_train_accuracy, track, train_loss_column
from rsbench.runs import precheck, resolvers
from rsbench.runs.naming import describes_setting, execution_keys, path_keys
from rsbench.runs.resume import free_keys
from tests.helpers import ROOT, compose_config

METHOD_CONFIGS = sorted(path.stem for path in (ROOT / "conf" / "method").glob("*.yaml"))


# ---------------------------------------------------------------------------------------------- the shipped cards


def test_every_method_config_has_a_card_whose_target_is_the_configs() -> None:
    assert [card.name for card in cards()] == METHOD_CONFIGS
    for card in cards():
        config = yaml.safe_load((ROOT / "conf" / "method" / f"{card.name}.yaml").read_text())
        assert get_object(card.target) is get_object(config["_target_"]), card.name
        method_name = getattr(get_object(card.target), "method_name", None)
        assert method_name in (card.name, None), card.name  # None: ddrs is a factory (its classes are ddrs_<base>)


def test_the_cards_load_without_torch_or_lightning() -> None:
    """The run layer reads the cards while Hydra composes a command line, before anything heavy is imported."""
    probe = (
        "import sys, json\n"
        "from rsbench.methods.card import cards\n"
        "from rsbench.runs import naming, precheck, resolvers\n"
        "names = [c.name for c in cards()]\n"
        "heavy = sorted(m for m in ('torch', 'pytorch_lightning', 'lightning', 'pandas', 'scipy') if m in sys.modules)"
        "\n"
        "print(json.dumps({'names': names, 'heavy': heavy}))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    seen = json.loads(result.stdout)
    assert seen == {"names": METHOD_CONFIGS, "heavy": []}


def test_the_cards_input_layer_kinds_are_the_architectures() -> None:
    assert typing.get_args(registry.InputLayerKind) == typing.get_args(ArchsInputLayerKind)


def test_what_the_readers_read_from_the_cards_is_what_their_tables_said() -> None:
    """The facts as they stood in the importer, report, training tracking, DDRS and run-layer tables before."""
    assert {origin: origin_method(origin) for origin in origins()} == {
        "cohen": "gaussian",
        "smoothadv": "smoothadv",
        "macer": "macer",
        "consistency": "consistency",
        "smoothmix": "smoothmix",
        "catrs": "catrs",
        "ddrs": "ddrs",
    }
    jeong = layout_of("consistency")
    assert jeong is not None
    assert layout_of("smoothmix") is jeong
    assert layout_of("catrs") is jeong
    assert jeong.input_layers["fashion_mnist"] == ("identity",)
    assert guess_origins({"net", "epoch"}) == ["macer"]
    assert set(guess_origins({"epoch", "arch", "state_dict", "optimizer"})) == {
        "catrs",
        "cohen",
        "consistency",
        "smoothadv",
        "smoothmix",
    }
    folders = {folder: card.name for card in cards() for folder in card.log_folders if folder != card.name}
    assert folders == {
        "cohen": "gaussian",
        "stab": "stability",
        "salman": "smoothadv",
        "cat-rs": "catrs",
        "ours": "sun2025",
    }
    assert {m: train_loss_column(m) for m in METHOD_CONFIGS if train_loss_column(m) != "train/loss_epoch"} == {
        "consistency": "train/cross_entropy",
        "stability": "train/cross_entropy",
        "catrs": "train/loss_low",
        "macer": "train/classification",
    }
    assert {m for m in METHOD_CONFIGS if not authors_log_train_accuracy(m)} == {"macer", "smoothmix"}
    assert sorted(base_methods()) == ["gaussian", "macer", "smoothadv"]
    assert {"method.teacher_ckpt", "method.teacher_cache_dir"} <= path_keys()
    assert "method.teacher_batch_size" in execution_keys()
    assert "method.teacher_batch_size" in free_keys()


def test_what_the_tables_and_lora_read_from_the_cards_is_what_their_tables_said() -> None:
    """The leaderboard's labels, the docs' methods table and LoRA's refusals as they stood in their own tables."""
    assert {card.name: card.shown_name for card in cards() if card.title} == {
        "gaussian": "Gaussian",
        "stability": "Stability",
        "smoothadv": "SmoothAdv",
        "macer": "MACER",
        "consistency": "Consistency",
        "smoothmix": "SmoothMix",
        "catrs": "CAT-RS",
        "sun2025": "Sun et al.'s training",
        "ddrs": "DDRS",
        "denoiser": "Denoised",
        "standard": "Standard",
    }
    assert registry.shown_name("router") == "router"
    assert registry.shown_name("no_such_method") == "no_such_method"
    assert {card.name: card.citation for card in registry.table_methods()} == {
        "gaussian": "Cohen et al., ICML 2019",
        "stability": "Li et al., NeurIPS 2019",
        "consistency": "Jeong and Shin, NeurIPS 2020",
        "macer": "Zhai et al., ICLR 2020",
        "smoothadv": "Salman et al., NeurIPS 2019",
        "smoothmix": "Jeong et al., NeurIPS 2021",
        "catrs": "Jeong, Kim and Shin, AAAI 2023",
        "sun2025": "Sun, Mao, Müller and Vechev, ICML 2025",
    }
    assert [card.name for card in registry.table_methods()][:3] == ["gaussian", "stability", "consistency"]
    assert {c.name: dict(c.published_sources) for c in cards() if c.published_sources} == {
        "catrs": {"mnist": "catrs2023_logs_mnist"},
        "sun2025": {"cifar10": "sun2025_logs_cifar10"},
    }
    assert {c.name: dict(c.published_variants) for c in cards() if c.published_variants} == {
        "smoothmix": {"mnist": "eta=5;one_step=false"}
    }
    assert {card.name for card in cards() if card.lora_refusal} == {"denoiser", "catrs"}


def test_two_cards_in_one_place_of_the_methods_table_are_refused(toy_card: MethodCard) -> None:
    clash = MethodCard(
        name="toy_clash",
        target="rsbench.methods.gaussian.GaussianAugmentation",
        paper="Clash et al., 2031",
        citation="Clash et al., 2031",
        methods_table=1,
    )
    registry.register(clash)
    try:
        with pytest.raises(ValueError, match="gaussian, toy_clash claim the same methods_table place 1"):
            registry.table_methods()
    finally:
        registry.unregister(clash.name)
    with pytest.raises(ValueError, match="methods_table must be a place >= 1 and needs a citation"):
        MethodCard(name="x", target="a.B", paper="p", methods_table=2)


@pytest.mark.parametrize(
    ("base", "samples", "objective"),
    [("gaussian", 1, "radius"), ("smoothadv", 1, "relu_radius"), ("macer", 8, "radius")],
)
def test_ddrs_takes_its_certification_defaults_from_its_card_and_its_bases(
    base: str, samples: int, objective: str
) -> None:
    """The values conf/method/ddrs.yaml's lookup tables gave (the DDRS paper's per base), now from the cards."""
    method = compose_config("method=ddrs", f"method.base={base}").method
    assert OmegaConf.to_container(method.certify_defaults, resolve=True) == {
        "sigma_samples": samples,
        "sigma_objective": objective,
    }
    assert (method.sigma_samples, method.sigma_objective) == (samples, objective)


def test_a_methods_config_takes_its_certification_defaults_from_its_card() -> None:
    for card in cards():
        if card.name == "ddrs":
            continue
        method = compose_config(f"method={card.name}").method
        stated = OmegaConf.to_container(method.certify_defaults, resolve=True) if "certify_defaults" in method else {}
        assert stated == dict(card.certify_defaults), card.name
    with pytest.raises(ConfigError, match="no certification default 'sigma_samples' in the method card of smoothadv"):
        resolvers.certify_default("sigma_samples", "smoothadv")


def test_a_declared_prerequisite_fills_a_checkpoint_argument_of_the_card() -> None:
    """CAT-RS's teacher: what prerequisites() fills is a checkpoint argument (checked to exist, not in run names)."""
    arguments = {p.argument for p in CATRS.prerequisites({"soft_label": "teacher"})}
    assert arguments == {"teacher_ckpt"}
    assert arguments <= set(method_card("catrs").checkpoint_arguments)


def test_a_card_is_checked_when_it_is_made_and_registered() -> None:
    with pytest.raises(ValueError, match="an origin and a checkpoint layout go together"):
        MethodCard(name="x", target="a.b", paper="p", origin="x")
    with pytest.raises(ValueError, match="is not an argument name"):
        MethodCard(name="x", target="a.b", paper="p", checkpoint_arguments=("method.teacher_ckpt",))
    with pytest.raises(ValueError, match="registered already"):
        registry.register(MethodCard(name="catrs", target="a.b", paper="p"))
    layout = method_card("gaussian").checkpoint_layout
    with pytest.raises(ValueError, match="origin 'cohen' is the origin of 'gaussian'"):
        registry.register(MethodCard(name="other", target="a.b", paper="p", origin="cohen", checkpoint_layout=layout))
    assert find_card("other") is None
    with pytest.raises(ConfigError, match=r"no method card for 'catr'; did you mean catrs\?"):
        method_card("catr")


# ------------------------------------------------------------------------------- a new method: only its own card


TOY_LAYOUT = CheckpointLayout(
    repository="someone/toy-smoothing",
    file_keys=frozenset({"toy_weights", "epoch"}),
    weights_key="toy_weights",
    arch_key=None,
    prefixes=("model.",),
    input_layers={"mnist_embedded": ("identity",)},
    default_archs={"mnist_embedded": "lenet"},
    notes=("toy's networks were trained with a toy loss",),
)
TOY = MethodCard(
    name="toy",
    target="rsbench.methods.gaussian.GaussianAugmentation",  # any method class: what matters is that no reader knows it
    paper="Toy et al., 2031",
    repository="someone/toy-smoothing",
    origin="toyrs",
    checkpoint_layout=TOY_LAYOUT,
    log_folders=("toy-rs",),
    train_loss_column="train/toy_term",
    logs_train_accuracy=False,
    certify_defaults={"sigma_samples": 3},
    checkpoint_arguments=("toy_teacher_ckpt",),
    path_arguments=("toy_cache",),
    execution_arguments=("toy_batch_size",),
    prerequisites="a toy teacher",
    ddrs_base=True,
)


@pytest.fixture
def toy_card() -> Iterator[MethodCard]:
    registry.register(TOY)
    try:
        yield TOY
    finally:
        registry.unregister(TOY.name)


def test_a_new_cards_released_checkpoints_import_with_its_origin(toy_card: MethodCard, tmp_path: Path) -> None:
    assert "toyrs" in origins()
    network = build_classifier("lenet", 10, {"kind": "identity"}, 1)[1]
    released = tmp_path / "toy.pth"
    torch.save({"epoch": 7, "toy_weights": {f"model.{k}": v for k, v in network.state_dict().items()}}, released)
    imported = import_checkpoint("toyrs", released, DatasetFacts("mnist_embedded", 10, 1), 0.5)
    assert imported[SIGNATURE_KEY]["method"] == "toy"
    record = imported[IMPORT_KEY]
    assert (record["repository"], record["epoch"]) == ("someone/toy-smoothing", 7)
    assert "toy's networks were trained with a toy loss" in record["notes"]
    assert guess_origins({"toy_weights", "epoch"}) == ["toyrs"]


def test_a_new_cards_released_logs_read_as_its_method(toy_card: MethodCard, tmp_path: Path) -> None:
    log = tmp_path / "data" / "mnist" / "noise_0.5" / "toy-rs" / "noise_0.5.tsv"
    log.parent.mkdir(parents=True)
    log.write_text("idx\tlabel\tpredict\tradius\tcorrect\ttime\n0\t3\t3\t0.5\t1\t0.1\n1\t2\t-1\t0.0\t0\t0.1\n")
    assert read_cohen_tsv(log).method == "toy"


def test_a_new_cards_training_log_is_compared_on_its_loss_column(toy_card: MethodCard, tmp_path: Path) -> None:
    rows = [
        {"epoch": 0, "step": 9, "train/acc": 0.5, "train/loss_epoch": 2.0, "train/toy_term": 1.5},
        {"epoch": 1, "step": 19, "train/acc": 0.6, "train/loss_epoch": 1.0, "train/toy_term": 0.5},
    ]
    (tmp_path / "logs").mkdir()
    pd.DataFrame(rows).to_csv(tmp_path / "logs" / "metrics.csv", index=False)
    theirs = pd.DataFrame(
        {
            "epoch": [0, 1],
            "lr": [0.01, 0.01],
            "train_loss": [1.25, 0.5],
            "train_acc": [0.0, 0.0],  # the toy authors' script writes none
            "test_loss": [1.0, 1.0],
            "test_acc": [60.0, 61.0],
        }
    )
    compared, summary = track(tmp_path, "toy", theirs)
    assert compared["d_train_loss"].tolist() == [0.25, 0.0]  # the toy term, not the whole loss
    assert math.isnan(summary.d_first)  # no train accuracy compared


def test_ddrs_wraps_a_new_card_that_says_ddrs_base(toy_card: MethodCard) -> None:
    assert base_methods()["toy"] == TOY.target
    classifier = Classifier("tiny", nn.Sequential(nn.Flatten(), nn.Linear(16, 3)), {"kind": "identity"})
    module = data_dependent("toy", sigma_iters=1, sigma_lr=0.01, net=classifier, sigma=0.5, optimizer=torch.optim.SGD)
    assert type(module).__name__ == "DataDependentGaussianAugmentation"
    assert resolvers.certify_default("sigma_samples", "ddrs", "toy") == 3


def test_the_run_layer_treats_a_new_cards_arguments_as_it_says(toy_card: MethodCard, tmp_path: Path) -> None:
    assert {"method.toy_teacher_ckpt", "method.toy_cache"} <= path_keys()
    assert not describes_setting("method.toy_teacher_ckpt", "teacher.ckpt")  # a path names no hyperparameter
    assert not describes_setting("method.toy_cache", "cache")
    assert "method.toy_batch_size" in execution_keys()
    assert "method.toy_batch_size" in free_keys()
    cfg = OmegaConf.create({"ckpt_path": None, "method": {"toy_teacher_ckpt": str(tmp_path / "missing.ckpt")}})
    with pytest.raises(ConfigError, match=r"method\.toy_teacher_ckpt='.*missing\.ckpt' is not a file"):
        precheck.check_training_files(cfg, "toy")
    precheck.check_training_files(cfg, "gaussian")  # another method's arguments are not its
