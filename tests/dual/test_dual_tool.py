"""``python -m rsbench.dual`` (rsbench/dual/stages.py) in process, on the embedded MNIST with small LeNets.

A constant router makes the dual certificate checkable against an expert's own certification: the router votes for
one expert on every noisy copy, so its certificate is the radius cap and the dual row must be that expert's row
(same seed, same protocol) with the radius min(cap, expert radius). The stages' files, resume and refusals follow.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig

from rsbench import files
from rsbench.certify.pipeline.cost import certification_cost
from rsbench.certify.pipeline.dual_records import format_dual_summary
from rsbench.certify.pipeline.records import STEM, read_rows
from rsbench.dual import stages
from rsbench.errors import ConfigError, ProtocolMismatchError
from rsbench.methods.router_loss import LABELS_VERSION
from rsbench.stop import StopRequested
from tests.helpers import ROOT, certify, compose_config

SIGMAS = (0.25, 0.5)
# certify=smoke's alpha for both parts, as the experts' own smoke certifications (tests.helpers.certify) use
SMALL = ("certify=smoke", "certify.max_images=3", "certify.alpha=0.01", "beta=0.01")


def dual_cfg(output_dir: Path, experts: list[Path], *overrides: str) -> DictConfig:
    return compose_config(
        f"experts=[{experts[0]},{experts[1]}]", *SMALL, *overrides, output_dir=output_dir, config_name="dual"
    )


def constant_router(choice: int) -> tuple[str, ...]:
    return (
        "router=constant",
        f"router.sigmas=[{SIGMAS[0]},{SIGMAS[1]}]",
        f"router.choice={choice}",
        "router.sigma=1.0",
    )


@pytest.mark.slow
def test_a_constant_router_gives_the_experts_own_certificates(tmp_path: Path, experts: list[Path]) -> None:
    expert_dir = tmp_path / "expert1"
    certify(expert_dir, f"model.path={experts[1]}", "certify.max_images=3")
    own = read_rows(expert_dir / "certify.tsv")
    summary = stages.certify_stage(dual_cfg(tmp_path / "dual", experts, *constant_router(1)), tmp_path / "dual")
    rows = read_rows(tmp_path / "dual" / "certify.tsv")
    assert summary is not None
    assert summary["chosen_sigma"] == {"0.25": 0, "0.5": 3}
    for dual, expert in zip(rows, own, strict=True):
        assert (dual.idx, dual.label, dual.sigma, dual.expert) == (expert.idx, expert.label, 0.5, 1)
        assert (dual.expert_predict, dual.expert_radius, dual.n) == (expert.predict, expert.radius, expert.n)
        assert (dual.count, dual.pA_lower) == (expert.count, expert.pA_lower)
        assert dual.radius == min(dual.router_radius, expert.radius)
        assert dual.predict == expert.predict
    # the router's certificate: every one of n votes for the chosen expert -> sigma_r * Phi^-1(alpha^(1/n))
    assert rows[0].router_radius == pytest.approx(summary["radius_caps"]["router"])
    assert summary["failure_probability"] == pytest.approx(2 * summary["alpha"])


@pytest.mark.slow
def test_reused_expert_records_give_the_same_rows(tmp_path: Path, experts: list[Path]) -> None:
    records = []
    for k, path in enumerate(experts):
        certify(tmp_path / f"expert{k}", f"model.path={path}", "certify.max_images=3")
        records.append(str(tmp_path / f"expert{k}"))
    computed = dual_cfg(tmp_path / "computed", experts, *constant_router(0))
    reused = dual_cfg(tmp_path / "reused", experts, *constant_router(0), f"expert_records=[{records[0]},{records[1]}]")
    stages.certify_stage(computed, tmp_path / "computed")
    stages.certify_stage(reused, tmp_path / "reused")
    strip = lambda rows: [(r.idx, r.predict, r.radius, r.expert_radius, r.router_radius) for r in rows]  # noqa: E731
    assert strip(read_rows(tmp_path / "computed" / "certify.tsv")) == strip(
        read_rows(tmp_path / "reused" / "certify.tsv")
    )
    metrics = json.loads((tmp_path / "reused" / "metrics.json").read_text())
    assert metrics["expert_records"] == records


def test_expert_records_of_another_protocol_are_refused(tmp_path: Path, experts: list[Path]) -> None:
    for k, path in enumerate(experts):
        certify(tmp_path / f"expert{k}", f"model.path={path}", "certify.max_images=3", "certify.n=100")
    cfg = dual_cfg(
        tmp_path / "dual",
        experts,
        *constant_router(0),
        f"expert_records=[{tmp_path / 'expert0'},{tmp_path / 'expert1'}]",
    )
    with pytest.raises(ConfigError, match="certified otherwise"):
        stages.certify_stage(cfg, tmp_path / "dual")
    assert not (tmp_path / "dual" / "certify.tsv").exists()


def test_certify_resumes_without_recomputing_rows(tmp_path: Path, experts: list[Path]) -> None:
    cfg = dual_cfg(tmp_path / "dual", experts, *constant_router(1))
    stages.certify_stage(cfg, tmp_path / "dual")
    before = (tmp_path / "dual" / "certify.tsv").read_text()
    lines = before.splitlines(keepends=True)
    (tmp_path / "dual" / "certify.tsv").write_text("".join(lines[:2]))  # as if stopped after the first image
    stages.certify_stage(cfg, tmp_path / "dual")
    assert (tmp_path / "dual" / "certify.tsv").read_text().splitlines()[:2] == before.splitlines()[:2]
    assert len(read_rows(tmp_path / "dual" / "certify.tsv")) == 3


def test_router_sigmas_must_be_the_experts(tmp_path: Path, experts: list[Path]) -> None:
    cfg = dual_cfg(tmp_path / "dual", experts, "router=constant", "router.sigmas=[0.25,1.0]", "router.sigma=1.0")
    with pytest.raises(ConfigError, match="routes to sigmas"):
        stages.certify_stage(cfg, tmp_path / "dual")


def test_labels_stage_labels_the_chosen_training_images(tmp_path: Path, experts: list[Path]) -> None:
    cfg = dual_cfg(tmp_path / "labels", experts, "labels.max_images=4", "labels.skip=7", "labels.n0=8", "labels.n=64")
    path = stages.labels_stage(cfg, tmp_path / "labels")
    table = torch.load(path, weights_only=True)
    chosen = (table["labels"] >= 0).nonzero().flatten().tolist()
    assert chosen == [0, 7, 14, 21]
    radii = table["radii"][chosen]
    assert table["labels"][chosen].tolist() == radii.argmax(dim=1).tolist()
    assert table["sigmas"] == list(SIGMAS)
    assert table["version"] == LABELS_VERSION
    assert bool(torch.isnan(table["radii"][1:7]).all())  # images not labelled have no radii
    again = stages.labels_stage(cfg, tmp_path / "labels")  # written: read back, not recomputed
    assert again == path
    summary = json.loads((tmp_path / "labels" / "router_labels.json").read_text())
    assert summary["version"] == LABELS_VERSION
    assert summary["images"] == 4


def test_interrupted_labels_resume_to_the_uninterrupted_table(
    tmp_path: Path, experts: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop after the first group saves its radii and stops; the rerun labels the rest: the same file, key and all."""
    options = ("labels.max_images=6", "labels.n0=8", "labels.n=64", "certify.batch_size=72")  # 4 images per group
    whole = torch.load(stages.labels_stage(dual_cfg(tmp_path / "a", experts, *options), tmp_path / "a"))
    cfg = dual_cfg(tmp_path / "b", experts, *options)
    monkeypatch.setattr(files, "stop_requested", lambda: signal.SIGTERM)
    with pytest.raises(StopRequested):
        stages.labels_stage(cfg, tmp_path / "b")
    monkeypatch.setattr(files, "stop_requested", lambda: None)
    partial = torch.load(tmp_path / "b" / (stages.LABELS + ".partial"), weights_only=True)
    assert (~partial["radii"].isnan().any(dim=1)).sum() == 4  # the first group only
    resumed = torch.load(stages.labels_stage(cfg, tmp_path / "b"), weights_only=True)
    assert resumed.keys() == whole.keys()
    for name in ("labels", "radii"):
        assert torch.equal(resumed[name].nan_to_num(-7.0), whole[name].nan_to_num(-7.0)), name
    assert resumed["protocol"] == whole["protocol"]
    assert not (tmp_path / "b" / (stages.LABELS + ".partial")).exists()


