"""``train_layout``: training in channels-last changes the memory layout, not the noise, the data or the loss.

Issue 50: channels-last trains LeNet faster on a CPU thread (``python -m rsbench.bench.training_throughput``); these
tests pin what makes it the same training: the noise drawn for a channels-last batch is the contiguous one,
value for value; the network is channels-last for the fit only; a few steps in either layout end within float
rounding of each other; and a run resumes only in the layout it started in.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf, open_dict

from rsbench.archs.registry import build_classifier
from rsbench.errors import ConfigError, ResumeMismatchError
from rsbench.methods.gaussian import GaussianAugmentation
from rsbench.runs import training_layout
from rsbench.runs.cli import expand_resume
from rsbench.runs.layout_choice import check_layout
from rsbench.runs.resume import check_resumable
from rsbench.runs.training_layout import TrainingLayout, bf16_warning, resolve_layout
from tests.helpers import SGD, compose_config, quiet_trainer

IDENTITY = {"kind": "identity", "mean": None, "std": None}


def tiny_classifier() -> torch.nn.Module:
    """LeNet on 3-channel 28x28 images (three channels: the layouts then order the values differently)."""
    return build_classifier("lenet", 10, IDENTITY, in_channels=3)


def conv_layouts(module: torch.nn.Module) -> set[bool]:
    """For every 4-D parameter of ``module``: whether it is stored channels-last."""
    return {
        p.is_contiguous(memory_format=torch.channels_last) and not p.is_contiguous()
        for p in module.parameters()
        if p.dim() == 4
    }


def job_overrides(argv: list[str]) -> list[str]:
    """``argv`` without ``hydra.run.dir`` (which :func:`compose_config` does not take)."""
    return [arg for arg in argv if not arg.startswith("hydra.run.dir=")]


def gaussian(net: torch.nn.Module) -> GaussianAugmentation:
    return GaussianAugmentation(net=net, sigma=0.25, optimizer=SGD)


def test_the_noise_of_a_channels_last_batch_is_the_contiguous_noise_value_for_value() -> None:
    x = torch.rand(4, 3, 28, 28)
    module = gaussian(tiny_classifier())
    ours = module.sample_noise(x.to(memory_format=torch.channels_last), generator=torch.Generator().manual_seed(1))
    theirs = module.sample_noise(x, generator=torch.Generator().manual_seed(1))
    assert torch.equal(ours, theirs)  # drawn contiguous, from the same stream: not merely close


def test_the_network_is_channels_last_during_the_fit_and_contiguous_after(tmp_path: Path) -> None:
    seen: list[set[bool]] = []
    module = gaussian(tiny_classifier())
    step = module.training_step

    def recording_step(batch: tuple[torch.Tensor, ...], batch_idx: int) -> torch.Tensor | None:
        seen.append(conv_layouts(module))
        return step(batch, batch_idx)

    module.training_step = recording_step  # type: ignore[method-assign]
    data = torch.utils.data.TensorDataset(torch.rand(8, 3, 28, 28), torch.randint(0, 10, (8,)), torch.arange(8))
    trainer = quiet_trainer(tmp_path, max_epochs=1, callbacks=[TrainingLayout("channels_last")])
    trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=4))
    assert seen == [{True}, {True}]  # both steps ran channels-last
    assert conv_layouts(module) == {False}  # testing and certification see the contiguous network


def test_a_few_steps_in_either_layout_end_within_float_rounding(tmp_path: Path) -> None:
    """The layouts sum each convolution's products in another order; after 4 SGD steps at lr 0.1 the weights differ
    by float32 rounding (seen: < 1e-6), far below the 1e-4 tolerance and far below one step's change (~1e-2)."""
    data = torch.utils.data.TensorDataset(torch.rand(16, 3, 28, 28), torch.randint(0, 10, (16,)), torch.arange(16))
    weights = {}
    for layout in ("contiguous", "channels_last"):
        torch.manual_seed(0)
        module = gaussian(tiny_classifier())
        torch.manual_seed(1)
        trainer = quiet_trainer(tmp_path, max_epochs=1, callbacks=[TrainingLayout(layout)])
        trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=4))
        weights[layout] = {key: value.clone() for key, value in module.state_dict().items()}
    torch.manual_seed(0)
    start = gaussian(tiny_classifier()).state_dict()
    for key, value in weights["contiguous"].items():
        assert torch.allclose(weights["channels_last"][key], value, atol=1e-4, rtol=0), key
    moved = max(float((weights["contiguous"][key] - start[key]).abs().max()) for key in start)
    assert moved > 1e-3  # the steps did move the weights: the comparison is not between two untrained nets


def test_auto_is_channels_last_on_a_cpu_for_a_conv_net_only() -> None:
    conv, dense = tiny_classifier(), torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 2))
    assert resolve_layout("auto", conv, torch.device("cpu")) == "channels_last"
    assert resolve_layout("auto", dense, torch.device("cpu")) == "contiguous"
    assert resolve_layout("auto", conv, torch.device("cuda")) == "contiguous"
    assert resolve_layout("channels_last", dense, torch.device("cpu")) == "channels_last"
    with pytest.raises(ConfigError, match="train_layout='NHWC' is not a training memory layout: use one of contiguous"):
        check_layout("NHWC")


