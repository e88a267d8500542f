"""The benchmark scripts run end to end on tiny settings and print what their tables promise."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from rsbench.archs import Classifier, LeNet
from rsbench.bench import (
    certify_throughput,
    compare_versions,
    denoised_throughput,
    precision_agreement,
    sequential_check,
    table_cost,
    training_cost,
)
from rsbench.certify.pipeline.certification import Certification, Subject
from rsbench.certify.pipeline.records import read_rows
from rsbench.certify.pipeline.settings import CertifySettings
from tests.helpers import ROOT


def test_certify_throughput_prints_each_variant_against_the_forward_pass(capsys: pytest.CaptureFixture[str]) -> None:
    tiny = ["--images", "2", "--n0", "10", "--n", "90", "--batch-size", "50", "--repeats", "1"]
    certify_throughput.main(["--arch", "lenet", *tiny, "--no-art", "--variants", "bf16"])
    out = capsys.readouterr().out
    assert "n0=10, n=90, 2 images x 1 repeats" in out
    ratios = {}
    for line in out.splitlines():
        name, _, rest = line.partition("  ")
        if name in {"forward", "cohen", "pipeline", "rsbench", "smooth", "rsbench+bf16"}:
            ratios[name] = float(rest.split()[1])
    assert set(ratios) == {"forward", "cohen", "pipeline", "rsbench", "smooth", "rsbench+bf16"}
    assert ratios["forward"] == 1.0
    assert all(ratio > 0 for ratio in ratios.values())
    ensemble = next(line for line in out.splitlines() if line.startswith("ensemble of 3"))
    assert float(ensemble.split("ensemble / singles = ")[1].split()[0]) > 0


def test_denoised_throughput_prints_each_denoiser_against_the_classifier(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("diffusers")
    tiny = ["--images", "1", "--n0", "10", "--n", "40", "--batch-size", "50", "--repeats", "1", "--dncnn", "3x8"]
    denoised_throughput.main(["--arch", "lenet", *tiny])
    out = capsys.readouterr().out
    ratios = {}
    for line in out.splitlines():
        if line.startswith(("classifier", "+ dncnn 3x8", "+ diffusion (tiny)")):
            cells = line.split()  # name..., samples/s, ratio, hours, "h"
            ratios[" ".join(cells[:-4])] = float(cells[-3])
    assert set(ratios) == {"classifier", "+ dncnn 3x8", "+ diffusion (tiny)"}
    assert ratios["classifier"] == 1.0
    assert all(ratio > 0 for ratio in ratios.values())


def test_compare_versions_runs_both_pipelines_in_one_process(capsys: pytest.CaptureFixture[str]) -> None:
    tiny = ["--images", "2", "--n0", "10", "--n", "90", "--batch-size", "50", "--repeats", "1"]
    compare_versions.main(["--other", str(ROOT), "--arch", "lenet", *tiny])  # this checkout against a copy of itself
    out = capsys.readouterr().out
    cells = [line.split() for line in out.splitlines()]
    rates = {c[0]: float(c[1].replace(",", "")) for c in cells if len(c) == 3 and c[0] in ("forward", "this", "other")}
    assert set(rates) == {"forward", "this", "other"}
    assert all(rate > 0 for rate in rates.values())
    assert "same rows: True" in out
    from omegaconf import OmegaConf
    from omegaconf.errors import InterpolationResolutionError

    from rsbench.errors import ConfigError

    with pytest.raises(InterpolationResolutionError) as error:
        OmegaConf.to_container(OmegaConf.create({"x": "${rs.lookup:{a: 1},b}"}), resolve=True)
    chain, cause = [], error.value
    while cause is not None:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    assert any(isinstance(e, ConfigError) for e in chain)  # this package's resolver again, not the copy's
    assert not [name for name in sys.modules if name.startswith("rsbench_other")]


def training_cost_rows(out: str, methods: list[str]) -> dict[str, tuple[float, ...]]:
    """The benchmark's table: batch, ms/batch, x gaussian, forward and backward rows per image, by method."""
    rows = {}
    for line in out.splitlines():
        cells = line.split()
        if cells and cells[0] in {"gaussian", *methods}:
            rows[cells[0]] = tuple(float(cell) for cell in cells[1:])
    return rows


def test_training_cost_counts_each_methods_passes(capsys: pytest.CaptureFixture[str]) -> None:
    methods = ["consistency", "macer", "denoiser"]
    training_cost.main(["--methods", *methods, "--batch-size", "8", "--batches", "1", "--repeats", "1"])
    rows = training_cost_rows(capsys.readouterr().out, methods)
    assert rows["gaussian"][2:] == (1.0, 1.0, 1.0)  # the baseline: ratio 1, one forward and backward per image
    assert {row[0] for row in rows.values()} == {8.0}  # --batch-size puts every method at it
    assert rows["consistency"][3:] == (2.0, 2.0)  # m = 2 noisy copies
    assert rows["macer"][3:] == (16.0, 16.0)  # k = 16 noisy copies
    # denoised smoothing, on a fresh frozen classifier the benchmark writes (its default list crashed without one):
    # one noisy copy through the trained denoiser, forward and backward
    assert rows["denoiser"][3:] == (1.0, 1.0)


