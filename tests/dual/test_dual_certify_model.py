"""``python -m rsbench.certify model=dual`` and a denoiser in front of the router (rsbench/models/dual.py).

Both entry points build the dual subject with one function (:func:`rsbench.models.dual.dual_subject`), so on the
same tiny models (LeNets with random seeded weights, a 2-output LeNet router) their rows must agree in every column
but the time. A denoiser in front of the router is built as ``model=denoised`` builds one (a ``method=denoiser``
checkpoint's DnCNN): a fresh DnCNN is the identity (its last convolution is zero), so it must leave every row as the
bare router's while the records name it (its fingerprint differs: a bare router's rows are not continued); a DnCNN
set to map every image to the constant -10 makes the router's choice the same on every noisy copy of every image.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from torch import nn

from rsbench.archs.denoiser import DnCNN
from rsbench.archs.registry import build_classifier
from rsbench.certify.pipeline.records import PROTOCOL, read_rows
from rsbench.checkpoint import TRAINED_BEHIND, make_checkpoint, write_checkpoint
from rsbench.dual import stages
from rsbench.errors import ConfigError
from rsbench.loading import file_digest
from rsbench.runs.certify_model import certify_model
from tests.classifiers import constant_dncnn, denoiser_checkpoint
from tests.helpers import ROOT, compose_config, save_checkpoint

SIGMAS = (0.25, 0.5)
ROUTER_SIGMA = 0.5
SMALL = ("certify=smoke", "certify.max_images=3", "certify.alpha=0.01")
HEAVY = ("torch", "scipy", "pandas", "pytorch_lightning")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two LeNet experts (sigma 0.25, 0.5), a LeNet router over them (sigma 0.5) and two denoisers for it."""
    folder = tmp_path_factory.mktemp("models")
    paths = {}
    for k, sigma in enumerate(SIGMAS):
        torch.manual_seed(k)
        net = build_classifier("lenet", 10, {"kind": "identity"}, 1)
        paths[f"expert{k}"] = save_checkpoint(net, folder / f"expert{k}.ckpt", sigma=sigma, method="gaussian")
    torch.manual_seed(7)
    router = build_classifier("lenet", len(SIGMAS), {"kind": "identity"}, 1)
    _split_votes(router)
    checkpoint = make_checkpoint(router, ROUTER_SIGMA, "router")
    checkpoint["rsbench"]["sigmas"] = list(SIGMAS)
    paths["router"] = write_checkpoint(checkpoint, folder / "router.ckpt")
    paths["identity"] = denoiser_checkpoint(DnCNN(1, depth=3, width=4), folder / "identity.ckpt", ROUTER_SIGMA)
    paths["constant"] = denoiser_checkpoint(constant_dncnn(-10.0), folder / "constant.ckpt", ROUTER_SIGMA)
    paths["other_sigma"] = denoiser_checkpoint(DnCNN(1, depth=3, width=4), folder / "other.ckpt", sigma=0.25)
    return paths


def _split_votes(router: nn.Module) -> None:
    """Set the router's last bias so that its two logits tie on average over noisy copies of the first test images.

    Its choice then depends on the image and on the noise (a random LeNet otherwise picks one output everywhere).
    """
    datamodule = instantiate(compose_config(config_name="dual").dataset)
    datamodule.prepare_data()
    datamodule.setup("test")
    images = torch.stack([datamodule.test_dataset[i][0] for i in range(4)])
    noisy = images.repeat(64, 1, 1, 1) + ROUTER_SIGMA * torch.randn(256, *images.shape[1:])
    last = [m for m in router.modules() if isinstance(m, nn.Linear)][-1]
    router.eval()
    with torch.no_grad():
        margin = (router(noisy)[:, 1] - router(noisy)[:, 0]).mean()
        last.bias[0] += margin / 2
        last.bias[1] -= margin / 2


def dual(models: dict[str, Path], output_dir: Path, *overrides: str) -> Path:
    """``python -m rsbench.dual stage=certify`` of the router and experts in process; returns its folder."""
    cfg = compose_config(
        f"experts=[{models['expert0']},{models['expert1']}]",
        f"router.path={models['router']}",
        *SMALL,
        "beta=0.01",
        *overrides,
        output_dir=output_dir,
        config_name="dual",
    )
    stages.certify_stage(cfg, output_dir)
    return output_dir