def test_a_run_resumes_only_in_the_layout_it_started_in(tmp_path: Path) -> None:
    (tmp_path / ".hydra").mkdir()
    started = compose_config("experiment=smoke", "train_layout=channels_last", output_dir=tmp_path)
    OmegaConf.save(started, tmp_path / ".hydra" / "config.yaml")
    check_resumable(started, tmp_path, certified=False)  # the same layout: continues
    other = compose_config("experiment=smoke", "train_layout=contiguous", output_dir=tmp_path)
    expected = "train_layout: the run has 'channels_last', this command asks for 'contiguous'"
    with pytest.raises(ResumeMismatchError, match=expected):
        check_resumable(other, tmp_path, certified=False)


def test_a_run_from_before_the_option_resumes_as_contiguous(tmp_path: Path) -> None:
    (tmp_path / ".hydra").mkdir()
    old = compose_config("experiment=smoke", output_dir=tmp_path)
    with open_dict(old):
        del old["train_layout"]
    OmegaConf.save(old, tmp_path / ".hydra" / "config.yaml")
    OmegaConf.save(OmegaConf.create(["experiment=smoke"]), tmp_path / ".hydra" / "overrides.yaml")
    replayed = expand_resume([f"resume={tmp_path}"])
    assert replayed[:2] == ["experiment=smoke", "train_layout=contiguous"]  # the layout it trained in, not today's
    check_resumable(compose_config(*replayed[:2], output_dir=tmp_path), tmp_path, certified=False)
    with pytest.raises(ResumeMismatchError, match="train_layout"):
        check_resumable(
            compose_config("experiment=smoke", "train_layout=channels_last", output_dir=tmp_path),
            tmp_path,
            certified=False,
        )


def test_bf16_on_a_cpu_without_native_bf16_is_warned_about(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(training_layout.torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)
    warning = bf16_warning("bf16-mixed", "cpu")
    assert warning is not None
    assert "trainer.precision=bf16-mixed on a CPU without native bf16" in warning
    assert bf16_warning("32-true", "cpu") is None
    monkeypatch.setattr(training_layout.torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True)
    assert bf16_warning("bf16-mixed", "cpu") is None


def test_a_run_checkpointed_by_lightnings_model_checkpoint_resumes_under_the_method_checkpoint(tmp_path: Path) -> None:
    """A run started before MethodCheckpoint (and train_layout) existed continues under today's config."""
    (tmp_path / ".hydra").mkdir()
    old = compose_config("experiment=smoke", output_dir=tmp_path)
    with open_dict(old):
        del old["train_layout"]
        del old.callbacks.model_checkpoint["first_epoch"]
        old.callbacks.model_checkpoint._target_ = "pytorch_lightning.callbacks.ModelCheckpoint"
    OmegaConf.save(old, tmp_path / ".hydra" / "config.yaml")
    today = compose_config("experiment=smoke", "train_layout=contiguous", output_dir=tmp_path)  # as resume= pins it
    check_resumable(today, tmp_path, certified=False)
    with open_dict(old):
        old.callbacks.model_checkpoint._target_ = "mypkg.OtherCheckpoint"
    OmegaConf.save(old, tmp_path / ".hydra" / "config.yaml")
    with pytest.raises(ResumeMismatchError, match=r"callbacks\.model_checkpoint\._target_"):
        check_resumable(today, tmp_path, certified=False)


def test_the_default_layout_is_auto(tmp_path: Path) -> None:
    """``auto`` (channels-last on a CPU for a conv net): a channels-last Fashion-MNIST cell pairs with the authors'."""
    assert compose_config("experiment=smoke", output_dir=tmp_path).train_layout == "auto"


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_a_run_keeps_its_layout_when_it_resumes_whatever_the_default(tmp_path: Path, layout: str) -> None:
    """A run started under the old default (contiguous, not in its overrides) resumes in it, not in today's auto."""
    (tmp_path / ".hydra").mkdir()
    started = compose_config("experiment=smoke", f"train_layout={layout}", output_dir=tmp_path)
    OmegaConf.save(started, tmp_path / ".hydra" / "config.yaml")
    OmegaConf.save(OmegaConf.create(["experiment=smoke"]), tmp_path / ".hydra" / "overrides.yaml")
    replayed = expand_resume([f"resume={tmp_path}"])
    assert f"train_layout={layout}" in replayed
    check_resumable(compose_config(*job_overrides(replayed), output_dir=tmp_path), tmp_path, certified=False)
    asked = expand_resume([f"resume={tmp_path}", "train_layout=auto"])  # an override given now still wins ...
    assert "train_layout=auto" in asked
    assert f"train_layout={layout}" not in asked
    with pytest.raises(ResumeMismatchError, match="train_layout"):  # ... and is refused: the run has its layout
        check_resumable(compose_config(*job_overrides(asked), output_dir=tmp_path), tmp_path, certified=False)