def test_labels_of_another_protocol_are_refused_by_name(tmp_path: Path, experts: list[Path]) -> None:
    options = ("labels.max_images=2", "labels.n0=8", "labels.n=64")
    stages.labels_stage(dual_cfg(tmp_path, experts, *options), tmp_path)
    with pytest.raises(ProtocolMismatchError, match="seed: stored 0, requested 5"):
        stages.labels_stage(dual_cfg(tmp_path, experts, *options, "labels.seed=5"), tmp_path)


def test_the_dual_budget_is_alpha_plus_beta_0_001_by_default(tmp_path: Path, experts: list[Path]) -> None:
    """The paper's budget, alpha = beta = 0.0005, whatever certify preset (smoke's alpha is 0.01) is chosen."""
    cfg = compose_config(
        f"experts=[{experts[0]},{experts[1]}]",
        "certify=smoke",
        "certify.max_images=2",
        *constant_router(1),
        output_dir=tmp_path,
        config_name="dual",
    )
    assert (cfg.certify.alpha, cfg.beta) == (0.0005, 0.0005)
    summary = stages.certify_stage(cfg, tmp_path)
    assert summary is not None
    assert (summary["alpha"], summary["beta"]) == (0.0005, 0.0005)
    assert summary["failure_probability"] == pytest.approx(0.001, abs=1e-15)  # a sum of two floats
    assert "alpha + beta = 0.0005 + 0.0005 = 0.001" in format_dual_summary(summary)
    rows = read_rows(tmp_path / "certify.tsv")
    assert {(row.alpha, row.beta) for row in rows} == {(0.0005, 0.0005)}


