"""Runs are named after what they vary: sweep folders, W&B names, groups and tags; and a real sweep's report."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from rsbench.runs.naming import MAX_DIRNAME, describes_setting, execution_keys, job_dirname, legacy_job_dirname
from rsbench.runs.resolvers import register_resolvers
from rsbench.runs.resume import free_keys
from tests.helpers import ROOT, compose_config


def test_wandb_runs_are_named_grouped_and_tagged_by_their_overrides(tmp_path: Path) -> None:
    cfg = compose_config(
        "logger=wandb", "method=consistency", "method.lbd=5", "seed=1", "sigma=0.5", output_dir=tmp_path
    )
    wandb = cfg.logger.wandb
    assert wandb.name == "consistency-mnist_embedded-sigma0.5[method.lbd=5,seed=1]"
    assert wandb.group == "consistency-mnist_embedded-sigma0.5[method.lbd=5]"  # the seeds of one setting together
    assert list(wandb.tags) == ["consistency", "mnist_embedded", "sigma=0.5", "method.lbd=5", "seed=1"]
    assert wandb.config.method == "consistency"
    assert "method.lbd=5" in list(wandb.config.overrides)
    single = compose_config("logger=wandb", output_dir=tmp_path).logger.wandb
    assert (single.name, single.group) == ("gaussian-mnist_embedded-sigma0.25", "gaussian-mnist_embedded-sigma0.25")
    GlobalHydra.instance().clear()


def test_sweep_folders_leave_out_paths_and_stay_short() -> None:
    name = job_dirname(7, ["method=catrs", "method.teacher_ckpt=runs/t/best.ckpt", "logger=wandb", "sigma=1.0"])
    assert name == "7_method-catrs_sigma-1.0"
    long = job_dirname(0, [f"method.key{i}={'x' * 20}" for i in range(20)])
    assert len(long) <= MAX_DIRNAME
    assert long != job_dirname(0, [f"method.key{i}={'y' * 20}" for i in range(20)])  # the hash tells them apart
    assert job_dirname(3, []) == "3"


def test_sweep_folder_names_paste_back_into_an_override(tmp_path: Path) -> None:
    """No `=`, `,`, brackets, quotes or spaces: Hydra's grammar and a shell take `resume=<folder>` as typed."""
    overrides = [
        "certify.alpha=0.001,0.01",
        "scheduler.milestones=[31,61]",
        "method.label='a b'",
        "~method.lbd",
        "+trainer.extra=x:y",
    ]
    name = job_dirname(4, overrides)
    assert (
        name == "4_certify.alpha-0.001+0.01_method.label-a-b_scheduler.milestones-31+61_trainer.extra-x-y_no-method.lbd"
    )
    parser = OverridesParser.create()
    for value in (name, f"multirun/x/{name}/checkpoints/best.ckpt"):
        assert parser.parse_override(f"resume={value}").value() == value
        assert shlex.quote(value) == value


def test_a_sweep_started_with_the_older_names_continues_in_its_folders(tmp_path: Path) -> None:
    legacy = legacy_job_dirname(1, ["method=consistency", "seed=1"])
    assert legacy == "1_method=consistency,seed=1"
    (tmp_path / legacy).mkdir()
    assert job_dirname(1, ["seed=1", "method=consistency"], tmp_path) == legacy  # the job keeps its folder
    assert job_dirname(0, ["seed=0", "method=consistency"], tmp_path) == "0_method-consistency_seed-0"
    register_resolvers()  # hydra.sweep.subdir's resolver finds the sweep folder in the config it resolves
    cfg = OmegaConf.create(
        {
            "hydra": {"sweep": {"dir": str(tmp_path), "subdir": "${rs.job_dir:1,${task}}"}},
            "task": ["seed=1", "method=consistency"],
        }
    )
    assert cfg.hydra.sweep.subdir == legacy


