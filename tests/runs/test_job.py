"""The pieces that make a run safe to stop, resume and share, tested in process (the entry point: test_cli.py)."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import signal
import socket
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import OmegaConf
from torch.utils.data import DataLoader, TensorDataset

from rsbench.certify.pipeline.records import COLUMNS, RecordWriter, read_records, read_rows
from rsbench.data.download import socket_timeout, unreachable
from rsbench.errors import (
    ConfigError,
    DamagedFileError,
    DatasetUnavailableError,
    ResumeMismatchError,
    RunDirectoryBusyError,
    user_message,
)
from rsbench.methods import GaussianAugmentation
from rsbench.runs.cli import expand_resume, is_query, override_key
from rsbench.runs.job import store_certification_settings
from rsbench.runs.lock import RunLock
from rsbench.runs.loggers import CSVLogger
from rsbench.runs.resume import check_resumable
from rsbench.runs.run import build_callbacks, build_loggers, check_config, run
from rsbench.stop import StopGuard, StopRequested, raise_if_stop_requested, stop_requested
from tests.helpers import CONF_DIR, SGD, identity_linear, quiet_trainer, row


def stored_run(directory: Path, overrides: list[str], hydra_overrides: list[str] = ()) -> Path:
    (directory / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(overrides), directory / ".hydra" / "overrides.yaml")
    OmegaConf.save(
        OmegaConf.create({"hydra": {"overrides": {"hydra": list(hydra_overrides)}}}),
        directory / ".hydra" / "hydra.yaml",
    )
    return directory


# ---------------------------------------------------------------------------------------------------- the command line


def test_resume_replays_the_runs_overrides_and_lets_new_ones_win(tmp_path: Path) -> None:
    run_dir = stored_run(
        tmp_path / "run",
        ["method=consistency", "sigma=0.5", "certify.n=1000"],
        ["hydra.searchpath=[file:///x]", "hydra.run.dir=old"],
    )
    argv = ["certify.n=2000", f"resume={run_dir}", "--cfg", "job"]
    assert expand_resume(argv) == [
        "certify.n=2000",
        "method=consistency",
        "sigma=0.5",
        "hydra.searchpath=[file:///x]",
        "train_layout=contiguous",  # a default that changed since: the run keeps its own (none recorded: the old)
        f"hydra.run.dir={run_dir}",  # before the flags that follow resume=: after `--cfg job` argparse refuses it
        "--cfg",
        "job",
    ]
    assert expand_resume(["sigma=0.5"]) == ["sigma=0.5"]  # nothing to expand


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-m", "resume=RUN"], "continues one run"),
        (["resume=RUN", "hydra.run.dir=x"], "already sets hydra.run.dir"),
        (["resume=RUN", "resume=RUN"], "2 times"),
        (["resume=NOWHERE"], "no rsbench run there"),
    ],
)
def test_bad_resume_requests_are_refused_by_name(tmp_path: Path, argv: list[str], message: str) -> None:
    run_dir = stored_run(tmp_path / "run", ["sigma=0.5"])
    argv = [arg.replace("RUN", str(run_dir)).replace("NOWHERE", str(tmp_path / "nowhere")) for arg in argv]
    with pytest.raises(ConfigError, match=message):
        expand_resume(argv)


def test_override_keys_and_queries() -> None:
    assert override_key("+method.lbd=2") == "method.lbd"
    assert override_key("~certify.sigma=0.5") == "certify.sigma"
    assert override_key("hydra/launcher=slurm") == "hydra/launcher"
    assert override_key("--cfg") == ""
    assert is_query(["sigma=0.5", "--cfg", "job"])
    assert not is_query(["sigma=0.5", "-m"])


# ---------------------------------------------------------------------------------------------------- resume checks


def test_resume_refuses_changed_training_settings_by_name(make_cfg, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir(parents=True)
    OmegaConf.save(make_cfg("method=consistency", output_dir=run_dir), run_dir / ".hydra" / "config.yaml")
    check_resumable(
        make_cfg("method=consistency", "certify.n=77", "trainer.enable_progress_bar=false", output_dir=run_dir),
        run_dir,
        certified=False,
    )
    # method.lbd=10.0 is the value the lookup picks for mnist at sigma 0.25: the same setting, written out
    check_resumable(make_cfg("method=consistency", "method.lbd=10.0", output_dir=run_dir), run_dir, certified=False)
    with pytest.raises(ResumeMismatchError) as refused:
        check_resumable(
            make_cfg("method=consistency", "method.lbd=7", "trainer.max_epochs=3", output_dir=run_dir),
            run_dir,
            certified=False,
        )
    message = str(refused.value)
    assert "method.lbd: the run has 10.0, this command asks for 7" in message
    assert "trainer.max_epochs: the run has 20, this command asks for 3" in message
    assert f"resume={run_dir}" in message
    with pytest.raises(ResumeMismatchError, match=r"certify\.n: the run has 10000, this command asks for 77"):
        check_resumable(make_cfg("method=consistency", "certify.n=77", output_dir=run_dir), run_dir, certified=True)
    check_resumable(make_cfg("method=consistency", "certify.max_images=3", output_dir=run_dir), run_dir, certified=True)


def test_a_resume_that_changes_certification_before_any_row_is_what_later_resumes_compare_with(
    make_cfg, tmp_path: Path
) -> None:
    """Trained, not yet certified, resumed with certify.channels_last=true: its rows are certified that way, so the
    stored config and overrides take the new setting (the training ones stay) and the next resume, with rows, accepts
    it and refuses the old one (before, both were refused: the stored config said false, the rows true)."""
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir(parents=True)
    OmegaConf.save(make_cfg("method=gaussian", output_dir=run_dir), run_dir / ".hydra" / "config.yaml")
    OmegaConf.save(OmegaConf.create(["method=gaussian", "certify.n=500"]), run_dir / ".hydra" / "overrides.yaml")
    resumed = make_cfg("method=gaussian", "certify.channels_last=true", output_dir=run_dir)
    check_resumable(resumed, run_dir, certified=False)
    store_certification_settings(run_dir, resumed, ["method=gaussian", "certify.channels_last=true"])
    check_resumable(resumed, run_dir, certified=True)
    with pytest.raises(
        ResumeMismatchError, match=r"certify\.channels_last: the run has True, this command asks for False"
    ):
        check_resumable(make_cfg("method=gaussian", output_dir=run_dir), run_dir, certified=True)
    assert OmegaConf.to_container(OmegaConf.load(run_dir / ".hydra" / "overrides.yaml")) == [
        "method=gaussian",
        "certify.channels_last=true",  # certify.n=500 was not given again: the rows are certified without it
    ]
    stored = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    assert stored.certify.channels_last is True
    assert stored.trainer.max_epochs == resumed.trainer.max_epochs  # the training settings: kept as they were


def test_pointing_ckpt_path_at_the_runs_own_checkpoint_is_the_resume_itself(make_cfg, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir(parents=True)
    OmegaConf.save(make_cfg(output_dir=run_dir), run_dir / ".hydra" / "config.yaml")
    check_resumable(
        make_cfg(f"ckpt_path={run_dir}/checkpoints/last.ckpt", output_dir=run_dir), run_dir, certified=False
    )
    with pytest.raises(ResumeMismatchError, match="ckpt_path"):
        check_resumable(make_cfg(f"ckpt_path={tmp_path}/other.ckpt", output_dir=run_dir), run_dir, certified=False)


# ---------------------------------------------------------------------------------------------------- one writer


def test_a_held_directory_is_refused_with_the_holders_pid_and_freed_when_released(tmp_path: Path) -> None:
    busy = rf"in use by pid {os.getpid()} on {socket.gethostname()}"
    with RunLock(tmp_path / "run"), pytest.raises(RunDirectoryBusyError, match=busy):
        RunLock(tmp_path / "run").__enter__()  # flock locks belong to the open file: a second open conflicts
    with RunLock(tmp_path / "run"):  # released: free again
        pass


# ---------------------------------------------------------------------------------------------------- stop requests


def test_first_signal_is_a_request_the_second_stops_at_once() -> None:
    with StopGuard():
        assert stop_requested() is None
        raise_if_stop_requested()  # nothing asked yet
        os.kill(os.getpid(), signal.SIGUSR1)
        assert stop_requested() == signal.SIGUSR1
        with pytest.raises(StopRequested) as stop:
            raise_if_stop_requested()
        assert stop.value.exit_code == 128 + signal.SIGUSR1
        with pytest.raises(StopRequested):
            os.kill(os.getpid(), signal.SIGTERM)  # the handler raises in this thread, before the next bytecode
    assert stop_requested() is None
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the previous handlers are back


def test_signals_with_a_handler_of_their_own_are_left_to_it() -> None:
    """As submitit's: SIGUSR2 requeues the job (and exits), SIGTERM is ignored; the guard must not take them over."""
    seen: list[int] = []
    previous = signal.signal(signal.SIGUSR2, lambda signum, frame: seen.append(signum))
    try:
        with StopGuard():
            os.kill(os.getpid(), signal.SIGUSR2)
            assert seen == [signal.SIGUSR2]
            assert stop_requested() is None
    finally:
        signal.signal(signal.SIGUSR2, previous)


