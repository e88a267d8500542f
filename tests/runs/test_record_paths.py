"""Records name files relative to their run folder or the working directory, and are written whole or not at all.

:mod:`rsbench.files`: the one rule (relative to the record's folder, else to the working directory, else absolute)
and the one atomic write; then what the records of a run say under that rule, a run folder moved and certified
again, and records older rsbench wrote with absolute paths.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from rsbench.files import atomic_path, record_path, write_text_atomically
from rsbench.report.load import read_run
from rsbench.runs.certify_callback import recorded_hparams
from rsbench.runs.status import write_status
from tests.helpers import certify, rows

# ------------------------------------------------------------------------------------------- the rule


def test_a_file_in_the_records_folder_is_named_relative_to_it(tmp_path: Path) -> None:
    run = tmp_path / "outputs" / "run"
    assert record_path(run / "checkpoints" / "best.ckpt", run) == "checkpoints/best.ckpt"
    assert record_path(str(run / "checkpoints" / ".." / "model.ckpt"), run) == "model.ckpt"  # normalized


def test_a_file_elsewhere_in_the_working_directory_is_named_relative_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "outputs" / "run"
    assert record_path(tmp_path / "models" / "m.ckpt", run) == "models/m.ckpt"
    assert record_path("models/m.ckpt", run) == "models/m.ckpt"  # typed relative: kept
    assert record_path(tmp_path / "outputs" / "run") == "outputs/run"  # for a command pasted from here


def test_only_a_file_outside_both_keeps_its_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    assert record_path(tmp_path / "data" / "m.ckpt", tmp_path / "repo" / "run") == str(tmp_path / "data" / "m.ckpt")
    assert record_path("../data/m.ckpt") == str(tmp_path / "data" / "m.ckpt")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert record_path("~/m.ckpt") == str(tmp_path / "home" / "m.ckpt")


def test_a_link_in_the_tree_keeps_its_name_in_the_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "repo").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "repo" / "models")
    monkeypatch.chdir(tmp_path / "repo")
    assert record_path(tmp_path / "repo" / "models" / "m.ckpt") == "models/m.ckpt"


# ------------------------------------------------------------------------------------------- atomic writes


def test_an_atomic_write_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "new" / "metrics.json"  # its folder is created
    write_text_atomically(path, "one\n")
    write_text_atomically(path, "two\n")
    assert path.read_text() == "two\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["metrics.json"]


def test_a_write_that_fails_midway_leaves_the_old_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    path.write_text("old\n")

    def cut_short() -> None:
        with atomic_path(path) as temporary:
            temporary.write_text("half")
            raise RuntimeError("cut")

    with pytest.raises(RuntimeError, match="cut"):
        cut_short()
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["status.json"]


# ------------------------------------------------------------------------------------------- what runs record


def test_status_json_says_resume_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_status(tmp_path / "outputs" / "run", "interrupted", ["sigma=0.25"], module="rsbench.certify")
    status = json.loads((tmp_path / "outputs" / "run" / "status.json").read_text())
    assert status["resume"] == "python -m rsbench.certify resume=outputs/run"


def test_a_methods_checkpoint_arguments_are_recorded_by_the_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    hparams = {"teacher_ckpt": str(tmp_path / "teachers" / "t.ckpt"), "teacher_cache_dir": "", "lbd": 2.0}
    module = SimpleNamespace(method_name="catrs", method_hparams=lambda: dict(hparams))
    recorded = recorded_hparams(module, tmp_path / "outputs" / "run")  # type: ignore[arg-type]
    assert recorded == {"teacher_ckpt": "teachers/t.ckpt", "teacher_cache_dir": "", "lbd": 2.0}


def test_metrics_json_names_the_model_relative_to_the_run_or_the_working_directory(
    smoke_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "models" / "m.ckpt"
    model.parent.mkdir()
    shutil.copyfile(smoke_checkpoint, model)
    metrics = certify(tmp_path / "outputs" / "a", f"model.path={model}")  # typed absolute
    assert metrics["model"]["path"] == "models/m.ckpt"
    inside = tmp_path / "outputs" / "b" / "m.ckpt"
    inside.parent.mkdir(parents=True)
    shutil.copyfile(smoke_checkpoint, inside)
    assert certify(inside.parent, f"model.path={inside}")["model"]["path"] == "m.ckpt"
    members = certify(tmp_path / "outputs" / "c", "model=ensemble", f"model.members=[{model},{model}]")
    assert [m["path"] for m in members["model"]["members"]] == ["models/m.ckpt", "models/m.ckpt"]


def test_a_moved_run_folder_still_names_its_model_and_certifies_again_from_its_rows(
    smoke_checkpoint: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copyfile(smoke_checkpoint, run / "model.ckpt")
    first = certify(run, f"model.path={run / 'model.ckpt'}")
    moved = tmp_path / "elsewhere" / "run"
    shutil.move(run, moved)
    assert (moved / first["model"]["path"]).is_file()  # the record still names the model, in its new place
    before = rows(moved)
    again = certify(moved, f"model.path={moved / 'model.ckpt'}")  # resumes: every row is there, none recomputed
    assert rows(moved) == before
    assert (again["acr"], again["model"]["path"]) == (first["acr"], "model.ckpt")


def test_records_older_rsbench_wrote_with_absolute_paths_still_read_and_resume(
    smoke_checkpoint: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    certify(run, f"model.path={smoke_checkpoint}")
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["model"]["path"] = "/work/jobs/old_machine/checkpoints/best.ckpt"  # as an older rsbench wrote it
    (run / "metrics.json").write_text(json.dumps(metrics, indent=2))
    (result,) = read_run(run)
    acr = float((result.records["radius"] * result.records["correct"]).mean())
    assert acr == pytest.approx(metrics["acr"], abs=1e-12)  # the same rows, summed in another order
    before = rows(run)
    again = certify(run, f"model.path={smoke_checkpoint}")
    assert rows(run) == before
    assert again["model"]["path"] == str(smoke_checkpoint)  # outside the run and the working directory: absolute