@pytest.mark.slow  # (about 15 s: the grid's thresholds at two sigmas, and three certifications)
def test_grid_noise_is_honoured_for_the_router_and_the_experts(tmp_path: Path, experts: list[Path]) -> None:
    """certify.noise_grid=255 used to be ignored: the dual rows are now the expert's own grid certification's."""
    certify(tmp_path / "expert1", f"model.path={experts[1]}", "certify.max_images=3", "certify.noise_grid=255")
    own = read_rows(tmp_path / "expert1" / "certify.tsv")
    cfg = dual_cfg(tmp_path / "dual", experts, *constant_router(1), "certify.noise_grid=255")
    summary = stages.certify_stage(cfg, tmp_path / "dual")
    assert summary is not None
    assert summary["noise_grid"] == 255
    rows = read_rows(tmp_path / "dual" / "certify.tsv")
    assert [(r.expert_predict, r.expert_radius, r.n) for r in rows] == [(e.predict, e.radius, e.n) for e in own]
    assert json.loads((tmp_path / "dual" / "certify_protocol.json").read_text())["noise_grid"] == 255
    continuous = dual_cfg(tmp_path / "continuous", experts, *constant_router(1))
    stages.certify_stage(continuous, tmp_path / "continuous")
    plain = read_rows(tmp_path / "continuous" / "certify.tsv")
    assert [r.pA_lower for r in plain] != [r.pA_lower for r in rows]  # other noise, other draws


