"""Threat models through the certification settings, records and pipeline.

The default (Gaussian noise, l2) writes exactly what it always wrote; any other threat model names itself in every
record (certify.tsv columns, certify_protocol.json, metrics.json) and is never continued under another one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rsbench.certify.pipeline.certification import Certification
from rsbench.certify.pipeline.records import (
    COLUMNS,
    THREAT_COLUMNS,
    CertificationRow,
    RecordWriter,
    merge_records,
    read_rows,
    record_columns,
    shard_record,
)
from rsbench.certify.pipeline.settings import CertifySettings, Protocol, Speed, Subset
from rsbench.errors import ProtocolMismatchError
from tests.classifiers import IMAGES, SUBJECT

LAPLACE = CertifySettings(Protocol(n0=20, n=200, alpha=0.01, noise="laplace"), Subset(skip=2), Speed(batch_size=100))
DEFAULT = CertifySettings(Protocol(n0=20, n=200, alpha=0.01), Subset(skip=2), Speed(batch_size=100))


def test_rows_name_their_threat_model_only_when_it_is_not_the_default() -> None:
    plain = CertificationRow(1, 2, 2, 0.5, True, 0.1, 190, 200, 0.9, 0.25)
    assert len(plain.to_line().split("\t")) == len(COLUMNS)
    l1 = CertificationRow(1, 2, 2, 0.5, True, 0.1, 190, 200, 0.9, 0.25, norm="l1", noise="laplace")
    assert l1.to_line().rstrip("\n").split("\t")[-2:] == ["l1", "laplace"]
    assert CertificationRow.from_line(l1.to_line()) == l1
    assert CertificationRow.from_line(plain.to_line()) == plain
    assert record_columns(True) == COLUMNS + THREAT_COLUMNS


def test_a_record_of_one_threat_model_is_not_continued_under_another(tmp_path: Path) -> None:
    path = tmp_path / "certify.tsv"
    with RecordWriter(path, record_columns(True)) as writer:
        writer.append(CertificationRow(0, 1, 1, 0.3, True, 0.1, 190, 200, 0.9, 0.25, norm="l1", noise="laplace"))
    with pytest.raises(ProtocolMismatchError, match="another threat model"), RecordWriter(path):
        pass
    assert [row.noise for row in read_rows(path)] == ["laplace"]


def test_shards_of_threat_rows_merge_with_their_columns(tmp_path: Path) -> None:
    for rank in (0, 1):
        with RecordWriter(tmp_path / shard_record(rank, 2), record_columns(True)) as writer:
            writer.append(
                CertificationRow(rank, 1, 1, 0.3, True, 0.1, 190, 200, 0.9, 0.25, norm="linf", noise="gaussian")
            )
    merged = merge_records(tmp_path)
    assert [row.norm for row in merged] == ["linf", "linf"]
    assert (tmp_path / "certify.tsv").read_text().splitlines()[0].split("\t")[-2:] == ["norm", "noise"]


def test_settings_carry_the_threat_model_and_refuse_gaussian_only_modes() -> None:
    settings = CertifySettings.from_keys(noise="uniform", norm="linf")
    assert settings.protocol.threat.describe() == "linf (uniform noise)"
    assert settings.protocol_record(0.5, 500)["norm"] == "linf"
    assert "norm" not in CertifySettings.from_keys().protocol_record(0.5, 500)  # the default record is unchanged
    with pytest.raises(ValueError, match=r"certify.mode=sequential certifies the Gaussian l2 radius only"):
        CertifySettings.from_keys(noise="laplace", mode="sequential")
    with pytest.raises(ValueError, match=r"certify.sigma_mode=data_dependent certifies the Gaussian l2 radius only"):
        CertifySettings.from_keys(norm="linf", sigma_mode="data_dependent")
    with pytest.raises(ValueError, match=r"certify\.norm must be one of"):
        CertifySettings.from_keys(norm="l0")


def test_the_pipeline_records_the_threat_model_everywhere(tmp_path: Path) -> None:
    outcome = Certification(LAPLACE, tmp_path).run(SUBJECT, IMAGES)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert (metrics["norm"], metrics["noise"]) == ("l1", "laplace")
    assert metrics["threat_model"]["dimension"] == 16
    assert "Teng et al. 2020" in metrics["threat_model"]["certificate"]
    assert metrics["radius_cap"] == pytest.approx(LAPLACE.protocol.threat.cap(0.25, 200, 0.01, 16), rel=1e-12)
    assert {row.norm for row in read_rows(tmp_path / "certify.tsv")} == {"l1"}
    protocol = json.loads((tmp_path / "certify_protocol.json").read_text())
    assert (protocol["norm"], protocol["noise"]) == ("l1", "laplace")
    assert outcome.summary is not None
    with pytest.raises(ProtocolMismatchError):  # the default protocol must not continue Laplace rows
        Certification(DEFAULT, tmp_path).run(SUBJECT, IMAGES)


def test_the_default_pipeline_names_nothing_new(tmp_path: Path) -> None:
    Certification(DEFAULT, tmp_path).run(SUBJECT, IMAGES)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert not {"norm", "noise", "threat_model"} & set(metrics)
    assert (tmp_path / "certify.tsv").read_text().splitlines()[0].split("\t") == list(COLUMNS)
    assert "noise" not in json.loads((tmp_path / "certify_protocol.json").read_text())
    with pytest.raises(ProtocolMismatchError):  # and Laplace must not continue Gaussian rows
        Certification(LAPLACE, tmp_path).run(SUBJECT, IMAGES)


def test_an_linf_grid_has_its_own_step(tmp_path: Path) -> None:
    settings = CertifySettings(Protocol(n0=20, n=200, alpha=0.01, norm="linf"), Subset(skip=2), Speed(batch_size=100))
    Certification(settings, tmp_path).run(SUBJECT, IMAGES)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    step = metrics["threat_model"]["radius_step"]
    assert step == 0.05  # 0.25 / sqrt(16) = 0.0625, rounded down to 5 x 10^-2
    assert list(metrics["certified_accuracy"])[:3] == ["0.0", "0.05", "0.1"]