@pytest.mark.slow  # 30-60 s on a quiet 2-core machine: make test-all
def test_a_seed_sweep_is_reported_with_its_seeds_and_as_a_wandb_table(tmp_path: Path) -> None:
    """The whole path: a real multirun (2 sigmas x 2 seeds, smoke scale), then the report over its folder."""
    sweep, env = tmp_path / "sweep", {**os.environ, "WANDB_MODE": "offline", "RSBENCH_KEEP_ALLOCATOR": "1"}
    overrides = ["experiment=smoke", "sigma=0.25,0.5", "seed=0,1", "logger=none", "trainer.enable_progress_bar=false"]
    subprocess.run(
        [sys.executable, "-m", "rsbench", "-m", *overrides, f"hydra.sweep.dir={sweep}"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == [
        "0_experiment-smoke_seed-0_sigma-0.25",
        "1_experiment-smoke_seed-1_sigma-0.25",
        "2_experiment-smoke_seed-0_sigma-0.5",
        "3_experiment-smoke_seed-1_sigma-0.5",
    ]
    metrics = json.loads(next(sweep.glob("0_*/metrics.json")).read_text())
    assert metrics["protocol"] == "rsbench"  # the training protocol group the run was composed with
    hparams = metrics["hparams"]
    assert hparams["steps_per_batch"] == 1  # the method's hyperparameters are recorded
    assert hparams["sigma"] == 0.25
    out = tmp_path / "report"
    report = subprocess.run(
        [sys.executable, "-m", "rsbench.report", str(sweep), "--out", str(out), "--radii", "0", "0.25", "--wandb"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    assert "## Results" in report.stdout
    assert "## Envelope over sigma" in report.stdout
    results = pd.read_csv(out / "results.csv")
    assert list(results["sigma"]) == [0.25, 0.5]
    assert list(results["seeds"]) == [2, 2]
    assert {p.name for p in out.glob("*.png")} == {"curves.png", "envelope.png", "pa_lower.png"}
    assert list(out.glob("wandb/offline-run-*/run-*.wandb"))  # the W&B run holding the tables


def test_what_a_resume_may_change_never_splits_a_setting_in_the_report() -> None:
    """A resumed run keeps its .hydra/overrides.yaml, so a key it may change on resume (free_keys) must not be a setting
    the report groups rows by: each is a path, a display option or an execution key; only certify.max_images (the
    report reads the images certified) and method.certify_defaults (the rows' protocol check guards it) are not."""
    setting = {key for key in free_keys() if describes_setting(key, "x") and key not in execution_keys()}
    assert setting == {"certify.max_images", "method.certify_defaults"}


# ------------------------------------------------------------------------------------- rsbench.certify's folders


def certify_run_dir(*overrides: str) -> str:
    """The run folder ``python -m rsbench.certify <overrides>`` would write into (``hydra.run.dir``, resolved)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose("certify_model", overrides=list(overrides), return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    folder = str(OmegaConf.select(cfg, "hydra.run.dir"))
    GlobalHydra.instance().clear()
    return folder.rsplit("/", 1)[0]  # without the time of the run


@pytest.mark.parametrize(
    ("overrides", "folder"),
    [
        (
            ["model.path=imported/cohen_cifar10_sigma0.25.ckpt", "dataset=cifar10"],
            "outputs/cifar10/certify_checkpoint-cohen_cifar10_sigma0.25",
        ),
        (
            ["model.path=outputs/mnist_embedded/catrs/sigma_0.5/2026-01-02_03-04-05/checkpoints/best.ckpt"],
            "outputs/mnist_embedded/certify_checkpoint-catrs_sigma_0.5_2026-01-02_03-04-05_best",
        ),
        (
            ["model.path=imported/cohen_cifar10_sigma0.25.ckpt", "dataset=cifar10", "certify.sigma=0.5"],
            "outputs/cifar10/certify_checkpoint-cohen_cifar10_sigma0.25-sigma0.5",
        ),
        (
            ["model=module", "model.network._target_=mypkg.nets.WideResNet", "model.weights=wrn28.pt", "model.sigma=1"],
            "outputs/mnist_embedded/certify_module-WideResNet-wrn28-sigma1",
        ),
        (
            ["model=ensemble", "model.members=[s0/checkpoints/best.ckpt,s1/checkpoints/best.ckpt,s2/x.ckpt]"],
            "outputs/mnist_embedded/certify_ensemble-3x-s0_best",
        ),
        (
            ["model=denoised", "model.denoiser_ckpt=den/dncnn.ckpt", "model.classifier.path=imported/clean.ckpt"],
            "outputs/mnist_embedded/certify_denoised-dncnn-clean",
        ),
        (
            ["model=torchvision", "model.name=resnet50", "model.weights=r50.pt"],
            "outputs/mnist_embedded/certify_torchvision-resnet50-r50",
        ),
        ([], "outputs/mnist_embedded/certify_checkpoint"),  # (refused before Hydra names a folder: model.path=?)
    ],
)
def test_a_certify_runs_folder_says_what_it_certified(overrides: list[str], folder: str) -> None:
    """It was outputs/<dataset>/certify_<model kind>/<time>: two models of one kind shared a folder."""
    assert certify_run_dir(*overrides) == folder


def test_certifications_of_different_models_never_share_a_folder() -> None:
    folders = {
        certify_run_dir(f"model.path={path}")
        for path in ("a/checkpoints/best.ckpt", "b/checkpoints/best.ckpt", "a/checkpoints/last.ckpt", "imported/c.ckpt")
    }
    assert len(folders) == 4
    long = certify_run_dir(f"model.path={'x' * 300}.ckpt")
    assert len(long.rsplit("/", 1)[1]) <= len("certify_checkpoint-") + 100  # cut, with a hash of the whole