def dual_command(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m rsbench.dual <args>`` in a child process, as a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RSBENCH_KEEP_ALLOCATOR": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "rsbench.dual", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # (three child processes, each importing torch)
def test_the_command_runs_as_a_job_locked_with_status_and_resume(tmp_path: Path, experts: list[Path]) -> None:
    """It used to write no status.json or .hydra/, hold no lock, print no result line nor where it wrote."""
    run = tmp_path / "run"
    given = (f"experts=[{experts[0]},{experts[1]}]", *SMALL[:3], *constant_router(1))
    done = dual_command("stage=certify", *given, f"hydra.run.dir={run}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"wrote {run}" in done.stdout
    assert "alpha + beta = 0.01 + 0.0005 = 0.0105" in done.stdout
    status = json.loads((run / "status.json").read_text())
    # (the run folder named relative to the working directory it lies under: rsbench.runs.quoting.resume_command)
    assert (status["status"], status["resume"]) == ("completed", "python -m rsbench.dual resume=run")
    assert (run / ".hydra" / "config.yaml").is_file()
    assert len(read_rows(run / "certify.tsv")) == 3
    more = dual_command(f"resume={run}", "certify.max_images=4", cwd=tmp_path)  # one image more, the rest kept
    assert more.returncode == 0, more.stderr
    assert len(read_rows(run / "certify.tsv")) == 4
    wrong = ("router.sigmas=[0.25,1.0]", f"hydra.run.dir={tmp_path / 'no'}")
    refused = dual_command("stage=certify", *given, *wrong, cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.startswith("rsbench: error: the router routes to sigmas [0.25, 1.0]")
    assert not (tmp_path / "no").exists()  # a refused command leaves nothing behind


def test_a_sharded_dual_certification_merges_to_the_unsharded_rows(tmp_path: Path, experts: list[Path]) -> None:
    """Dual runs go through the one pipeline: two shards into one folder, merged by the last, as one job writes."""
    whole = dual_cfg(tmp_path / "whole", experts, *constant_router(1))
    summary = stages.certify_stage(whole, tmp_path / "whole")
    shared = tmp_path / "shared"
    outcomes = []
    for k in range(2):
        run = shared / f"shard{k}"
        cfg = dual_cfg(run, experts, *constant_router(1), f"certify.shard={k}", "certify.num_shards=2")
        outcomes.append(stages.certify_stage(cfg, run))
    assert outcomes[0] is None  # its sibling had images left: the second shard merges
    assert summary is not None
    assert outcomes[1] is not None
    assert (shared / "certify_shards.json").is_file()
    strip = lambda rows: [(r.idx, r.predict, r.radius, r.expert, r.router_radius, r.count, r.n) for r in rows]  # noqa: E731
    assert strip(read_rows(shared / "certify.tsv")) == strip(read_rows(tmp_path / "whole" / "certify.tsv"))
    merged = json.loads((shared / "metrics.json").read_text())
    assert (merged["acr"], merged["certified_accuracy"]) == (summary["acr"], summary["certified_accuracy"])
    assert (merged["shards"], len(merged["cost"]["shards"])) == (2, 2)
    assert (merged["beta"], merged["sigmas"]) == (summary["beta"], summary["sigmas"])


def test_a_dual_runs_cost_is_the_pipelines(tmp_path: Path, experts: list[Path]) -> None:
    """metrics.json's cost comes from the shared cost code: seconds summed over the rows, every sample counted."""
    cfg = dual_cfg(tmp_path, experts, *constant_router(1))
    summary = stages.certify_stage(cfg, tmp_path)
    assert summary is not None
    rows = read_rows(tmp_path / "certify.tsv")
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    cost = metrics["cost"]
    # rounded to 3 decimals by the cost code; each row's time to 4
    assert cost["certify_seconds"] == pytest.approx(sum(row.time for row in rows), abs=1e-3)
    n0 = cfg.certify.n0  # (router_n0 is certify.n0 by default)
    assert cost["samples"] == sum(n0 + (row.router_n or 0) + n0 + row.n for row in rows)  # every row was routed
    assert (cost["images"], cost["train_seconds"]) == (3, None)
    # the object the shared cost code computes from the rows (the same arithmetic on the same rows: equal exactly)
    shared = certification_cost(
        {STEM: rows}, n0=n0, environment=metrics["environment"], precision="fp32", extra_samples={STEM: n0}
    )
    assert cost == shared


@pytest.mark.parametrize("stage", ["labels", "iterate"])
def test_the_stages_that_read_no_router_need_no_router_path(tmp_path: Path, stage: str) -> None:
    """``stage=labels`` and ``stage=iterate`` pass the pre-torch check without ``router.path``; certify does not."""
    from rsbench.runs.cli import DUAL
    from rsbench.runs.precheck import check_before_run

    check_before_run([f"stage={stage}", "experts=[a.ckpt,b.ckpt]", f"hydra.run.dir={tmp_path / stage}"], DUAL)
    with pytest.raises(ConfigError, match=r"router\.path"):
        check_before_run(["stage=certify", "experts=[a.ckpt,b.ckpt]", f"hydra.run.dir={tmp_path / 'c'}"], DUAL)
