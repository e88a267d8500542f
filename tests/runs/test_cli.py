"""The real entry point in subprocesses: stop, resume, two writers, sweeps, bad requests, the installed command."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from rsbench.certify.pipeline.records import read_rows
from rsbench.runs.job import run_with_prerequisites
from rsbench.runs.prerequisites import plan_prerequisites
from tests.helpers import HEAVY, QUIET, ROOT, compose_config, environment


def rsbench(
    *args: str, cwd: Path = ROOT, timeout: float = 600, module: str = "rsbench", **env: str
) -> subprocess.CompletedProcess[str]:
    """``python -m <module> <args>``, waited for; stdout and stderr captured as text (``env``: more variables)."""
    command = [sys.executable, "-m", module, *args]
    return subprocess.run(command, cwd=cwd, env=environment(**env), capture_output=True, text=True, timeout=timeout)


def start(*args: str, log: Path, module: str = "rsbench") -> subprocess.Popen[bytes]:
    """``python -m <module> <args>`` in the background, its output going to ``log``.

    The child gets Ctrl-C's default disposition back: a test session started in the background by a shell (``&``)
    ignores SIGINT, children inherit that, and a run leaves an ignored signal ignored.
    """
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            env=environment(),
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )


def wait_until(
    condition: Callable[[], bool], process: subprocess.Popen[bytes], what: str, seconds: float = 300
) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"the run ended (status {process.returncode}) before {what}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.02)


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines a failed command printed as its error, after checking it printed no traceback or wrapper."""
    output = result.stdout + result.stderr
    for noise in ("Traceback", "Error in call to target", "full_key", "HYDRA_FULL_ERROR", "Error executing job"):
        assert noise not in output, output
    return [line for line in result.stderr.splitlines() if line.startswith("rsbench: error:")]


