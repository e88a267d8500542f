"""Every config option composes and instantiates; recipes match the papers; bad input fails fast and clearly."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import torch
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate
from omegaconf import OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError

from rsbench.archs import Classifier
from rsbench.data import ImageDataModule
from rsbench.errors import ConfigError
from rsbench.methods import SmoothingModule
from rsbench.runs.certify_callback import CertifyCallback
from rsbench.runs.run import build_callbacks, build_loggers, check_config, run
from tests.helpers import CONF_DIR, ROOT


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def test_every_group_has_options() -> None:
    for group in ("dataset", "arch", "method", "certify", "trainer", "logger", "optimizer", "scheduler"):
        assert options(group), group


@pytest.mark.parametrize("dataset", options("dataset"))
def test_every_dataset_composes_and_builds_model_and_datamodule(make_cfg, dataset: str) -> None:
    cfg = make_cfg(f"dataset={dataset}")
    datamodule = instantiate(cfg.dataset)
    assert isinstance(datamodule, ImageDataModule)
    assert datamodule.name == dataset
    net = instantiate(cfg.arch)
    assert isinstance(net, Classifier)
    assert net.num_classes == cfg.dataset.num_classes
    assert net.input_layer.spec()["kind"] == cfg.dataset.input_layer.kind
    module = instantiate(cfg.method, net=net, optimizer=instantiate(cfg.optimizer))
    assert isinstance(module, SmoothingModule)
    assert module.sigma == cfg.sigma


# timm and hf need a network named (tests/models/test_pretrained_models.py builds them)
@pytest.mark.parametrize("arch", [name for name in options("arch") if name not in ("recipe", "timm", "hf")])
def test_every_arch_composes_on_a_matching_dataset(make_cfg, arch: str) -> None:
    dataset = {"lenet": "mnist", "resnet50": "imagenet"}.get(arch, "cifar10")
    cfg = make_cfg(f"dataset={dataset}", f"arch={arch}")
    net = instantiate(cfg.arch)
    assert net.arch == arch


@pytest.mark.parametrize(
    ("dataset", "arch"),
    [("mnist_embedded", "lenet"), ("mnist", "lenet"), ("cifar10", "cifar_resnet110"), ("imagenet", "resnet50")],
)
def test_default_arch_is_the_dataset_recipes(make_cfg, dataset: str, arch: str) -> None:
    cfg = make_cfg(f"dataset={dataset}")
    assert cfg.arch.arch == arch
    assert instantiate(cfg.arch).arch == arch


def test_ddrs_on_cifar10_gets_the_papers_recipe(make_cfg) -> None:
    cfg = make_cfg("method=ddrs", "method.base=gaussian", "dataset=cifar10", "sigma=0.5")
    assert cfg.arch.arch == "cifar_resnet18"
    assert instantiate(cfg.arch).arch == "cifar_resnet18"
    assert cfg.trainer.max_epochs == 200
    assert (cfg.optimizer.lr, cfg.optimizer.weight_decay, cfg.dataset.batch_size) == (0.01, 5e-4, 128)
    assert list(cfg.scheduler.milestones) == [30, 60, 90, 120, 150, 180]
    assert cfg.method.sigma_search_from_epoch == 50


def test_command_line_beats_a_methods_recipe(make_cfg) -> None:
    cfg = make_cfg("method=ddrs", "dataset=cifar10", "arch=cifar_resnet20", "trainer.max_epochs=3")
    assert cfg.arch.arch == "cifar_resnet20"
    assert cfg.trainer.max_epochs == 3
    assert make_cfg("method=gaussian", "dataset=cifar10").trainer.max_epochs == 150  # no recipe: the dataset's


@pytest.mark.parametrize("group", ["certify", "trainer", "logger", "optimizer", "scheduler", "method", "callbacks"])
def test_every_option_of_group_composes_and_instantiates(make_cfg, group: str) -> None:
    for option in options(group):
        if (group, option) == ("method", "denoiser"):
            continue  # needs a classifier checkpoint: tests/methods/test_denoiser.py instantiates it with one
        if group == "method" and option in ("router", "routed_expert"):
            continue  # need a table of python -m rsbench.dual: tests/methods/test_methods.py trains a step with one
        cfg = make_cfg(f"{group}={option}")
        if group == "logger":
            build_loggers(cfg)
        elif group in ("certify", "callbacks"):
            build_callbacks(cfg)
        elif group == "trainer" and option == "gpu":
            OmegaConf.to_container(cfg.trainer, resolve=True)  # no GPU in CI: compose only
        elif group == "trainer":
            instantiate(cfg.trainer, logger=False)
        elif group == "method":
            instantiate(cfg.method, net=instantiate(cfg.arch), optimizer=instantiate(cfg.optimizer))
        else:
            OmegaConf.to_container(cfg[group], resolve=True)


REQUIRED = {"ddrs_smoothadv_finetune_cifar10": ["init_ckpt=trained.ckpt"]}  # presets with a mandatory value (???)


@pytest.mark.parametrize("experiment", options("experiment"))
def test_every_experiment_preset_composes(make_cfg, experiment: str) -> None:
    cfg = make_cfg(f"experiment={experiment}", *REQUIRED.get(experiment, []))
    OmegaConf.to_container(cfg, resolve=True)


def test_the_catrs_smoke_run_labels_with_a_cheap_teacher(make_cfg) -> None:
    """Issue 21: experiment=smoke method=catrs spent an hour on the teacher's votes at the authors' N = 10,000."""
    assert make_cfg("experiment=smoke", "method=catrs", "sigma=0.5").method.teacher_num_samples == 16
    assert make_cfg("method=catrs", "sigma=0.5").method.teacher_num_samples == 10_000  # a real run: the authors' N
    given = make_cfg("experiment=smoke", "method=catrs", "method.teacher_num_samples=100")
    assert given.method.teacher_num_samples == 100  # the command line wins
    OmegaConf.to_container(make_cfg("experiment=smoke", "method=gaussian"), resolve=True)  # no such file: nothing


@pytest.mark.parametrize("sigma", ["0.12", "0.25", "0.5", "1.0"])
def test_sigma_is_a_top_level_float_written_as_is(make_cfg, sigma: str) -> None:
    cfg = make_cfg("method=gaussian", "dataset=cifar10", f"sigma={sigma}")
    assert cfg.sigma == float(sigma)
    assert cfg.method.sigma == float(sigma)


def test_cifar10_recipe(make_cfg) -> None:
    cfg = make_cfg("method=gaussian", "dataset=cifar10", "sigma=1.0")
    assert cfg.arch.arch == "cifar_resnet110"
    assert cfg.trainer.max_epochs == 150
    assert cfg.dataset.augmentation == "crop_flip"  # the schedule is checked against the authors' commands
    assert cfg.dataset.input_layer.kind == "normalize"
    assert (cfg.certify.n0, cfg.certify.n, cfg.certify.alpha) == (100, 100_000, 0.001)


def test_mnist_recipe(make_cfg) -> None:
    cfg = make_cfg("dataset=mnist")
    assert cfg.arch.arch == "lenet"
    assert cfg.dataset.input_layer.kind == "identity"
    assert (cfg.certify.n0, cfg.certify.n, cfg.certify.alpha) == (100, 100_000, 0.001)


def test_imagenet_recipe(make_cfg) -> None:
    cfg = make_cfg("dataset=imagenet")
    assert cfg.arch.arch == "resnet50"
    assert list(cfg.dataset.image_shape) == [3, 224, 224]
    assert cfg.dataset.augmentation == "imagenet"
    assert cfg.certify.skip == 100  # every 100th of the 50,000 validation images: 500 images


def test_default_is_the_embedded_offline_recipe(make_cfg) -> None:
    cfg = make_cfg()
    assert cfg.dataset.name == "mnist_embedded"
    assert cfg.arch.arch == "lenet"
    assert cfg.sigma == 0.25
    assert cfg.dataset.download is False


def test_command_line_choice_beats_the_dataset_recipe(make_cfg) -> None:
    cfg = make_cfg("dataset=cifar10", "arch=cifar_resnet20", "trainer.max_epochs=3", "certify=quick")
    assert cfg.arch.arch == "cifar_resnet20"
    assert cfg.trainer.max_epochs == 3
    assert cfg.certify.n == 10_000


def test_cfg_job_shows_the_recipe() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rsbench", "method=gaussian", "dataset=cifar10", "sigma=1.0", "--cfg", "job"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "RSBENCH_KEEP_ALLOCATOR": "1"},
    )
    job = OmegaConf.create(result.stdout)
    assert job.sigma == 1.0
    assert job.arch.arch == "cifar_resnet110"
    assert job.trainer.max_epochs == 150
    assert job.certify.n == 100_000


def test_unknown_method_lists_the_available_ones(make_cfg) -> None:
    with pytest.raises(ConfigCompositionException, match="gaussian"):
        make_cfg("method=does_not_exist")


def test_unknown_dataset_lists_the_available_ones(make_cfg) -> None:
    with pytest.raises(ConfigCompositionException, match="cifar10"):
        make_cfg("dataset=does_not_exist")


def test_unknown_key_is_rejected(make_cfg) -> None:
    with pytest.raises(ConfigCompositionException, match="nn"):
        make_cfg("certify.nn=5")


@pytest.mark.parametrize("sigma", ["0", "-0.5", "abc"])
def test_bad_sigma_fails_before_any_work(make_cfg, sigma: str) -> None:
    cfg = make_cfg(f"sigma={sigma}")
    with pytest.raises(ConfigError, match="sigma must be"):
        run(cfg)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("certify.n=0", "certify.n must be an integer >= 1, got 0"),
        ("certify.n0=-3", "certify.n0 must be an integer >= 1, got -3"),
        ("certify.alpha=1.5", "alpha must be in \\(0, 1\\)"),
        ("certify.skip=0", "certify.skip must be >= 1, got 0"),
        ("certify.max_images=0", "certify.max_images must be >= 1"),
    ],
)
def test_bad_certify_values_fail_when_callbacks_are_built(make_cfg, override: str, message: str) -> None:
    cfg = make_cfg(override)
    with pytest.raises(ConfigError, match=message):
        build_callbacks(cfg)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["certify.n=abc"], r"Value 'abc' of type 'str' could not be converted to Integer"),
        (["experiment=smoke", "certify.mode=sequential", "certify.growth=fast"], r"could not be converted to Float"),
    ],
)
def test_a_mistyped_certify_value_fails_when_the_config_is_composed(make_cfg, overrides, message) -> None:
    with pytest.raises(ConfigCompositionException) as refused:
        make_cfg(*overrides)
    printed = f"{refused.value}\n{refused.value.__cause__}"  # what Hydra prints: its line, then OmegaConf's
    assert re.search(message, printed), printed
    assert f"full_key: certify.{overrides[-1].split('=')[0].split('.')[-1]}" in printed


def test_an_unknown_certify_key_in_a_yaml_fails_when_composed_naming_it(make_cfg, tmp_path) -> None:
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "typo.yaml").write_text("# @package _global_\ncertify:\n  nn: 5\n")
    with pytest.raises(ConfigCompositionException) as refused:
        make_cfg(f"hydra.searchpath=[file://{tmp_path}]", "experiment=typo")
    printed = f"{refused.value}\n{refused.value.__cause__}"
    assert "Key 'nn' not in 'CertifyConfig'" in printed
    assert "full_key: certify.nn" in printed


def test_an_appended_certify_key_is_refused_naming_the_allowed_ones(make_cfg) -> None:
    with pytest.raises(ConfigError, match=r"unknown certify keys \['nn'\]; allowed: \[.*'n0'.*'sigma_mode'"):
        build_callbacks(make_cfg("+certify.nn=5"))


def test_every_certify_setting_is_a_schema_field_and_a_key_of_the_default_yaml(make_cfg) -> None:
    from dataclasses import fields

    from rsbench.certify.pipeline.settings import CHOICES, KEYS, SWITCHES, CertifyConfig

    names = {f.name for f in fields(CertifyConfig)}
    assert names == {*KEYS, *CHOICES, *SWITCHES}
    assert set(make_cfg().certify) == names  # conf/certify/default.yaml sets each one (and nothing else)


def test_teachers_go_under_outputs_not_into_the_working_directory(make_cfg, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21: method=catrs wrote teachers/ into the current folder (a sweep's jobs: the sweep folder's)."""
    monkeypatch.delenv("RSBENCH_PREREQUISITE_DIR", raising=False)
    assert make_cfg().prerequisite_dir == "outputs"  # CAT-RS's teachers in outputs/teachers (its card's folder)
    monkeypatch.setenv("RSBENCH_PREREQUISITE_DIR", "/shared")
    assert make_cfg().prerequisite_dir == "/shared"