# ---------------------------------------------------------------------------------------------------- clear errors


def test_instantiation_errors_come_without_hydras_wrapper(make_cfg) -> None:
    with pytest.raises(ConfigError) as refused:
        build_callbacks(make_cfg("certify.n=0"))
    assert user_message(refused.value) == "certify.n must be an integer >= 1, got 0"
    with pytest.raises(ConfigError) as refused:
        build_callbacks(make_cfg("certify.alpha=2"))
    assert (
        user_message(refused.value) == "certify: alpha must be in (0, 1) (the failure probability, e.g. 0.001), got 2.0"
    )  # typed by the certify schema: 2 is the float 2.0
    cfg = make_cfg("method=catrs", "method.lbd=-1")
    net = instantiate(cfg.arch)
    with pytest.raises(InstantiationException) as wrapped:
        instantiate(cfg.method, net=net, optimizer=None)
    assert user_message(wrapped.value) == "method.lbd must be a finite number >= 0, got -1"
    assert user_message(RuntimeError("a bug")) is None


def test_an_uncovered_lookup_is_one_line(make_cfg) -> None:
    cfg = make_cfg("method=catrs", "sigma=0.3")
    net = instantiate(cfg.arch)
    with pytest.raises(Exception) as error:  # noqa: PT011 (Hydra or OmegaConf wraps it; the unwrapped text matters)
        instantiate(cfg.method, net=net, optimizer=None)
    message = user_message(error.value)
    assert message is not None
    assert message.startswith("method.lbd: the authors' defaults cover")
    assert "\n" not in message


