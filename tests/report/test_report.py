"""``python -m rsbench.report``: run folders and Cohen TSVs in, the paper table with its uncertainty out.

Run folders are written by tests/run_folders.py with rsbench's own writers (``write_record``, ``summarize``,
``write_metrics``) and a ``.hydra/`` folder like Hydra's, so these tests read exactly the files a run writes.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.stats import norm

from rsbench.certify.algorithm.bounds import radius_cap
from rsbench.report.__main__ import main
from rsbench.report.load import ReportError, find_results, read_cohen_tsv
from rsbench.report.plots import curve_legend
from rsbench.report.published import load_published, published_radii
from rsbench.report.rows import group_rows
from rsbench.report.tables import Options
from tests.run_folders import ALPHA, N, make_run, radii_of, run_report
from tests.scripts import tool_script

CAP = radius_cap(0.5, N, ALPHA)  # the largest radius the runs' protocol (sigma 0.5) can certify


def test_runs_that_differ_only_in_seed_are_one_row_with_mean_sd_and_count(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    acrs = []
    for seed in range(3):
        radii = radii_of(rng)
        acrs.append(float(np.mean(radii)))
        make_run(
            tmp_path / "sweep" / f"{seed}_lbd5", radii, method="consistency", seed=seed, overrides=["method.lbd=5"]
        )
    make_run(tmp_path / "sweep" / "lbd10", radii_of(rng), method="consistency", overrides=["method.lbd=10"])
    frame = run_report(tmp_path, str(tmp_path / "sweep"), str(tmp_path / "sweep" / "lbd10"))  # lbd10 read once
    assert list(frame["method.lbd"]) == [5, 10]  # the overridden key is a column, its rows in numeric order
    lbd5 = frame[frame["method.lbd"] == 5].iloc[0]
    assert lbd5["seeds"] == 3
    assert lbd5["seed_list"] == "0 1 2"
    assert lbd5["acr"] == pytest.approx(np.mean(acrs))
    assert lbd5["acr_sd_seeds"] == pytest.approx(np.std(acrs, ddof=1))
    markdown = (tmp_path / "report" / "report.md").read_text()
    header = [cell.strip() for cell in markdown.splitlines()[2].split("|")[1:-1]]
    assert header[:4] == ["method", "sigma", "method.lbd", "seeds"]
    assert f"{np.mean(acrs):.3f} ± {np.std(acrs, ddof=1):.3f} [" in markdown


def test_seeds_run_with_other_batch_sizes_or_loader_processes_are_still_one_row(tmp_path: Path) -> None:
    """A seed certified on a GPU with larger batches and loader processes samples the same distributions as the CPU
    seeds: one setting, one row (EXECUTION_KEYS), and no column for how fast each computed."""
    rng = np.random.default_rng(5)
    make_run(tmp_path / "cpu", radii_of(rng), overrides=["certify.batch_size=1000", "dataset.num_workers=0"])
    gpu = ["certify.batch_size=10000", "dataset.num_workers=4", "dataset.eval_batch_size=5000"]
    make_run(tmp_path / "gpu", radii_of(rng), seed=1, overrides=gpu)
    frame = run_report(tmp_path, str(tmp_path / "cpu"), str(tmp_path / "gpu"))
    assert len(frame) == 1
    assert frame.iloc[0]["seeds"] == 2
    assert "batch_size" not in (tmp_path / "report" / "report.md").read_text()


def test_a_config_group_a_run_did_not_override_reads_as_the_option_it_used(tmp_path: Path) -> None:
    make_run(
        tmp_path / "study", [0.3, 0.5], overrides=["experiment=mnist_study"], choices={"experiment": "mnist_study"}
    )
    make_run(tmp_path / "default", [0.3, 0.5], seed=1)
    frame = run_report(tmp_path, str(tmp_path), "--no-published")
    assert sorted(frame["experiment"]) == ["mnist_study", "none"]  # two settings, not two seeds of one


def test_a_mapping_override_reads_as_hydra_parsed_it_not_as_yaml(tmp_path: Path) -> None:
    """``+arch.network.options={img_size:32,depth:3}`` is the mapping Hydra built; YAML would read the key
    ``img_size:32`` with no value. Written two ways, it is one setting (two seeds of one row); another value is
    another setting."""
    make_run(tmp_path / "a", [0.3, 0.5], overrides=["+arch.network.options={img_size:32,depth:3}"])
    make_run(tmp_path / "b", [0.4, 0.5], seed=1, overrides=["+arch.network.options={img_size: 32, depth: 3}"])
    make_run(tmp_path / "c", [0.4, 0.5], overrides=["+arch.network.options={img_size:64,depth:3}"])
    frame = run_report(tmp_path, str(tmp_path), "--no-published").set_index("arch.network.options")
    assert sorted(frame.index) == ['{"img_size": 32, "depth": 3}', '{"img_size": 64, "depth": 3}']
    assert frame.at['{"img_size": 32, "depth": 3}', "seeds"] == 2


def test_a_certification_resumed_to_more_images_is_the_setting_it_certified_not_its_first_command(
    tmp_path: Path,
) -> None:
    """A run started with certify.max_images=100 and resumed to 300 (a resume keeps the first command's overrides;
    its certify_protocol.json says 300) is one setting with a run certified to 300 in one go; one stopped at 100
    is another."""
    rng = np.random.default_rng(6)
    for name, seed, first, certified in (("resumed", 0, 100, 300), ("whole", 1, None, 300), ("short", 2, 100, 100)):
        folder = make_run(tmp_path / name, radii_of(rng, size=30), seed=seed)
        if first is not None:
            overrides_file = folder / ".hydra" / "overrides.yaml"
            overrides = yaml.safe_load(overrides_file.read_text())
            overrides_file.write_text(yaml.safe_dump([*overrides, f"certify.max_images={first}"]))
        config = yaml.safe_load((folder / ".hydra" / "config.yaml").read_text())
        (folder / ".hydra" / "config.yaml").write_text(yaml.safe_dump({**config, "certify": {"max_images": 300}}))
        (folder / "certify_protocol.json").write_text(json.dumps({"max_images": certified, "n": N, "skip": 1}))
    frame = run_report(tmp_path, str(tmp_path), "--no-published").set_index("certify.max_images")
    assert frame.at[300, "seed_list"] == "0 1"
    assert frame.at[100, "seeds"] == 1


def test_a_run_recorded_before_an_optional_hyperparameter_existed_is_a_seed_of_the_runs_recorded_after(
    tmp_path: Path,
) -> None:
    """Runs recorded after ``lora`` joined the hyperparameters (None: off) are the same setting as one recorded
    before it; a value that is not None is another setting."""
    rng = np.random.default_rng(7)
    make_run(tmp_path / "before", radii_of(rng), hparams={"lbd": 5})
    make_run(tmp_path / "after", radii_of(rng), seed=1, hparams={"lbd": 5, "lora": None})
    make_run(tmp_path / "adapted", radii_of(rng), seed=2, hparams={"lbd": 5, "lora": {"r": 8}})
    frame = run_report(tmp_path, str(tmp_path), "--no-published")
    assert sorted(frame["seeds"]) == [1, 2]


def test_a_hyperparameter_the_config_takes_from_the_training_seed_does_not_split_the_seeds(tmp_path: Path) -> None:
    """sun2025's ``estimate_seed: ${seed}`` is recorded per run (0, 1, 2) but follows the seed: the three runs are
    one setting with 3 seeds. The same value typed as a number (not ``${seed}``) is a setting, and splits them."""
    rng = np.random.default_rng(11)
    for seed in range(3):
        folder = tmp_path / "interpolated" / f"seed{seed}"
        make_run(folder, radii_of(rng), seed=seed, hparams={"lbd": 5, "estimate_seed": seed})
        config = yaml.safe_load((folder / ".hydra" / "config.yaml").read_text())
        config["method"] = {"lbd": 5, "estimate_seed": "${seed}"}
        (folder / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    assert sorted(run_report(tmp_path, str(tmp_path / "interpolated"), "--no-published")["seeds"]) == [3]
    for seed in range(2):
        hparams = {"lbd": 5, "estimate_seed": seed}
        make_run(tmp_path / "typed" / f"seed{seed}", radii_of(rng), seed=seed, hparams=hparams)
    assert sorted(run_report(tmp_path, str(tmp_path / "typed"), "--no-published")["seeds"]) == [1, 1]


def test_a_row_shows_intervals_over_images_and_every_format_is_written(tmp_path: Path) -> None:
    radii = radii_of(np.random.default_rng(1), size=200)
    make_run(tmp_path / "run", radii)
    main([str(tmp_path / "run"), "--out", str(tmp_path / "out"), "--radii", "0", "0.5"])
    frame = pd.read_csv(tmp_path / "out" / "results.csv").iloc[0]
    correct_at_half = int(np.sum(radii >= 0.5))
    assert frame["acc@0.5"] == pytest.approx(correct_at_half / 200)
    assert frame["acc@0.5_low"] < frame["acc@0.5"] < frame["acc@0.5_high"]
    assert frame["acr_se"] == pytest.approx(np.std(radii, ddof=1) / math.sqrt(200))
    tex = (tmp_path / "out" / "report.tex").read_text()
    for rule in (r"\toprule", r"\midrule", r"\bottomrule"):
        assert rule in tex
    assert not {"±", "σ", "Δ", "^"} & set(tex)  # unicode and math characters are LaTeX commands
    for figure in ("curves.png", "pa_lower.png"):
        assert (tmp_path / "out" / figure).stat().st_size > 1000


def test_paired_against_the_baseline_finds_a_shift_and_not_an_identical_run(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    base = radii_of(rng, size=300)
    make_run(tmp_path / "gaussian", base)
    make_run(tmp_path / "copy", base, method="copy")
    make_run(tmp_path / "better", np.where(base > 0, np.minimum(base + 0.2, CAP), 0.0), method="better")
    run_report(tmp_path, str(tmp_path), "--baseline", "gaussian", "--radii", "0", "0.5")
    paired = pd.read_csv(tmp_path / "report" / "paired.csv").set_index("method")
    assert paired.at["copy", "d_acr"] == 0
    assert paired.at["copy", "p_acr"] == 1
    assert paired.at["copy", "p_acc@0.5"] == 1
    assert paired.at["better", "d_acr_low"] > 0
    assert paired.at["better", "p_acr"] < 1e-6
    assert paired.at["better", "d_acc@0.5"] > 0
    assert paired.at["better", "p_acc@0.5"] < 0.05
    assert paired.at["better", "test"] == "McNemar (exact)"


def test_two_settings_of_one_method_stay_apart_in_the_paired_table(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    base = radii_of(rng)
    make_run(tmp_path / "gaussian", base)
    for one_step, shift in (("false", 0.1), ("true", 0.2)):
        radii = np.where(base > 0, np.minimum(base + shift, CAP), 0.0)  # (no certificate is above the cap)
        make_run(tmp_path / f"mix_{one_step}", radii, method="smoothmix", overrides=[f"method.one_step={one_step}"])
    run_report(tmp_path, str(tmp_path), "--baseline", "gaussian")
    paired = pd.read_csv(tmp_path / "report" / "paired.csv").set_index("method.one_step")
    # each setting against the same baseline: shifts of 0.2 and 0.1 per correct image, far from any rounding
    assert paired.at[True, "d_acr"] > paired.at[False, "d_acr"] > 0
    table = (tmp_path / "report" / "report.md").read_text().split("## Paired against gaussian")[1]
    header = [cell.strip() for cell in table.strip().splitlines()[0].strip("|").split("|")]
    assert header[:4] == ["method", "sigma", "method.one_step", "baseline"]


def test_a_curve_legend_names_only_the_settings_its_row_sets(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    make_run(tmp_path / "gaussian", radii_of(rng), hparams={"sigma": 0.5})  # recorded: it has no one_step ("-")
    make_run(tmp_path / "mix", radii_of(rng), method="smoothmix", overrides=["method.one_step=true"])
    rows, keys, _ = group_rows(find_results([tmp_path]))
    assert keys == ["method.one_step"]
    assert sorted(curve_legend(row) for row in rows) == ["gaussian", "smoothmix method.one_step=true"]


@pytest.mark.study
def test_two_replicates_of_a_study_are_matched_by_setting_and_compared_over_seeds(tmp_path: Path) -> None:
    module = tool_script("compare_replicates")
    rng = np.random.default_rng(7)
    for seed in range(3):
        base = radii_of(rng, size=300)
        for replicate, shift, teacher in (("cpu", 0.0, "a/teacher.ckpt"), ("gpu", 0.3, "b/teacher.ckpt")):
            hparams = {"sigma": 0.5, "teacher_ckpt": teacher}  # paths differ between machines, settings do not
            radii = np.where(base > 0, np.minimum(base + shift, radius_cap(0.5, N, ALPHA)), 0.0)
            make_run(tmp_path / replicate / f"{seed}", radii, seed=seed, hparams=hparams)
        make_run(tmp_path / "cpu" / f"only_{seed}", radii_of(rng), method="macer", seed=seed, hparams={"lbd": 12})
    module.main([str(tmp_path / "cpu"), str(tmp_path / "gpu"), "--names", "cpu", "gpu", "--out", f"{tmp_path}/c.csv"])
    table = pd.read_csv(tmp_path / "c.csv")
    assert list(table["row"]) == ["gaussian sigma=0.5"]  # macer ran on one replicate only
    line = table.iloc[0]
    assert (line["cpu seeds"], line["gpu seeds"]) == (3, 3)
    # 1e-12: the three numbers went through the CSV (full float repr); only the subtraction's rounding remains
    assert line["difference"] == pytest.approx(line["gpu ACR"] - line["cpu ACR"], abs=1e-12)
    assert 0.1 < line["difference"] < 0.3  # every correct image (about 80%) gained up to 0.3, less near the cap
    assert line["p (seeds, Welch)"] < 0.01  # the seeds' ACRs spread by about 0.03 (300 images each)


def test_the_device_that_certified_is_a_column_when_rows_differ_and_in_the_caption_when_not(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    gpu = {"environment": {"device": "cuda", "device_name": "NVIDIA H200"}}
    make_run(tmp_path / "a" / "gaussian", radii_of(rng), extra=gpu)
    make_run(tmp_path / "a" / "mix", radii_of(rng), method="smoothmix", extra=gpu)
    frame = run_report(tmp_path, str(tmp_path / "a"))
    assert list(frame["device"]) == ["NVIDIA H200"] * 2
    assert "device=NVIDIA H200" in (tmp_path / "report" / "report.md").read_text()
    make_run(tmp_path / "b" / "cpu", radii_of(rng), method="macer", extra={"environment": {"device_name": "AMD EPYC"}})
    make_run(tmp_path / "b" / "old", radii_of(rng), method="stability")  # from before rsbench recorded it
    recorded = {"environment": {"device_name": "X"}}
    make_run(tmp_path / "b" / "new", radii_of(rng), method="stability", seed=1, extra=recorded)
    frame = run_report(tmp_path, str(tmp_path / "a"), str(tmp_path / "b")).set_index("method")
    assert frame.at["macer", "device"] == "AMD EPYC"
    assert frame.at["stability", "device"] == "?; X"  # one seed recorded it, one did not
    header = (tmp_path / "report" / "report.md").read_text().split("\n")[2]
    assert "| device " in header


def test_how_the_network_was_evaluated_is_shown_when_it_is_not_plain_fp32(tmp_path: Path) -> None:
    """The certificate holds for the network as evaluated: channels-last, compiled or bf16 rows say so (metrics.json,
    or an older run's certify_protocol.json), plain fp32 ones stay silent; seeds evaluated differently are not one
    row."""
    rng = np.random.default_rng(9)
    make_run(tmp_path / "plain", radii_of(rng), extra={"channels_last": False, "compile": False})
    run_report(tmp_path, str(tmp_path / "plain"))
    assert "network" not in (tmp_path / "report" / "report.md").read_text()
    fast = {"channels_last": True, "compile": False}
    make_run(tmp_path / "fast", radii_of(rng), method="macer", extra=fast, overrides=["certify.channels_last=true"])
    older = make_run(tmp_path / "older", radii_of(rng), method="stability", extra={"precision": "bf16"})
    (older / "certify_protocol.json").write_text(json.dumps({"channels_last": False, "compile": True}))
    frame = run_report(tmp_path, str(tmp_path / "fast"), str(older), str(tmp_path / "plain")).set_index("method")
    assert frame.at["macer", "network"] == "fp32+channels-last"
    assert frame.at["stability", "network"] == "bf16+compiled"
    assert frame.at["gaussian", "network"] == "fp32"
    header = (tmp_path / "report" / "report.md").read_text().split("\n")[2]
    assert "| network " in header
    assert "certify.channels_last" not in header  # the override `network` summarises, not a column of its own
    run_report(tmp_path, str(tmp_path / "fast"))
    caption = (tmp_path / "report" / "report.md").read_text()
    assert "network=fp32+channels-last" in caption
    assert "certify.channels_last" not in caption  # the override `network` summarises, not said twice
    make_run(tmp_path / "seed1", radii_of(rng), seed=1)  # gaussian again, evaluated in the default layout
    make_run(tmp_path / "seed2", radii_of(rng), seed=2, extra={"channels_last": True})
    with pytest.raises(ReportError, match=r"different protocols \(network: 'fp32' vs 'fp32\+channels-last'\)"):
        group_rows(find_results([tmp_path / "seed1", tmp_path / "seed2"]))


def test_rows_on_different_images_are_never_paired(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    make_run(tmp_path / "gaussian", radii_of(rng), indices=range(60))
    make_run(tmp_path / "other", radii_of(rng), method="other", indices=range(1, 61))
    run_report(tmp_path, str(tmp_path), "--baseline", str(tmp_path / "gaussian"))
    paired = pd.read_csv(tmp_path / "report" / "paired.csv")
    assert paired.loc[0, "note"].startswith("not paired: different images")
    assert "d_acr" not in paired or math.isnan(paired.loc[0, "d_acr"])


def test_the_envelope_takes_the_best_sigma_at_each_radius(tmp_path: Path) -> None:
    make_run(tmp_path / "low", [0.3] * 9 + [0.0], sigma=0.25, overrides=["sigma=0.25"])  # 90% certified up to 0.3
    make_run(tmp_path / "high", [1.2] * 6 + [0.0] * 4, sigma=1.0, overrides=["sigma=1.0"])  # 60% up to 1.2
    run_report(tmp_path, str(tmp_path), "--radii", "0", "0.25", "0.5", "1")
    envelope = pd.read_csv(tmp_path / "report" / "envelope.csv").iloc[0]
    assert envelope["sigmas"] == "0.25, 1.00"
    assert [envelope[f"r={r}"] for r in ("0", "0.25", "0.5", "1")] == [
        "90.0 (σ=0.25)",
        "90.0 (σ=0.25)",
        "60.0 (σ=1.00)",
        "60.0 (σ=1.00)",
    ]


def test_bad_input_is_named_without_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path / "empty"), "--out", str(tmp_path / "report")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("rsbench: error: ")
    assert error.count("\n") == 1
    assert f"{tmp_path / 'empty'} holds no results" in error
    make_run(tmp_path / "runs" / "a", [0.3, 0.4])
    with pytest.raises(SystemExit):
        main([str(tmp_path / "runs"), "--baseline", "cohen", "--out", str(tmp_path / "report")])
    assert "--baseline 'cohen' is neither a method among the rows (gaussian)" in capsys.readouterr().err


def test_seeds_certified_under_different_protocols_are_refused(tmp_path: Path) -> None:
    make_run(tmp_path / "s0", [0.3, 0.4], seed=0)
    make_run(tmp_path / "s1", [0.3, 0.4], seed=1, n=1000)
    with pytest.raises(ReportError, match=r"different protocols \(n: 10000 vs 1000\)"):
        group_rows(find_results([tmp_path]))
    make_run(tmp_path / "s1", [0.3, 0.4], seed=0)
    with pytest.raises(ReportError, match="with seed 0: pass only one"):
        group_rows(find_results([tmp_path]))


def without_recorded_hparams(run: Path, method_config: dict[str, Any]) -> None:
    """Make ``run`` look like one from before rsbench recorded hyperparameters: only its config states them."""
    metrics = json.loads((run / "metrics.json").read_text())
    metrics.pop("hparams", None)
    (run / "metrics.json").write_text(json.dumps(metrics))
    config = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump({**config, "sigma": 0.5, "method": method_config}))


def test_a_run_without_recorded_hparams_joins_the_setting_its_config_agrees_with(tmp_path: Path) -> None:
    recorded = {"sigma": 0.5, "eval_noise_seed": 0, "lbd": 2.0}  # eval_noise_seed: a default no config states
    make_run(tmp_path / "new", [0.3, 0.4], method="catrs", seed=1, hparams=recorded)
    make_run(tmp_path / "old", [0.2, 0.5], method="catrs", seed=0)
    without_recorded_hparams(tmp_path / "old", {"sigma": "${sigma}", "lbd": 2})
    (row,) = group_rows(find_results([tmp_path]))[0]
    assert row.seeds == [0, 1]
    assert dict(row.first.hparams) == recorded  # adopted, so the published comparison sees them too

    # the same run trained with another lambda (an older default) stays a row of its own
    without_recorded_hparams(tmp_path / "old", {"sigma": "${sigma}", "lbd": 1})
    rows = group_rows(find_results([tmp_path]))[0]
    assert sorted(row.seeds for row in rows) == [[0], [1]]


def test_an_unfinished_record_is_refused_and_names_the_file(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", [0.3, 0.4, 0.5])
    lines = (run / "certify.tsv").read_text().splitlines(keepends=True)
    (run / "certify.tsv").write_text("".join(lines[:-1]))
    with pytest.raises(ReportError, match=r"certify.tsv lacks 1 of the 3 images"):
        find_results([run])


def test_data_dependent_runs_give_a_sound_row_and_a_labelled_unsound_one(tmp_path: Path) -> None:
    run = make_run(tmp_path / "ddrs", [0.6, 0.7], method="ddrs", extra={"sound": False, "sigma_mode": "data_dependent"})
    fixed = make_run(tmp_path / "tmp", [0.3, 0.0], method="ddrs", stem="certify_fixed_sigma")
    (run / "certify_fixed_sigma.tsv").write_text((fixed / "certify_fixed_sigma.tsv").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["fixed_sigma"] = json.loads((fixed / "metrics.json").read_text())
    (run / "metrics.json").write_text(json.dumps(metrics))
    labels = [r.label for r in find_results([run])]
    assert labels == ["ddrs (fixed sigma, sound)", "ddrs (data_dependent sigma, NOT sound)"]
    main([str(run), "--out", str(tmp_path / "report"), "--no-plots", "--no-published"])
    assert "NOT sound certificates" in (tmp_path / "report" / "report.md").read_text()


def test_cohen_format_tsvs_from_released_logs_are_read(tmp_path: Path) -> None:
    # Cohen's certify.py: 3 significant digits, time as str(timedelta); older logs: plain seconds.
    log = tmp_path / "cifar10" / "noise_0.25" / "cat-rs" / "noise_0.25.tsv"
    log.parent.mkdir(parents=True)
    log.write_text(
        "idx\tlabel\tpredict\tradius\tcorrect\ttime\n"
        "0\t3\t3\t0.953\t1\t0:00:01.234000\n"
        "1\t8\t-1\t0.0\t0\t0:00:01.200000\n"
        "2\t8\t1\t0.5\t0\t0:00:01.100000\n"
        "3\t0\t0\t0.5\t1\t0:00:01.050000\n"
    )
    result = read_cohen_tsv(log)
    assert (result.method, result.sigma, result.dataset, result.rounded_radii) == ("catrs", 0.25, "cifar10", True)
    assert result.scores.tolist() == [0.953, 0.0, 0.0, 0.5]
    assert result.records["pA_lower"].iloc[0] == pytest.approx(norm.cdf(0.953 / 0.25))
    assert math.isnan(result.records["pA_lower"].iloc[1])  # abstained: no bound
    old = tmp_path / "sigma_0.50"
    old.write_text("idx\tlabel\tpredict\tradius\tcorrect\ttime\n0\t3\t3\t0.378\t1\t15.4\n20\t7\t-1\t0.0\t0\t15.6\n")
    frame = run_report(tmp_path, str(log), str(old), "--n", "100000", "--alpha", "0.001")
    assert sorted(zip(frame["sigma"], frame["label"], strict=True)) == [(0.25, "catrs"), (0.5, tmp_path.name)]
    assert frame.set_index("label").at["catrs", "acc@0.5"] == 0.5  # 0.953 and the 0.5 written at 3 digits
    assert "3 significant digits" in (tmp_path / "report" / "report.md").read_text()


def cohen_log(root: Path, trained: str, certified: str) -> Path:
    """A TSV where Cohen et al.'s repository keeps it: ``<arch>/noise_<trained>/test/sigma_<certified>``."""
    log = root / "data" / "certify" / "cifar10" / "resnet110" / f"noise_{trained}" / "test" / f"sigma_{certified}"
    log.parent.mkdir(parents=True, exist_ok=True)
    rows = "".join(f"{20 * i}\t3\t3\t{0.1 + i / 100:.3f}\t1\t0:00:15.100000\n" for i in range(10))
    log.write_text("idx\tlabel\tpredict\tradius\tcorrect\ttime\n" + rows)
    return log


def test_cohen_et_al_s_log_layout_reads_as_gaussian_and_meets_its_published_line(tmp_path: Path) -> None:
    """``noise_0.25/test/sigma_0.25`` is Gaussian augmentation on ResNet-110, not a method called ``test``."""
    log = cohen_log(tmp_path, "0.25", "0.25")
    result = read_cohen_tsv(log, n=100_000, alpha=0.001)
    assert (result.method, result.variant, result.arch, result.dataset) == (
        "gaussian",
        "",
        "cifar_resnet110",
        "cifar10",
    )
    assert read_cohen_tsv(log, label="cohen").method == "gaussian"  # the authors' own name for it
    main([str(log), "--n", "100000", "--alpha", "0.001", "--out", str(tmp_path / "r"), "--no-plots"])
    published = pd.read_csv(tmp_path / "r" / "published.csv")
    assert "cohen2019_logs" in set(published["source"])


def test_a_cohen_log_certified_at_another_sigma_is_no_published_row(tmp_path: Path) -> None:
    result = read_cohen_tsv(cohen_log(tmp_path, "0.25", "0.50"))
    assert (result.method, result.sigma, result.variant) == ("gaussian", 0.5, "trained at sigma 0.25")
    main([str(result.source), "--out", str(tmp_path / "r"), "--no-plots"])
    assert not (tmp_path / "r" / "published.csv").exists()


def test_without_out_the_report_goes_beside_the_one_folder_it_reports(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    run = make_run(tmp_path / "sweep" / "run", radii_of(np.random.default_rng(7)))
    main([str(tmp_path / "sweep"), "--no-plots"])
    assert (tmp_path / "sweep" / "report" / "results.csv").exists()
    assert not (tmp_path / "report").exists()
    main([str(run / "certify.tsv"), "--sigma", "0.5", "--no-plots"])  # a file: the current folder
    assert (tmp_path / "report" / "results.csv").exists()


def test_the_acr_interval_never_reaches_below_zero(tmp_path: Path) -> None:
    """Three images, one certified: the t interval's lower end is negative; ACR cannot be."""
    make_run(tmp_path / "run", [0.0, 0.0, 1.5])
    frame = run_report(tmp_path, str(tmp_path / "run"))
    assert frame.at[0, "acr_low"] == 0.0
    assert frame.at[0, "acr_high"] > frame.at[0, "acr"] > 0


def test_legends_sit_below_their_panel_and_name_the_envelope_s_sigma_curves(tmp_path: Path, monkeypatch) -> None:
    import rsbench.report.plots as plots

    figures = []
    monkeypatch.setattr(plots, "_save", lambda figure, path: figures.append(figure) or path)
    rng = np.random.default_rng(8)
    for sigma in (0.25, 0.5):
        make_run(tmp_path / f"run{sigma}", radii_of(rng, sigma=sigma), sigma=sigma, overrides=[f"sigma={sigma}"])
    plots.write_figures(group_rows(find_results([tmp_path]))[0], Options(), tmp_path / "figures")
    for figure in figures:
        figure.canvas.draw()
        for ax in figure.axes:
            legend = ax.get_legend().get_window_extent()
            assert legend.y1 <= ax.get_window_extent().y0  # entirely below the panel
    envelope = figures[-1].axes[0].get_legend()
    assert [text.get_text() for text in envelope.get_texts()] == ["gaussian: envelope", "  sigma=0.25", "  sigma=0.5"]


def test_a_tsv_without_sigma_or_with_other_columns_is_refused(tmp_path: Path) -> None:
    unnamed = tmp_path / "results.tsv"
    unnamed.write_text("idx\tlabel\tpredict\tradius\tcorrect\ttime\n0\t1\t1\t0.2\t1\t1.0\n")
    with pytest.raises(ReportError, match="pass --sigma"):
        read_cohen_tsv(unnamed)
    assert read_cohen_tsv(unnamed, sigma=0.5, label="mine").method == "mine"
    other = tmp_path / "noise_0.5.tsv"
    other.write_text("a\tb\n1\t2\n")
    with pytest.raises(ReportError, match=r"lacks the columns \['idx', 'label', 'predict', 'radius', 'correct'\]"):
        read_cohen_tsv(other)


def test_published_numbers_sit_beside_a_matching_row_with_the_protocol_differences(tmp_path: Path) -> None:
    make_run(tmp_path / "run", radii_of(np.random.default_rng(4), size=100), hparams={"sigma": 0.5})
    main([str(tmp_path / "run"), "--out", str(tmp_path / "report"), "--no-plots", "--published-source", "smoothmix"])
    published = pd.read_csv(tmp_path / "report" / "published.csv")
    assert set(published["source"]) == {"smoothmix2021_table2", "smoothmix2021_table5"}  # MNIST gaussian, sigma 0.5
    line = published[published["source"] == "smoothmix2021_table2"].iloc[0]
    assert line["acr_published"] == 1.553
    assert "data: rsbench's embedded MNIST subset" in line["differs"]
    assert "images: 100 vs 10,000" in line["differs"]
    assert "n: 10,000 vs 100,000" in line["differs"]
    assert "epochs: 20 vs 90" in line["differs"]
    per_image_sd = np.std(find_results([tmp_path / "run"])[0].scores, ddof=1)
    se_rsbench, se_published = per_image_sd / math.sqrt(100), per_image_sd / math.sqrt(10_000)
    assert line["z_acr"] == pytest.approx((line["acr"] - 1.553) / math.hypot(se_rsbench, se_published))


def test_a_source_without_an_image_count_has_an_unknown_se_and_only_a_bound_on_z(tmp_path: Path) -> None:
    """MACER's MNIST table does not say how many images it certified: its SE is unknown, not 0, so the z of a gap is
    computed with rsbench's SE alone and shown as the bound it is."""
    make_run(tmp_path / "run", radii_of(np.random.default_rng(4), size=100), hparams={"sigma": 0.5})
    main([str(tmp_path / "run"), "--out", str(tmp_path / "report"), "--no-plots", "--published-source", "macer"])
    line = pd.read_csv(tmp_path / "report" / "published.csv").iloc[0]
    assert line["source"] == "macer2020_table6"
    se_rsbench = np.std(find_results([tmp_path / "run"])[0].scores, ddof=1) / math.sqrt(100)
    assert line["z_acr"] == pytest.approx((line["acr"] - line["acr_published"]) / se_rsbench)
    assert f"(|z| <= {abs(line['z_acr']):.1f})" in line["ΔACR (z)"]
    assert "images: 100 vs ?" in line["differs"]


def consistent(line: pd.Series, radii: Sequence[float]) -> bool:
    """Whether a published line can be right: accuracy never rises with the radius and is 0 beyond the radius cap,
    and ACR (the area under the accuracy curve) lies between the lower and upper Riemann sums of the accuracies,
    the last one held up to the cap. Tolerance: the rounding of the published accuracies (0.05 points; 0.5 for
    MACER's 2 decimals) and of ACR (0.0005). The bounds are loose where a table stops well before the cap (CIFAR-10
    at sigma 1.0), tight elsewhere."""
    points = [(r, line[f"acc@{r:g}"] / 100) for r in radii if not pd.isna(line[f"acc@{r:g}"])]
    if len(points) < 2:
        return True
    values = [a for _, a in points]
    if any(b > a + 1e-9 for a, b in itertools.pairwise(values)):
        return False
    step = points[1][0] - points[0][0]
    cap = radius_cap(float(line["sigma"]), int(line["n"]), float(line["alpha"]))
    if any(a > 0 for r, a in points if r > cap):
        return False
    rounding = len(values) * step * (0.005 if line["source"].startswith("macer") else 0.0005) + 0.0005
    lower = step * sum(values[1:])
    upper = step * sum(values[:-1]) + values[-1] * max(0.0, cap - points[-1][0])
    return bool(lower - rounding <= line["acr"] <= upper + rounding)


def test_the_published_numbers_are_internally_consistent() -> None:
    published = load_published()
    radii = published_radii(published)
    assert published["source"].notna().all()
    assert published["reference"].notna().all()
    slips = [
        (line["source"], line["method"], line["sigma"])
        for _, line in published.iterrows()
        if not consistent(line, radii)
    ]
    assert slips == []
    # The check catches the slips it is for: a column shifted either way, and a mistyped ACR digit.
    table = published[published["source"] == "catrs2023_table1"].set_index(["method", "sigma"])
    columns = [f"acc@{r:g}" for r in radii[:11]]
    for key in (("catrs", 0.25), ("catrs", 0.5)):
        line = table.loc[key].copy()
        line["sigma"], line["source"] = key[1], "catrs2023_table1"
        right, left = line.copy(), line.copy()
        right[columns[1:]] = line[columns[:-1]].to_numpy()
        left[columns[:-1]] = line[columns[1:]].to_numpy()
        wrong_acr = pd.Series({**line.to_dict(), "acr": line["acr"] + 0.1})
        assert consistent(line, radii)
        assert not consistent(right, radii)
        assert not consistent(left, radii)
        assert not consistent(wrong_acr, radii)


def test_paper_tables_agree_with_the_released_logs_they_were_computed_from() -> None:
    """CAT-RS Table 1 was computed from the logs its authors released; the logs were recomputed by rsbench. Agreement
    to the published rounding checks the transcription of every matching row (SmoothMix at 0.5 and 1.0 excepted:
    its log is another model, see its note)."""
    published = load_published()
    table = published[published["source"] == "catrs2023_table1"].set_index(["method", "sigma"])
    logs = published[published["source"] == "catrs2023_logs"]
    compared = 0
    for _, log in logs.iterrows():
        key = (log["method"], log["sigma"])
        if key not in table.index or str(log["variant"]) != str(table.loc[key, "variant"]):
            continue
        assert log["acr"] == pytest.approx(table.loc[key, "acr"], abs=0.0006), key
        for r in (0, 0.5, 1):
            if not pd.isna(table.loc[key, f"acc@{r:g}"]):
                assert log[f"acc@{r:g}"] == pytest.approx(table.loc[key, f"acc@{r:g}"], abs=0.06), (key, r)
        compared += 1
    assert compared == 19


def test_tables_that_share_rows_agree() -> None:
    """Second readings from other sources: CAT-RS Table 1 reprints SmoothMix's rows for the baselines it shares
    (equal to the digit), and SmoothMix Table 2's single runs lie near Table 5's 5-seed means (a digit slip would be
    off by 0.01 or more; the largest honest gap is 0.0051, 3 seed sds)."""
    published = load_published().fillna({"variant": ""})
    index = ["method", "variant", "sigma"]
    catrs = published[published["source"] == "catrs2023_table1"].set_index(index)
    columns = ["acr"] + [f"acc@{r:g}" for r in (0, 0.25, 0.5, 0.75, 1)]
    shared = [
        ("smoothmix2021_table1", ("gaussian", "", 0.25)),
        ("smoothmix2021_table1", ("smoothadv", "", 0.5)),
        ("smoothmix2021_table1", ("macer", "", 0.5)),
        ("smoothmix2021_table1", ("consistency", "", 0.5)),
        ("smoothmix2021_table1", ("smoothmix", "one_step=false", 0.25)),
        ("smoothmix2021_table1", ("smoothmix", "one_step=true", 0.5)),
        ("smoothmix2021_table3", ("consistency", "", 1.0)),
        ("smoothmix2021_table3", ("smoothmix", "one_step=true", 1.0)),
    ]
    for source, key in shared:
        smoothmix = published[published["source"] == source].set_index(index)
        assert smoothmix.loc[key, columns].tolist() == catrs.loc[key, columns].tolist(), (source, key)
    single = published[published["source"] == "smoothmix2021_table2"].set_index(index)["acr"]
    means = published[published["source"] == "smoothmix2021_table5"].set_index(index)["acr"]
    assert len(means) == 27
    assert (single - means).abs().max() <= 0.006


def test_rsbench_table_is_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rsbench.table import main as table_main

    make_run(tmp_path / "run", [0.3, 0.0, 0.9])
    table_main([str(tmp_path / "run"), "--out", str(tmp_path / "report"), "--no-plots", "--no-published"])
    assert "## Results" in capsys.readouterr().out


def test_sequential_runs_are_labelled_by_design_and_runs_before_designs_read_as_the_first(tmp_path: Path) -> None:
    """Runs written before #22 record no design: they were the looks design and keep the label ``sequential``."""
    from rsbench.report.load import read_run

    rng = np.random.default_rng(3)
    old = make_run(tmp_path / "old", radii_of(rng), extra={"mode": "sequential", "mean_samples": 2000.0})
    new = make_run(
        tmp_path / "new", radii_of(rng), extra={"mode": "sequential", "design": "betting", "mean_samples": 1500.0}
    )
    looks = make_run(
        tmp_path / "looks", radii_of(rng), extra={"mode": "sequential", "design": "looks", "mean_samples": 2100.0}
    )
    assert [read_run(run)[0].variant for run in (old, new, looks)] == ["sequential", "sequential betting", "sequential"]