def denoiser(models: dict[str, Path], name: str, prefix: str = "") -> tuple[str, str]:
    return (f"model@{prefix}router_denoiser=denoised", f"{prefix}router_denoiser.denoiser_ckpt={models[name]}")


def untimed(folder: Path) -> list[tuple]:
    """Every column of the dual rows but the time."""
    return [tuple(v for k, v in vars(r).items() if k != "time") for r in read_rows(folder / "certify.tsv")]


def test_certify_model_dual_gives_the_dual_stages_rows(tmp_path: Path, models: dict[str, Path]) -> None:
    staged = dual(models, tmp_path / "staged")
    overrides = ("model=dual", f"model.router.path={models['router']}", "model.beta=0.01")
    experts = f"model.experts=[{models['expert0']},{models['expert1']}]"
    certify_model(compose_config(*SMALL, *overrides, experts, output_dir=tmp_path / "cli", config_name="certify_model"))
    assert untimed(tmp_path / "cli") == untimed(staged)
    assert len(untimed(staged)) == 3
    metrics = json.loads((tmp_path / "cli" / "metrics.json").read_text())
    assert (metrics["method"], metrics["alpha"], metrics["beta"]) == ("dual_rs", 0.01, 0.01)
    assert metrics["failure_probability"] == pytest.approx(0.02)  # (sums of decimals: not exact)
    assert json.loads((tmp_path / "cli" / PROTOCOL).read_text()) == json.loads((staged / PROTOCOL).read_text())


@pytest.mark.parametrize("preset", ["default", "sequential"])
def test_model_dual_budget_is_alpha_plus_beta_0_001_by_default(preset: str) -> None:
    cfg = compose_config("model=dual", f"certify={preset}", config_name="certify_model")
    assert (cfg.certify.alpha, cfg.model.beta) == (0.0005, 0.0005)
    assert compose_config("model=dual", "certify.alpha=0.001", config_name="certify_model").certify.alpha == 0.001


@pytest.mark.parametrize(
    ("argument", "named"),
    [("model.expertz=[a.ckpt]", "model.expertz"), ("model.router.pth=r.ckpt", "model.router.pth")],
)
def test_bad_keys_of_model_dual_are_refused_in_one_line_before_torch(tmp_path: Path, argument: str, named: str) -> None:
    script = (
        "import runpy, sys\n"
        f"sys.argv = ['rsbench.certify', 'model=dual', {argument!r}, 'hydra.run.dir={tmp_path / 'run'}']\n"
        "try:\n    runpy.run_module('rsbench.certify', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as stop:\n    print('EXIT', stop.code)\n"
        f"print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))\n"
    )
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "RSBENCH_KEEP_ALLOCATOR": "1"}
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "EXIT 2" in result.stdout, result.stderr
    assert result.stderr.startswith("rsbench: error:")
    assert len(result.stderr.strip().splitlines()) == 1
    assert named in result.stderr
    assert "HEAVY []" in result.stdout
    assert not (tmp_path / "run").exists()


def test_an_unset_router_of_model_dual_is_named_before_torch(tmp_path: Path) -> None:
    from rsbench.runs.cli import CERTIFY
    from rsbench.runs.precheck import check_before_run

    with pytest.raises(ConfigError, match=r"model\.router\.path") as refused:
        check_before_run(["model=dual", "model.experts=[a.ckpt]", f"hydra.run.dir={tmp_path / 'run'}"], CERTIFY)
    assert "classifier" not in str(refused.value)  # (a router's denoiser node's classifier is the router)