def test_an_empty_or_half_written_record_is_no_rows_and_is_continued(tmp_path: Path) -> None:
    for content in ("", "idx\tlab"):
        path = tmp_path / "certify.tsv"
        path.write_text(content)
        assert read_rows(path) == []
        with RecordWriter(path) as writer:
            writer.append(row(3))
        assert path.read_text().splitlines()[0].split("\t") == list(COLUMNS)
        assert [r.idx for r in read_rows(path)] == [3]


def test_a_damaged_record_is_named_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "certify.tsv"
    with RecordWriter(path) as writer:
        writer.append(row(0))
    path.write_text(path.read_text() + "garbage\n")
    with pytest.raises(DamagedFileError, match=rf"{path}, line 3 is damaged: .*move the file away"):
        read_records(tmp_path)


def test_a_closed_port_is_reported_unreachable_at_once() -> None:
    with socket.socket() as probe:  # a free local port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert "could not connect to 127.0.0.1" in (unreachable(f"http://127.0.0.1:{port}/data.tar.gz", timeout=2.0) or "")
    assert unreachable("file-without-host") is not None
    with socket_timeout(3.0):
        assert socket.getdefaulttimeout() == 3.0
    assert socket.getdefaulttimeout() is None


# ---------------------------------------------------------------------------------------------------- loggers


