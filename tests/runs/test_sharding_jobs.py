"""Sharded certification through the real commands: a multirun over ``certify.shard`` (Hydra's basic launcher), a
shard stopped by SIGTERM and resumed, the automatic merge against the unsharded run, and the SLURM array's config.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rsbench.certify.pipeline.records import read_rows
from rsbench.errors import ConfigError
from rsbench.runs.run import run
from tests.helpers import QUIET, ROOT, compose_config, environment, untimed

SUMMARY_KEYS = ("acr", "certified_accuracy", "abstain_rate", "num_images", "radius_cap", "subset", "model_fingerprint")


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "rsbench.certify", *args]


def finished(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(*args), cwd=ROOT, env=environment(), capture_output=True, text=True, timeout=3000)


@pytest.mark.slow  # four commands, each importing torch: a minute or two on 2 busy cores
def test_a_multirun_of_shards_killed_and_resumed_merges_to_the_unsharded_rows(
    smoke_checkpoint: Path, tmp_path: Path
) -> None:
    settings = (f"model.path={smoke_checkpoint}", "certify=smoke", "certify.n=1000", "certify.max_images=24")
    alone = finished(*settings, f"hydra.run.dir={tmp_path / 'whole'}")
    assert alone.returncode == 0, alone.stderr

    sweep = tmp_path / "sweep"
    shards = (*settings, "certify.num_shards=2", "certify.shard=0,1", f"hydra.sweep.dir={sweep}")
    log = tmp_path / "first.log"
    with log.open("wb") as out:
        first = subprocess.Popen(command("-m", *shards), cwd=ROOT, env=environment(), stdout=out, stderr=out)
    record = sweep / "certify.shard0-of-2.tsv"
    deadline = time.monotonic() + 600
    while not (record.exists() and len(record.read_text().splitlines()) >= 3):  # the header and two rows
        assert first.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "shard 0 never certified two images"
        time.sleep(0.02)
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=300) == 128 + signal.SIGTERM
    stopped = record.read_text()
    assert 2 <= len(read_rows(record)) < 12  # shard 0 of 24 images: 12, stopped part-way
    assert not (sweep / "metrics.json").exists()
    shard_dir = next(sweep.glob("0_*"))
    assert json.loads((shard_dir / "status.json").read_text())["status"] == "interrupted"

    resumed = finished(f"resume={shard_dir}")  # the shard alone, as its status.json says
    assert resumed.returncode == 0, resumed.stderr
    assert "shards 1 (12 images) of 2 are still to finish" in resumed.stdout + resumed.stderr
    assert record.read_text().startswith(stopped)  # its rows kept; it went on after them

    rest = finished("-m", *shards)  # the sweep again: shard 0 has nothing left, shard 1 certifies and merges
    assert rest.returncode == 0, rest.stderr
    assert untimed(sweep / "certify.tsv") == untimed(tmp_path / "whole" / "certify.tsv")
    merged, whole = (json.loads((d / "metrics.json").read_text()) for d in (sweep, tmp_path / "whole"))
    assert {k: merged[k] for k in SUMMARY_KEYS} == {k: whole[k] for k in SUMMARY_KEYS}
    assert not list(sweep.glob("certify.shard*"))


def documented_arrays() -> list[list[str]]:
    """The SLURM array commands docs/scale_out.md and docs/sharding.md show, as a shell splits them."""
    found = []
    for page in ("scale_out.md", "sharding.md"):
        text = re.sub(r"\\\n\s*", " ", (ROOT / "docs" / page).read_text())
        found += [
            shlex.split(line) for line in re.findall(r"python -m rsbench\.certify -m hydra/launcher=slurm .*", text)
        ]
    return found


def test_the_documented_slurm_array_of_shards_composes(smoke_checkpoint: Path) -> None:
    """The SLURM array the docs show: one of its shards' launcher config resolves, without submitting anything.

    The command is read from the pages; the checkpoint becomes the smoke model and the sweep over the shards one
    shard (``--cfg`` shows one job), everything else as written.
    """
    arrays = documented_arrays()
    assert len(arrays) >= 2, "docs/scale_out.md and docs/sharding.md show the SLURM array"
    for words in arrays:
        assert any(w.startswith("certify.num_shards=") for w in words)
        assert any(w.startswith("certify.shard=range(") for w in words)
        overrides = [
            f"model.path={smoke_checkpoint}"
            if w.startswith("model.path=")
            else "certify.shard=0"
            if w.startswith("certify.shard=")
            else w
            for w in words[3:]
            if w != "-m"
        ]
        shown = finished(*overrides, "--cfg", "hydra", "--resolve", "-p", "hydra.launcher")
        assert shown.returncode == 0, (words, shown.stderr)
        assert "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher" in shown.stdout
        assert "array_parallelism: 64" in shown.stdout


def test_python_m_rsbench_shards_a_trained_checkpoint_and_refuses_to_train_in_shards(
    smoke_run: Path, tmp_path: Path
) -> None:
    checkpoint = smoke_run / "checkpoints" / "best.ckpt"
    merged = tmp_path / "merged"
    for shard in (0, 1):
        cfg = compose_config(
            "experiment=smoke",
            *QUIET,
            "train=false",
            f"ckpt_path={checkpoint}",
            "certify.num_shards=2",
            f"certify.shard={shard}",
            f"certify.merge_dir={merged}",
            output_dir=tmp_path / f"shard{shard}",
        )
        run(cfg)
    assert untimed(merged / "certify.tsv") == untimed(smoke_run / "certify.tsv")  # the smoke run certified best.ckpt
    with pytest.raises(ConfigError, match=r"train once .*, then certify its checkpoint in shards with train=false"):
        run(compose_config("experiment=smoke", *QUIET, "certify.num_shards=2", output_dir=tmp_path / "trains"))