def test_training_cost_times_each_method_at_its_recipes_batch_size_and_compares_per_image(
    capsys: pytest.CaptureFixture[str],
) -> None:
    training_cost.main(["--dataset", "fashion_mnist", "--methods", "macer", "--batches", "1", "--repeats", "1"])
    out = capsys.readouterr().out
    rows = training_cost_rows(out, ["macer"])
    assert (rows["gaussian"][0], rows["macer"][0]) == (256, 64)  # conf/method_recipe/macer_fashion_mnist.yaml
    assert "each method at its recipe's batch size" in out
    # the ratio is per training image: MACER's ms per batch of 64 against Gaussian's per batch of 256, x 4 (the table
    # prints one decimal of ms and two of the ratio, so the recomputed ratio matches to rounding)
    (gaussian_ms, macer_ms) = rows["gaussian"][1], rows["macer"][1]
    assert rows["macer"][2] == pytest.approx(macer_ms / 64 / (gaussian_ms / 256), rel=0.02, abs=0.01)


def test_allocator_comparison_runs_each_setting_in_its_own_process(capsys: pytest.CaptureFixture[str]) -> None:
    tiny = ["--images", "1", "--n0", "10", "--n", "90", "--batch-size", "50", "--repeats", "1"]
    certify_throughput.main(["--arch", "lenet", "--allocators", *tiny])
    lines = capsys.readouterr().out.splitlines()
    rows = {line[:22].strip(): line[22:].split() for line in lines if line.startswith(("default", "GLIBC", "speed"))}
    assert set(rows) == {"default glibc malloc", "GLIBC_TUNABLES", "speed-up"}
    assert all(float(rate.replace(",", "")) > 0 for rate in rows["default glibc malloc"] + rows["GLIBC_TUNABLES"])


def tiny_runs(root: Path, *keys: dict[str, Any]) -> list[Path]:
    """Certify 6 random images with a random LeNet once per settings dict, all with the same seed."""
    torch.manual_seed(0)
    subject = Subject(Classifier("lenet", LeNet(10), {"kind": "identity"}), 10, 0.25, {"method": "test"})
    images = [(torch.randint(0, 256, (1, 28, 28)).float() / 255, i % 10) for i in range(6)]
    runs = []
    for index, settings in enumerate(keys):
        run = root / f"run{index}"
        Certification(CertifySettings.from_keys(n0=20, n=600, alpha=0.01, batch_size=200, **settings), run).run(
            subject, images
        )
        runs.append(run)
    return runs


def test_precision_agreement_compares_two_runs_on_the_same_noise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fp32, bf16, again = tiny_runs(tmp_path, {}, {"precision": "bf16"}, {})
    precision_agreement.main([str(fp32), str(again)])
    out = capsys.readouterr().out
    assert "6 images: same prediction 100.00%, same status (certified / abstained) 100.00%" in out
    assert "the same vote count on 100.00%" in out  # the same network on the same noise: every count
    result = precision_agreement.compare(read_rows(fp32 / "certify.tsv"), read_rows(bf16 / "certify.tsv"))
    assert result["images"] == 6
    assert 0 <= result["votes_mean"] <= result["votes_max"] <= 1


def test_sequential_check_sets_the_network_beside_the_oracle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixed, sequential = tiny_runs(tmp_path, {}, {"mode": "sequential"})
    sequential_check.main([str(fixed), str(sequential)])
    out = capsys.readouterr().out
    assert "design=informed" in out
    network = next(line for line in out.splitlines() if line.strip().startswith("network"))
    oracle = next(line for line in out.splitlines() if line.strip().startswith("oracle (replay)"))
    for line in (network, oracle):
        saving = next(cell for cell in line.split() if cell.endswith("x"))
        assert float(saving.rstrip("x")) >= 1.0  # no more samples than fixed n


def test_table_cost_prints_hours_per_row_for_fixed_n_and_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    tiny = ["--images", "1", "--n", "90", "--batch-size", "50", "--repeats", "1", "--variants", "bf16"]
    table_cost.main(["--arch", "lenet", *tiny, "--replay-images", "60"])
    out = capsys.readouterr().out
    rows = {line[:28].strip(): line[28:].split() for line in out.splitlines()}  # variant, then its numbers
    assert {"forward", "cohen", "rsbench", "rsbench+bf16"} <= set(rows)
    for variant in ("forward", "cohen", "rsbench", "rsbench+bf16"):
        rate, fixed_hours, sequential_hours = (float(cell.replace(",", "")) for cell in rows[variant][:3])
        assert rate > 0
        assert fixed_hours > sequential_hours > 0  # fixed n costs more hours
    assert "lenet (mnist, fashion_mnist logs: 24;" in out