def test_a_gpu_trainer_on_a_machine_without_one_says_so(make_cfg, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21: trainer=gpu on a CPU machine ended in Lightning's ``No supported gpu backend found!``."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(
        ConfigError,
        match=r"trainer.accelerator=gpu \(trainer=gpu\) needs a GPU, and this machine has none.*trainer=cpu",
    ):
        check_config(make_cfg("trainer=gpu"))
    check_config(make_cfg("trainer=default"))  # accelerator auto: the CPU here


def test_train_false_needs_a_checkpoint(make_cfg) -> None:
    with pytest.raises(ConfigError, match="ckpt_path"):
        check_config(make_cfg("train=false"))


def test_missing_checkpoint_file_is_named(make_cfg, tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.ckpt"):
        check_config(make_cfg("train=false", f"ckpt_path={tmp_path}/nope.ckpt"))


def test_bad_test_ckpt_choice(make_cfg) -> None:
    with pytest.raises(ConfigError, match="'best' or 'last'"):
        check_config(make_cfg("test_ckpt=first"))


def test_config_is_struct(make_cfg) -> None:
    cfg = make_cfg()
    with pytest.raises((ConfigAttributeError, ConfigKeyError)):
        cfg.certify.nn = 1  # a typo'd key must not be silently accepted


def test_slurm_launcher_preset_composes() -> None:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = compose("config", overrides=["hydra/launcher=slurm"], return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert (launcher.gpus_per_node, launcher.tasks_per_node, launcher.timeout_min) == (1, 1, 2880)
    GlobalHydra.instance().clear()


@pytest.mark.slow
def test_local_jobs_launcher_runs_a_sweep_as_separate_jobs(tmp_path) -> None:
    sweep = tmp_path / "sweep"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rsbench",
            "-m",
            "hydra/launcher=local_jobs",
            "experiment=smoke",
            "sigma=0.25,0.5",
            "logger=none",
            "trainer.enable_progress_bar=false",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={**os.environ, "RSBENCH_KEEP_ALLOCATOR": "1"},
    )
    sigmas = sorted(json.loads(path.read_text())["sigma"] for path in sweep.glob("*/metrics.json"))
    assert sigmas == [0.25, 0.5]


def test_authors_protocol_trains_on_every_image_and_certifies_the_last_epoch(make_cfg) -> None:
    rsbench = make_cfg("dataset=cifar10")
    authors = make_cfg("dataset=cifar10", "protocol=authors")
    assert (rsbench.dataset.val_size, rsbench.test_ckpt, rsbench.callbacks.model_checkpoint.monitor) == (
        1000,
        "best",
        "val/acc_noisy",
    )
    assert (authors.dataset.val_size, authors.test_ckpt, authors.callbacks.model_checkpoint) == (0, "last", None)
    assert authors.callbacks.last_checkpoint.filename == "last"
    assert (rsbench.protocol_name, authors.protocol_name) == ("rsbench", "authors")  # -> metrics.json
    (callback,) = [c for c in build_callbacks(authors) if isinstance(c, CertifyCallback)]
    assert callback.run_protocol == "authors"


@pytest.mark.parametrize("experiment", ["cohen2019_cifar10", "cohen2019_imagenet"])
def test_cohen_et_al_s_protocol_by_name_is_their_protocol(make_cfg, experiment: str) -> None:
    """Cohen et al.'s train.py trained on every training image and certified the last epoch: the preset says so."""
    cfg = make_cfg(f"experiment={experiment}")
    assert (cfg.protocol_name, cfg.dataset.val_size, cfg.test_ckpt) == ("authors", 0, "last")
