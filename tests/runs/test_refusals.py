"""What a new user trips on, refused at once: one ``rsbench: error:`` line, before torch or Lightning is imported.

Each command runs as ``python -m`` does (``runpy``) in a child process, which then lists the heavy modules it had
loaded: a refusal that imported torch first took 5-17 s on a 2-core machine, one that did not takes a fraction of a
second. No timing is asserted (it depends on the machine); what was imported is.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rsbench.errors import ConfigError
from rsbench.models import builders
from rsbench.models.files import MODEL_FILES
from rsbench.runs import precheck
from rsbench.runs.datasets import dataset_info, datasets
from rsbench.runs.lock import RunLock
from tests.helpers import HEAVY, ROOT, compose_config, environment

MORE_HEAVY = ("lightning", "lightning_fabric", "matplotlib")


def run_module(module: str, *args: str, cwd: Path) -> dict[str, object]:
    """``python -m <module> <args>`` in a child; its exit code, error lines, other stderr and heavy modules loaded."""
    script = (
        "import json, runpy, sys\n"
        f"sys.argv = [{module!r}, *{list(args)!r}]\n"
        "code = 0\n"
        "try:\n"
        f"    runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"
        "except SystemExit as stop:\n"
        "    code = stop.code\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules if m.split('.')[0] in {(*HEAVY, *MORE_HEAVY)!r}}})\n"
        "print(json.dumps({'code': code, 'heavy': heavy}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=cwd, env=environment(), capture_output=True, text=True, timeout=600
    )
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    seen["errors"] = [line for line in result.stderr.splitlines() if line.startswith("rsbench: error:")]
    seen["traceback"] = "Traceback" in result.stderr or "MissingMandatoryValue" in result.stderr
    return seen


def assert_refused_at_once(seen: dict[str, object], message: str) -> None:
    errors = seen["errors"]
    assert isinstance(errors, list)
    assert len(errors) == 1, seen
    assert message in errors[0], errors[0]
    assert seen["code"] == 2
    assert not seen["traceback"]
    assert seen["heavy"] == [], f"imported {seen['heavy']} before refusing"


# ----------------------------------------------------------------------------------------- required values unset


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "model=checkpoint leaves a required value unset: model.path (the .ckpt file:"),
        (
            ("model=module", "model.network._target_=torch.nn.Flatten", "model.sigma=0.25"),
            "model=module leaves a required value unset: model.input_layer.kind (normalize (mean, std), center (mean) "
            "or identity); set each on the command line (model.input_layer.kind=<value>)",
        ),
        (("model=module",), "model.network._target_ (the class (or factory) of the network;"),
    ],
)
def test_a_required_value_left_unset_is_named_in_one_line(args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    """Bare ``python -m rsbench.certify`` and ``model=module`` ended in a 30-line MissingMandatoryValue traceback."""
    assert_refused_at_once(run_module("rsbench.certify", *args, cwd=tmp_path), message)
    assert list(tmp_path.iterdir()) == []


def test_a_methods_required_value_is_named_too(tmp_path: Path) -> None:
    seen = run_module("rsbench", "method=denoiser", cwd=tmp_path)
    assert_refused_at_once(seen, "method=denoiser leaves a required value unset: method.classifier_ckpt (the frozen")
    seen = run_module("rsbench", "experiment=ddrs_smoothadv_finetune_cifar10", cwd=tmp_path)
    assert_refused_at_once(seen, "experiment=ddrs_smoothadv_finetune_cifar10 leaves a required value unset: init_ckpt")


# ---------------------------------------------------------------------------------- refused before heavy imports


@pytest.mark.parametrize(
    ("module", "args", "message"),
    [
        ("rsbench", ("certify.n=0",), "certify.n must be an integer >= 1, got 0"),
        (
            "rsbench",
            ("certify.start=500",),
            "certify.start=500 selects no test image: the mnist_embedded test split has 500 images",
        ),
        ("rsbench", ("ckpt_path=missing.ckpt",), "ckpt_path='missing.ckpt' is not a file"),
        (
            "rsbench",
            ("train_layout=nhwc",),
            "train_layout='nhwc' is not a training memory layout: use one of contiguous, channels_last, auto",
        ),
        ("rsbench", ("method=catrs", "method.teacher_ckpt=t.ckpt"), "method.teacher_ckpt='t.ckpt' is not a file"),
        (
            "rsbench",
            ("method=sun2025",),  # ds_epoch 60 of the default 20 epochs: every checkpoint would be Gaussian training
            "method=sun2025 is itself from epoch 60 on (0-indexed; before it: Gaussian training with m noise copies",
        ),
        ("rsbench.certify", ("model.path=missing.ckpt",), "model: checkpoint missing.ckpt is not a file"),
        ("rsbench.certify", ("model.path=m.ckpt", "certify.n0=0"), "certify.n0 must be an integer >= 1, got 0"),
        (
            "rsbench.certify",
            ("model=ensemble", "model.members=[a.ckpt,b.ckpt]"),
            "model: checkpoint a.ckpt is not a file",
        ),
        (
            "rsbench.certify",
            ("model=denoised", "model.denoiser_ckpt=d.ckpt", "model.classifier.path=c.ckpt"),
            "model.classifier: checkpoint c.ckpt is not a file",
        ),
    ],
)
def test_impossible_settings_and_missing_files_are_refused_before_torch(
    module: str, args: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    quiet = ("logger=none",) if module == "rsbench" else ()
    assert_refused_at_once(run_module(module, *args, *quiet, cwd=tmp_path), message)
    assert list(tmp_path.iterdir()) == []  # nothing left behind


@pytest.mark.skipif(
    any(Path(device).exists() for device in precheck.GPU_DEVICES), reason="this machine has a GPU device"
)
def test_trainer_gpu_on_a_machine_without_a_gpu_is_refused_before_torch(tmp_path: Path) -> None:
    seen = run_module("rsbench", "trainer=gpu", cwd=tmp_path)
    assert_refused_at_once(seen, "trainer.accelerator=gpu (trainer=gpu) needs a GPU, and this machine has none")


def test_a_busy_run_folder_is_refused_before_torch(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with RunLock(run_dir, command="python -m rsbench.certify (this test)"):
        seen = run_module("rsbench.certify", "model.path=x.ckpt", f"hydra.run.dir={run_dir}", cwd=tmp_path)
        assert_refused_at_once(seen, f"{run_dir} is in use by pid ")
        seen = run_module("rsbench", f"hydra.run.dir={run_dir}", "logger=none", cwd=tmp_path)
        assert_refused_at_once(seen, "(since ")


def test_a_sweep_is_checked_for_required_values_only(tmp_path: Path) -> None:
    """Its jobs record their own failures and the others run: certify.n=0 is not refused for the whole sweep."""
    assert_refused_at_once(run_module("rsbench.certify", "-m", "certify.n=0,1", cwd=tmp_path), "model.path")
    cfg = precheck._compose("config", ["certify.n=0"])
    assert cfg is not None
    overrides, run_dir, sweep = precheck._overrides(["-m", "certify.n=0,1", "method=gaussian,catrs"])
    assert (overrides, run_dir, sweep) == (["certify.n=0", "method='gaussian'"], None, True)


@pytest.mark.parametrize(
    ("args", "code"),
    [(("--help",), 0), (("--confidence", "2", "runs"), 2), (("--radii", "abc", "runs"), 2), ((), 2)],
)
def test_the_reports_help_and_argument_errors_import_nothing_heavy(
    args: tuple[str, ...], code: int, tmp_path: Path
) -> None:
    """``python -m rsbench.report --help`` took 7-8 s: it imported pandas, scipy, statsmodels and matplotlib first."""
    seen = run_module("rsbench.report", *args, cwd=tmp_path)
    assert (seen["code"], seen["heavy"]) == (code, [])


# ------------------------------------------------------------------------- the early checks say what the late do


@pytest.mark.parametrize("target", sorted(MODEL_FILES))
def test_a_missing_model_file_is_refused_by_the_builder_and_before_torch_in_the_same_words(
    target: str, tmp_path: Path
) -> None:
    from omegaconf import OmegaConf

    argument, message = MODEL_FILES[target]
    missing = str(tmp_path / "missing.pt")
    builder = getattr(builders, target.rsplit(".", 1)[1])
    arguments = {
        "checkpoint": {"path": missing, "num_classes": 10, "in_channels": 1},
        "ensemble": {"members": [missing, missing], "num_classes": 10, "in_channels": 1},
        "torchscript": {"path": missing, "input_layer": {"kind": "identity"}, "sigma": 0.25, "num_classes": 10},
        "exported": {"path": missing, "input_layer": {"kind": "identity"}, "sigma": 0.25, "num_classes": 10},
        "denoised": {"classifier": None, "denoiser_ckpt": missing},
    }[builder.__name__]
    with pytest.raises(ConfigError) as late:
        builder(**arguments)
    assert str(late.value) == message.format(path=missing)
    node = OmegaConf.create({"model": {"_target_": target, argument: arguments[argument]}})
    with pytest.raises(ConfigError, match=r"^model: ") as early:
        precheck.check_model_files(node)
    assert str(early.value) == f"model: {late.value}"


def test_the_early_facts_are_the_runs() -> None:
    from rsbench.data.sources import EMBEDDED_TEST_SIZE

    assert dataset_info("mnist_embedded").test_size == EMBEDDED_TEST_SIZE
    stock = sorted(str(path.stem) for path in (ROOT / "conf" / "dataset").glob("*.yaml"))
    assert sorted(datasets()) == stock
    sizes = {name: compose_config(f"dataset={name}").dataset.test_size for name in stock}
    assert sizes == {name: datasets()[name].test_size for name in stock}  # what the checks before a run read
    assert all(isinstance(size, int) and size > 0 for size in sizes.values())


@pytest.mark.parametrize("change", ["n=0", "n0=-3", "alpha=2.0", "start=-1", "skip=0", "max_images=0"])
def test_a_certification_setting_refused_early_is_refused_by_the_settings_in_the_same_words(change: str) -> None:
    from rsbench.certify.pipeline.settings import CertifySettings

    cfg = compose_config(f"certify.{change}", "model.path=x.ckpt", config_name="certify_model")
    with pytest.raises(ConfigError) as early:
        precheck.check_certify(cfg, certifies=True)
    with pytest.raises(ConfigError) as late:
        CertifySettings.from_config(cfg.certify)
    assert str(early.value) == str(late.value)