def test_csv_log_of_a_resumed_run_keeps_the_earlier_rows(tmp_path: Path) -> None:
    for epoch in (0, 1):
        logger = CSVLogger(str(tmp_path), name="logs", version="")
        logger.log_metrics({"train/loss": 1.0 / (epoch + 1), "epoch": epoch}, step=epoch)
        if epoch == 1:
            logger.log_metrics({"certify/acr": 0.5}, step=2)  # a new column: the file is rewritten, rows kept
        logger.save()
    with (tmp_path / "logs" / "metrics.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert [row["epoch"] for row in rows] == ["0", "1", ""]
    assert rows[2]["certify/acr"] == "0.5"


def test_wandb_logger_resumes_the_runs_own_id(make_cfg, tmp_path: Path) -> None:
    first = build_loggers(make_cfg("logger=wandb", output_dir=tmp_path))[0]
    again = build_loggers(make_cfg("logger=wandb", output_dir=tmp_path))[0]
    assert (
        first._wandb_init["id"] == again._wandb_init["id"] == (tmp_path / ".rsbench" / "wandb_id").read_text().strip()
    )
    assert again._wandb_init["resume"] == "allow"
    assert json.loads(json.dumps(first._wandb_init["id"]))  # a plain string W&B accepts


# ------------------------------------------------------------------------------------------------- checks before work


def test_settings_that_would_fail_mid_epoch_fail_before_any_work(make_cfg) -> None:
    with pytest.raises(ConfigError, match=r"dataset.batch_size=2 cannot be cut into method.steps_per_batch=4 chunks"):
        check_config(make_cfg("method=catrs", "dataset.batch_size=2"))
    with pytest.raises(ConfigError, match=r"method.teacher_ckpt='nope.ckpt' is not a file"):
        check_config(make_cfg("method=catrs", "method.teacher_ckpt=nope.ckpt"))
    with pytest.raises(ConfigError, match=r"trainer.max_epochs=0 trains nothing.*train=false ckpt_path="):
        check_config(make_cfg("trainer.max_epochs=0"))  # it certified an untrained model as the run's result
    check_config(make_cfg("trainer.max_epochs=0", "test=false"))  # nothing certified: harmless


def test_a_missing_dataset_stops_the_run_before_it_writes_anything(make_cfg, tmp_path: Path) -> None:
    output_dir = tmp_path / "run"
    cfg = make_cfg("dataset=cifar10", f"data_dir={tmp_path / 'data'}", "dataset.download=false", output_dir=output_dir)
    with pytest.raises(DatasetUnavailableError, match="cifar-10-batches-py"):
        run(cfg)
    assert not output_dir.exists()


@pytest.mark.skipif(
    importlib.util.find_spec("hydra_plugins.hydra_optuna_sweeper") is None, reason="pip install '.[optuna]'"
)
def test_the_example_search_maximises_acr_over_consistency_weights_and_survives_failures() -> None:
    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = compose("config", overrides=["hparams_search=consistency_acr"], return_hydra_config=True)
    GlobalHydra.instance().clear()
    sweeper = cfg.hydra.sweeper
    assert "OptunaSweeper" in sweeper._target_
    assert (sweeper.direction, sweeper.max_failure_rate, cfg.hydra.mode.name) == ("maximize", 1.0, "MULTIRUN")
    assert set(sweeper.params) == {"method.lbd", "method.eta"}
    assert cfg.optimized_metric == "certify/acr"
    assert cfg.method._target_ == "rsbench.methods.consistency.ConsistencyRegularization"


def test_every_stop_signal_reaches_lightnings_sigterm_handler_once() -> None:
    """Lightning stops fit and test between steps on SIGTERM only: the guard hands SIGUSR1 (SIGINT...) over as one."""
    with StopGuard():
        guard = signal.getsignal(signal.SIGTERM)
        told: list[int] = []

        def lightning(signum: int, frame: object) -> None:  # as Lightning installs it: its notifier, then the guard
            told.append(signum)
            guard(signum, frame)  # type: ignore[operator]

        signal.signal(signal.SIGTERM, lightning)
        assert signal.getsignal(signal.SIGUSR1) == guard  # (SIGINT may belong to the test runner here)
        try:
            os.kill(os.getpid(), signal.SIGUSR1)
            assert told == [signal.SIGTERM]  # told once, as a SIGTERM; the guard's own call back changed nothing
            assert stop_requested() == signal.SIGUSR1  # the run still ends as stopped by SIGUSR1 (exit status 138)
        finally:
            signal.signal(signal.SIGTERM, guard)
    assert stop_requested() is None


def test_lightning_ends_training_after_the_batch_in_flight_on_a_stop_signal(tmp_path: Path) -> None:
    sent: list[int] = []

    class SignalAtSecondBatch(pl.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            if batch_idx == 1 and not sent:
                sent.append(batch_idx)
                os.kill(os.getpid(), signal.SIGUSR1)

    module = GaussianAugmentation(identity_linear([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]), 0.25, SGD)
    data = TensorDataset(torch.rand(40, 1, 1, 2), torch.randint(0, 2, (40,)), torch.arange(40))
    trainer = quiet_trainer(tmp_path, max_epochs=3, callbacks=[SignalAtSecondBatch()])
    with StopGuard(), pytest.raises(SystemExit):  # Lightning's SIGTERMException, which the run turns into a stop
        trainer.fit(module, train_dataloaders=DataLoader(data, batch_size=4))
    assert trainer.global_step == 2  # the batch in flight finished, no later one started