def test_an_identity_denoiser_leaves_the_rows_and_the_records_name_it(tmp_path: Path, models: dict[str, Path]) -> None:
    bare = dual(models, tmp_path / "bare")
    behind = dual(models, tmp_path / "behind", *denoiser(models, "identity"))
    assert untimed(behind) == untimed(bare)  # a fresh DnCNN is the identity: the same votes, the same rows
    assert len({r.router_radius for r in read_rows(bare / "certify.tsv")}) > 1  # (the router's votes vary)
    protocol = json.loads((behind / PROTOCOL).read_text())
    bare_protocol = json.loads((bare / PROTOCOL).read_text())
    assert protocol["router_denoiser"]["kind"] == "dncnn"
    assert "router_denoiser" not in bare_protocol
    assert protocol["router_fingerprint"] != bare_protocol["router_fingerprint"]
    router = json.loads((behind / "metrics.json").read_text())["router"]
    assert router["arch"] == "dncnn+lenet"
    assert router["provenance"]["denoiser"]["path"].endswith("identity.ckpt")


def test_a_constant_image_denoiser_makes_the_routers_choice_constant(tmp_path: Path, models: dict[str, Path]) -> None:
    bare = read_rows(dual(models, tmp_path / "bare", "certify.max_images=4") / "certify.tsv")
    folder = dual(models, tmp_path / "constant", *denoiser(models, "constant"), "certify.max_images=4")
    rows = read_rows(folder / "certify.tsv")
    cap = json.loads((folder / "metrics.json").read_text())["radius_caps"]["router"]
    assert any(r.router_radius < cap * (1 - 1e-6) for r in bare)  # the bare router's votes differ between copies
    assert len({r.expert for r in rows}) == 1
    assert rows[0].expert >= 0
    # every one of the router's n votes is the same: its lower bound is the n-of-n one, its radius the cap
    assert all(r.router_radius == pytest.approx(cap, rel=1e-9) for r in rows)


def test_a_denoiser_for_another_sigma_or_not_a_denoiser_is_refused(tmp_path: Path, models: dict[str, Path]) -> None:
    with pytest.raises(ConfigError, match=r"denoiser is for sigma=0.25, the router is smoothed at sigma=0.5"):
        dual(models, tmp_path / "a", *denoiser(models, "other_sigma"))
    with pytest.raises(ConfigError, match=r"router_denoiser\._target_='rsbench\.models\.builders\.checkpoint'"):
        dual(models, tmp_path / "b", "model@router_denoiser=checkpoint", f"router_denoiser.path={models['expert0']}")
    assert not (tmp_path / "a" / "certify.tsv").exists()


def test_a_router_trained_behind_a_denoiser_is_certified_behind_that_one_only(
    tmp_path: Path, models: dict[str, Path]
) -> None:
    """Its signature names the denoiser (``method=router method.denoiser_ckpt``): bare or another one is refused."""
    checkpoint = torch.load(models["router"], map_location="cpu", weights_only=True)
    identity = models["identity"]
    checkpoint["rsbench"][TRAINED_BEHIND] = {"kind": "dncnn", "path": str(identity), "sha256": file_digest(identity)}
    trained = write_checkpoint(checkpoint, tmp_path / "trained_behind.ckpt")
    with pytest.raises(ConfigError, match=rf"trained behind the denoiser {identity} .*denoiser_ckpt={identity}"):
        dual(models, tmp_path / "bare", f"router.path={trained}")
    with pytest.raises(ConfigError, match=r"not .*constant\.ckpt"):
        dual(models, tmp_path / "other", f"router.path={trained}", *denoiser(models, "constant"))
    assert not (tmp_path / "bare" / "certify.tsv").exists()
    assert not (tmp_path / "other" / "certify.tsv").exists()
    folder = dual(models, tmp_path / "same", f"router.path={trained}", *denoiser(models, "identity"))
    assert json.loads((folder / PROTOCOL).read_text())["router_denoiser"]["kind"] == "dncnn"


def test_model_dual_takes_the_routers_denoiser_under_model(tmp_path: Path, models: dict[str, Path]) -> None:
    overrides = ("model=dual", f"model.router.path={models['router']}", "model.beta=0.01")
    experts = f"model.experts=[{models['expert0']},{models['expert1']}]"
    behind = denoiser(models, "identity", "model.")
    cfg = compose_config(*SMALL, *overrides, experts, *behind, output_dir=tmp_path, config_name="certify_model")
    certify_model(cfg)
    assert json.loads((tmp_path / PROTOCOL).read_text())["router_denoiser"]["kind"] == "dncnn"