def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``directory`` with its size and modification time."""
    return {
        str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in directory.rglob("*")
        if p.is_file()
    }


# ---------------------------------------------------------------------------------------------------- queries are cheap


@pytest.mark.parametrize(
    "query", [["--help"], ["method=catrs", "dataset=cifar10", "sigma=1.0", "--cfg", "job", "--resolve"]]
)
def test_queries_import_nothing_heavy(query: list[str]) -> None:
    """--help and --cfg job answer without torch, scipy, pandas, ... (the timing itself: rsbench.bench.cli_startup)."""
    script = (
        "import sys\n"
        f"sys.argv = ['rsbench', *{query!r}]\n"
        "from rsbench.__main__ import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=environment(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "HEAVY []" in result.stdout
    if "--help" in query:
        assert "resume=" in result.stdout
        assert "hparams_search: consistency_acr" in result.stdout
    else:
        assert "lbd: 2.0" in result.stdout  # the authors' CAT-RS lambda for CIFAR-10 at sigma 1.0, looked up
        assert "None/checkpoints" not in result.stdout  # issue 21: where the run would write, not None
        assert "dirpath: outputs/cifar10/catrs/sigma_1.0/" in result.stdout


@pytest.mark.parametrize(
    ("module", "shown"),
    [
        ("rsbench.certify", "resume="),
        ("rsbench.importer", "origin: catrs | cohen | consistency | ddrs | macer | smoothadv | smoothmix"),
    ],
)
def test_the_other_commands_help_imports_nothing_heavy(module: str, shown: str, tmp_path: Path) -> None:
    """Issue 21: their --help took 5 s (torch); the importer's crashed without dataset= and listed no origin."""
    script = (
        "import runpy, sys\n"
        f"sys.argv = [{module!r}, '--help']\n"
        "try:\n"
        f"    runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"
        "except SystemExit:\n    pass\n"
        f"print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=environment(), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "HEAVY []" in result.stdout
    assert shown in result.stdout
    assert "Traceback" not in result.stderr


def test_a_run_reexecutes_for_the_allocator_before_importing_torch() -> None:
    script = (
        "import json, os, sys\n"
        "def execve(path, args, env):\n"
        "    seen = {'torch': 'torch' in sys.modules, 'args': args[1:], 'tunables': env['GLIBC_TUNABLES']}\n"
        "    print(json.dumps(seen))\n"
        "    sys.exit(0)\n"
        "os.execve = execve\n"
        "sys.argv = ['rsbench', 'experiment=smoke']\n"
        "from rsbench.__main__ import main\n"
        "main()\n"
    )
    env = {
        key: value for key, value in environment().items() if key not in ("RSBENCH_KEEP_ALLOCATOR", "GLIBC_TUNABLES")
    }
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    if not result.stdout.strip():
        pytest.skip("no glibc: nothing to re-execute for")
    seen = json.loads(result.stdout)
    assert seen == {"torch": False, "args": ["-m", "rsbench", "experiment=smoke"], "tunables": seen["tunables"]}
    assert "malloc" in seen["tunables"]


def test_python_m_rsbench_works_from_any_directory(tmp_path: Path) -> None:
    result = rsbench("sigma=0.5", "--cfg", "job", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "sigma: 0.5" in result.stdout


# ---------------------------------------------------------------------------------------------------- bad requests


def test_bad_requests_end_in_one_line_and_leave_nothing_behind(tmp_path: Path) -> None:
    """From a fresh working directory, so that any output folder the run created would show."""
    damaged = tmp_path / "damaged.ckpt"
    damaged.write_bytes(b"\x80\x04not a checkpoint")
    cases = {  # certify.alpha=2 and the other constructor checks are unwrapped the same way (test_job.py)
        ("certify.n=0",): "certify.n must be an integer >= 1, got 0",
        ("train=false", f"ckpt_path={damaged}"): f"ckpt_path={damaged} cannot be read",
        ("certify.start=500", "certify.skip=20", "certify.max_images=100"): (  # issue 21: it reported ACR 0
            "certify.start=500 selects no test image: the mnist_embedded test split has 500 images"
        ),
        ("certify=sequential", "certify.radius_cap=1.0"): (  # issue 21: it drew all n samples of every image
            "certify.radius_cap=1 cannot be reached at sigma=0.25 with certify.n=100000 and certify.alpha=0.001"
        ),
    }
    work = tmp_path / "work"
    work.mkdir()
    for overrides, message in cases.items():
        result = rsbench(*overrides, "logger=none", cwd=work)
        assert result.returncode == 2, result.stdout + result.stderr
        lines = error_lines(result)
        assert len(lines) == 1
        assert message in lines[0]
        assert list(work.iterdir()) == []  # no outputs/<dataset>/<method>/... left behind


@pytest.mark.parametrize(
    ("module", "overrides", "message"),
    [
        ("rsbench", ["sigma=abc"], "sigma must be a number > 0 (e.g. 0.25, 0.5, 1.0), got 'abc'"),
        ("rsbench", ["-m", "sigma=0.25,abc"], "sigma must be a number > 0 (e.g. 0.25, 0.5, 1.0), got 'abc'"),
        ("rsbench", ["trainer.max_epochs=abc"], "trainer.max_epochs must be a whole number of epochs"),
        (
            "rsbench",
            ["method=catr"],
            "method=catr is not an option of method; did you mean catrs? (the method options:",
        ),
        ("rsbench", ["dataset=cifar"], "did you mean cifar10 or cifar100?"),
        ("rsbench", ["certify=sequentail"], "did you mean sequential?"),
        ("rsbench", ["sigmaa=0.5"], "there is no key sigmaa in the config; did you mean sigma?"),
        ("rsbench", ["train=maybe"], "train must be true or false, got 'maybe'"),
        ("rsbench.certify", ["model=checkpont"], "did you mean checkpoint?"),
        ("rsbench.importer", ["origin=cohn", "path=x", "dataset=cifar10", "sigma=0.25"], "did you mean cohen?"),
        ("rsbench.importer", ["origin=cohen", "path=x", "sigma=0.25"], "dataset= is required"),
    ],
)
def test_a_bad_value_or_name_is_refused_at_once_with_the_allowed_ones(
    module: str, overrides: list[str], message: str, tmp_path: Path
) -> None:
    """Issue 21's papercuts: refused before torch is imported, naming the value, what is allowed and the close names."""
    started = time.monotonic()
    result = rsbench(*overrides, cwd=tmp_path, module=module)
    assert result.returncode == 2
    lines = error_lines(result)
    assert len(lines) == 1
    assert message in lines[0]
    assert list(tmp_path.iterdir()) == []
    assert time.monotonic() - started < 30  # (seconds on an idle machine; a run's imports alone take longer)


# ---------------------------------------------------------------------------------------------------- stop and resume


@pytest.mark.slow  # 30-60 s on a quiet 2-core machine: make test-all
def test_sigterm_stops_certification_after_a_whole_row_and_a_second_writer_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    command = (
        "experiment=smoke",
        "logger=none",
        "certify.n=10000",
        "certify.max_images=500",
        f"hydra.run.dir={run_dir}",
    )
    first = start(*command, log=tmp_path / "first.log")
    tsv = run_dir / "certify.tsv"
    wait_until(lambda: tsv.exists() and len(tsv.read_text().splitlines()) > 3, first, "three images were certified")
    config = (run_dir / ".hydra" / "config.yaml").read_bytes()

    second = rsbench(*command)
    assert second.returncode == 2
    assert f"{run_dir} is in use by pid {first.pid}" in error_lines(second)[0]
    assert (run_dir / ".hydra" / "config.yaml").read_bytes() == config
    assert json.loads((run_dir / "status.json").read_text())["pid"] == first.pid

    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=120) == 128 + signal.SIGTERM
    log = (tmp_path / "first.log").read_text()
    assert f"stopped by SIGTERM. Resume with: python -m rsbench resume={run_dir}" in log
    stopped = tsv.read_text()
    rows = read_rows(tsv)
    assert len(rows) < 500
    assert stopped.endswith("\n")  # the last row is whole
    assert json.loads((run_dir / "status.json").read_text())["status"] == "interrupted"

    last = run_dir / "checkpoints" / "last.ckpt"
    trained = last.read_bytes()
    more = len(rows) + 2  # certify.max_images may grow on resume: finish quickly with two more images
    resumed = rsbench(f"resume={run_dir}", f"certify.max_images={more}")
    assert resumed.returncode == 0, resumed.stderr
    assert "going straight to testing and certification" in resumed.stdout
    assert last.read_bytes() == trained  # training was not repeated
    assert tsv.read_text().startswith(stopped)  # every earlier row kept as it was
    assert [r.idx for r in read_rows(tsv)] == list(range(more))
    assert json.loads((run_dir / "status.json").read_text())["status"] == "completed"


@pytest.mark.slow  # 30-60 s on a quiet 2-core machine: make test-all
def test_python_m_rsbench_certify_has_the_same_lifecycle(smoke_checkpoint: Path, tmp_path: Path) -> None:
    """Issue 21: one error line and no stub folder, one writer per folder, a safe stop with its resume hint, resume=."""
    work = tmp_path / "work"
    work.mkdir()
    missing = rsbench("model.path=missing.ckpt", "certify=smoke", cwd=work, module="rsbench.certify")
    assert missing.returncode == 2
    assert error_lines(missing) == ["rsbench: error: model: checkpoint missing.ckpt is not a file"]
    assert list(work.iterdir()) == []  # no outputs/... stub left behind

    run_dir = tmp_path / "certify"
    command = (f"model.path={smoke_checkpoint}", "certify=smoke", "certify.n=10000", "certify.max_images=500")
    first = start(*command, f"hydra.run.dir={run_dir}", log=tmp_path / "first.log", module="rsbench.certify")
    tsv = run_dir / "certify.tsv"
    wait_until(lambda: tsv.exists() and len(tsv.read_text().splitlines()) > 3, first, "three images were certified")
    second = rsbench(*command, f"hydra.run.dir={run_dir}", module="rsbench.certify")
    assert second.returncode == 2
    assert f"{run_dir} is in use by pid {first.pid}" in error_lines(second)[0]

    first.send_signal(signal.SIGINT)
    assert first.wait(timeout=120) == 128 + signal.SIGINT
    assert f"Resume with: python -m rsbench.certify resume={run_dir}" in (tmp_path / "first.log").read_text()
    status = json.loads((run_dir / "status.json").read_text())
    assert (status["status"], status["resume"]) == ("interrupted", f"python -m rsbench.certify resume={run_dir}")
    stopped = tsv.read_text()
    assert stopped.endswith("\n")
    more = len(read_rows(tsv)) + 2
    resumed = rsbench(f"resume={run_dir}", f"certify.max_images={more}", module="rsbench.certify")
    assert resumed.returncode == 0, resumed.stderr
    assert tsv.read_text().startswith(stopped)
    assert [r.idx for r in read_rows(tsv)] == list(range(more))
    assert json.loads((run_dir / "status.json").read_text())["status"] == "completed"
    assert (run_dir / "certify.log").is_file()  # named for the command, not Hydra's __main__.log
    wrong = rsbench(f"resume={run_dir}")
    assert error_lines(wrong) == [
        f"rsbench: error: {run_dir} is a run of python -m rsbench.certify, not of python -m rsbench: resume it with "
        f"python -m rsbench.certify resume={run_dir}"
    ]


@pytest.mark.slow  # two trainings (interrupted + resumed, and uninterrupted): over 3 minutes on 2 busy cores
def test_sigint_during_training_keeps_the_last_epoch_and_resume_finishes_the_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    command = (
        "experiment=smoke",
        "trainer.max_epochs=5",  # enough epochs that a loaded machine still signals during training
        "trainer.limit_train_batches=300",
        "dataset.batch_size=8",
        "certify=off",
        "logger=csv",
        "trainer.enable_progress_bar=false",
        f"hydra.run.dir={run_dir}",
    )
    first = start(*command, log=tmp_path / "first.log")
    last = run_dir / "checkpoints" / "last.ckpt"
    wait_until(last.exists, first, "the first epoch was saved")
    first.send_signal(signal.SIGINT)
    assert first.wait(timeout=120) == 128 + signal.SIGINT
    assert "Resume with: python -m rsbench resume=" in (tmp_path / "first.log").read_text()
    epoch = torch.load(last, map_location="cpu", weights_only=False)["epoch"]
    assert epoch < 4  # stopped before the end, at an epoch boundary (the partial epoch was dropped)
    config = (run_dir / ".hydra" / "config.yaml").read_bytes()
    with (run_dir / "logs" / "metrics.csv").open() as file:
        before = list(csv.DictReader(file))

    files = snapshot(run_dir)
    refused = rsbench(f"resume={run_dir}", "sigma=0.5")
    assert refused.returncode == 2
    assert "sigma: the run has 0.25, this command asks for 0.5" in refused.stderr
    assert snapshot(run_dir) == files  # the refusal touched nothing

    resumed = rsbench(f"resume={run_dir}")
    assert resumed.returncode == 0, resumed.stderr
    assert f"continuing training at epoch {epoch + 2} of 5" in resumed.stdout
    assert torch.load(last, map_location="cpu", weights_only=False)["epoch"] == 4
    assert (run_dir / ".hydra" / "config.yaml").read_bytes() == config
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
    with (run_dir / "logs" / "metrics.csv").open() as file:
        after = list(csv.DictReader(file))
    assert {row["epoch"] for row in after if row["train/loss_epoch"]} == {"0", "1", "2", "3", "4"}  # every epoch
    kept = {(row["epoch"], row["step"], row.get("train/loss_step", "")) for row in before}
    assert kept <= {(row["epoch"], row["step"], row.get("train/loss_step", "")) for row in after}  # appended to
    steps = [(row["epoch"], row["step"]) for row in after if row.get("train/loss_step")]
    assert len(steps) == len(set(steps))  # issue 21: the cut epoch's rows were kept, then logged again

    # Issue 21: the resumed run ends with the model an uninterrupted one makes, bit for bit.
    reference = tmp_path / "uninterrupted"
    uninterrupted = rsbench(*command[:-1], f"hydra.run.dir={reference}")
    assert uninterrupted.returncode == 0, uninterrupted.stderr
    ours, theirs = (torch.load(d / "checkpoints" / "last.ckpt", weights_only=False) for d in (run_dir, reference))
    assert ours["state_dict"].keys() == theirs["state_dict"].keys()
    assert all(torch.equal(ours["state_dict"][k], theirs["state_dict"][k]) for k in ours["state_dict"])
    with (reference / "logs" / "metrics.csv").open() as file:
        expected = {(r["epoch"], r["step"], r["train/loss_step"]) for r in csv.DictReader(file) if r["train/loss_step"]}
    assert {(r["epoch"], r["step"], r["train/loss_step"]) for r in after if r["train/loss_step"]} == expected


@pytest.mark.parametrize("bar", [(), ("trainer.enable_progress_bar=false",)], ids=["default", "bar-off"])
def test_progress_reaches_a_log_file_as_lines(tmp_path: Path, bar: tuple[str, ...]) -> None:
    """Issue 21: under a pipe, nohup or SLURM training printed nothing for minutes, certification one long line.

    Also with the bar turned off, as the experiment scripts do for a quiet log: an hour-long training then logged
    nothing until its end (found on the paper-scale Fashion-MNIST runs, issue 19).
    """
    run_dir = tmp_path / "run"
    result = rsbench("experiment=smoke", "logger=none", f"hydra.run.dir={run_dir}", *bar, RSBENCH_PROGRESS_SECONDS="0")
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert "\r" not in output  # no bar redrawn in place
    assert "it/s" not in output  # neither Lightning's training bar nor its test bar
    assert "Epoch 0" not in output
    log = (run_dir / "rsbench.log").read_text()  # named for the command, not Hydra's __main__.log
    assert "epoch 1/1, batch 1/4: train/loss " in log
    assert "images/s, about " in log  # the pace and the time left
    assert re.search(r"left in the epoch, about \S+ (s|min|h) left in the run", log)  # time left, not time spent
    assert "epoch 1/1 done in " in log
    assert "certifying (certify): 1 of 8 images (" in log
    assert "certifying (certify): 8 of 8 images (" in log
    assert "test split: acc_clean " in log  # one line, not Lightning's table after rsbench's summary
    assert "test/acc_clean" not in output


# ---------------------------------------------------------------------------------------------------- sweeps


def test_a_sweep_runs_every_job_and_lists_the_failed_ones(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    result = rsbench("-m", "experiment=smoke", "logger=none", "certify.alpha=2,0.01", f"hydra.sweep.dir={sweep}")
    assert result.returncode == 1, result.stderr  # a job failed
    assert "Traceback" not in result.stdout + result.stderr
    with (sweep / "sweep_summary.tsv").open() as file:
        jobs = {row["job"].split("_")[0]: row for row in csv.DictReader(file, delimiter="\t")}  # "<n>_<overrides>"
    assert jobs["0"]["status"] == "failed"
    assert "certify.alpha=2" in jobs["0"]["overrides"]
    assert "alpha must be in (0, 1)" in jobs["0"]["error"]
    assert jobs["1"]["status"] == "completed"  # the job after the failure ran
    assert float(jobs["1"]["objective"]) == pytest.approx(
        json.loads((sweep / jobs["1"]["job"] / "metrics.json").read_text())["acr"], rel=1e-5
    )
    assert "1 of 2 jobs completed" in result.stdout + result.stderr


@pytest.mark.slow  # a sweep, then three resumes: 100 s on 2 busy cores
def test_a_sweep_jobs_folder_resumes_with_the_command_rsbench_printed(tmp_path: Path) -> None:
    """Issue 21: folders named `<n>_key=value,...` broke Hydra's grammar in resume=, ckpt_path=, model.members=."""
    sweep = tmp_path / "sweep"
    overrides = ("experiment=smoke", "logger=none", "trainer.enable_progress_bar=false")
    result = rsbench("-m", *overrides, "certify.alpha=0.001,0.01", f"hydra.sweep.dir={sweep}")
    assert result.returncode == 0, result.stderr
    job = sweep / "1_certify.alpha-0.01_experiment-smoke"
    hint = json.loads((job / "status.json").read_text())["resume"]
    assert hint == f"python -m rsbench resume={job}"

    def pasted(command: str, *more: str) -> subprocess.CompletedProcess[str]:
        """``command`` as a user pastes it into bash (with this interpreter for ``python``)."""
        line = " ".join([command.replace("python", shlex.quote(sys.executable), 1), *more])
        return subprocess.run(["bash", "-c", line], cwd=ROOT, env=environment(), capture_output=True, text=True)

    resumed = pasted(hint, "certify.max_images=9")
    assert resumed.returncode == 0, resumed.stderr
    assert len(read_rows(job / "certify.tsv")) == 9  # (ckpt_path=<job>/checkpoints/...: test_naming's grammar check)

    old = sweep / "1_certify.alpha=0.01,experiment=smoke"  # a folder named by an older rsbench
    job.rename(old)
    quoted = rsbench(f"resume='{old}'", "certify.max_images=10")  # as Hydra quotes a value
    assert quoted.returncode == 0, quoted.stderr
    assert len(read_rows(old / "certify.tsv")) == 10
    hint = json.loads((old / "status.json").read_text())["resume"]
    assert pasted(hint, "certify.max_images=11").returncode == 0
    assert len(read_rows(old / "certify.tsv")) == 11


@pytest.mark.slow  # 27 s on 2 idle cores: an Optuna search of several trials
@pytest.mark.skipif(
    importlib.util.find_spec("hydra_plugins.hydra_optuna_sweeper") is None, reason="pip install -e '.[optuna]'"
)
def test_an_optuna_search_goes_on_after_a_failed_trial(tmp_path: Path) -> None:
    sweep = tmp_path / "search"
    result = rsbench(
        "-m",
        "hydra/sweeper=optuna",
        "hydra/sweeper/sampler=random",
        "hydra.sweeper.sampler.seed=10",  # with Optuna 2.10, trial 0 draws lbd=-1.0 (invalid), trial 1 draws 5.0
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.direction=maximize",
        "hydra.sweeper.max_failure_rate=1.0",
        "method=consistency",
        "method.lbd=choice(-1.0,5.0)",
        "experiment=smoke",
        "logger=none",
        f"hydra.sweep.dir={sweep}",
    )
    assert result.returncode == 1, result.stderr
    with (sweep / "sweep_summary.tsv").open() as file:
        jobs = list(csv.DictReader(file, delimiter="\t"))
    by_lbd = {("method.lbd=-1.0" in job["overrides"]): job for job in jobs}
    assert by_lbd[True]["status"] == "failed"
    assert "must be a finite number >= 0, got -1.0" in by_lbd[True]["error"]
    assert by_lbd[False]["status"] == "completed"
    assert (sweep / "optimization_results.yaml").read_text().count("method.lbd: 5.0") == 1


# ---------------------------------------------------------------------------------------------------- CAT-RS teacher


@pytest.mark.slow  # 30-60 s on a quiet 2-core machine: make test-all
def test_catrs_without_a_teacher_trains_the_gaussian_teacher_first_then_reuses_it(tmp_path: Path, caplog) -> None:
    teachers = tmp_path / "teachers"  # the folder CAT-RS's card names, under prerequisite_dir
    overrides = (
        *("method=catrs", "experiment=smoke", "dataset.batch_size=32"),  # the smoke run's teacher votes N = 16
        f"prerequisite_dir={tmp_path}",
    )
    result = rsbench(*overrides, "logger=none", "certify.max_images=2", f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 0, result.stderr
    (teacher,) = (teachers / "mnist_embedded").iterdir()
    assert teacher.name.startswith("lenet_sigma0.25_seed0_")
    assert (
        f"training the sigma=0.25 Gaussian model of mnist_embedded with this recipe first, in {teacher}"
        in result.stdout
    )
    best = teacher / "checkpoints" / "best.ckpt"
    assert torch.load(best, map_location="cpu", weights_only=False)["rsbench"]["method"] == "gaussian"
    student = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert student["hyper_parameters"]["teacher_ckpt"] == str(best)

    cfg = compose_config(*overrides, *QUIET, "certify=off", output_dir=tmp_path / "again")  # the same recipe
    with caplog.at_level("INFO", logger="rsbench"):
        run_with_prerequisites(cfg)
    assert f"CAT-RS teacher: reusing {best}" in caplog.text


# ---------------------------------------------------------------------------------------------------- installed command


def test_the_installed_command_with_the_users_own_configs(tmp_path: Path) -> None:
    """Build a wheel, install it (without dependencies) into a folder, and run its ``rsbench`` command elsewhere.

    The wheel is built from a copy of the checkout without build isolation (no network): it needs setuptools.
    """
    pytest.importorskip("setuptools")
    source = tmp_path / "source"
    source.mkdir()
    for name in ("setup.py", "setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "rsbench", source / "rsbench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "conf", source / "conf", ignore=shutil.ignore_patterns("__pycache__", "local"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", ".", "-w", str(tmp_path / "dist")], cwd=source, check=True
    )
    (wheel,) = (tmp_path / "dist").glob("rsbench-*.whl")
    target = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True)

    user = tmp_path / "user"
    (user / "conf" / "method").mkdir(parents=True)
    (user / "mymethods.py").write_text(
        "from rsbench.methods import GaussianAugmentation\n\n\n"
        "class Mine(GaussianAugmentation):\n    method_name = 'mine'\n"
    )
    (user / "conf" / "method" / "mine.yaml").write_text(
        "_target_: mymethods.Mine\nsigma: ${sigma}\nallow_sigma_mismatch: ${allow_sigma_mismatch}\n"
    )
    env = {**environment(), "PYTHONPATH": f"{target}{os.pathsep}{user}"}
    where = subprocess.run(
        [sys.executable, "-c", "import rsbench; print(rsbench.__file__)"],
        cwd=user,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip() == str(target / "rsbench" / "__init__.py")

    command = [str(target / "bin" / "rsbench")]
    as_module = [sys.executable, "-m", "rsbench"]
    shown = [
        subprocess.run(
            [*c, "sigma=0.5", "--cfg", "job"], cwd=user, env=env, capture_output=True, text=True, check=True
        ).stdout
        for c in (command, as_module)
    ]
    assert shown[0] == shown[1]
    assert "sigma: 0.5" in shown[0]

    searchpath = f"hydra.searchpath=[file://{user / 'conf'}]"
    result = subprocess.run(
        [
            *command,
            searchpath,
            "method=mine",
            "experiment=smoke",
            "logger=none",
            "certify.max_images=2",
            "hydra.run.dir=run",
        ],
        cwd=user,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((user / "run" / "metrics.json").read_text())["method"] == "mine"


def test_the_teacher_is_trained_with_the_students_schedule(make_cfg) -> None:
    """CAT-RS's MNIST recipe (150 epochs, drops at 51 and 101) comes from its method recipe; the authors trained the
    sigma = 0.25 teacher with the same schedule, which method=gaussian alone would not give (90 epochs)."""
    (teacher,) = plan_prerequisites(make_cfg("method=catrs", "dataset=mnist", "sigma=0.5"))
    assert teacher.prerequisite.argument == "teacher_ckpt"
    assert (teacher.cfg.method._target_, teacher.cfg.sigma) == ("rsbench.methods.GaussianAugmentation", 0.25)
    assert (teacher.cfg.trainer.max_epochs, list(teacher.cfg.scheduler.milestones)) == (150, [51, 101])
    assert teacher.cfg.dataset.name == "mnist"
    # in the folder CAT-RS's card names, under the run's prerequisite_dir (the run layer names no method's folder)
    assert teacher.directory.parent == Path("outputs") / "teachers" / "mnist"
