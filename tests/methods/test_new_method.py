"""A new method is its three files: a toy one, with a released log, reaches every reader without touching another file.

The toy's module and card are written into a folder added to ``rsbench.methods``' path (as if they were
``rsbench/methods/toy.py`` and ``toy_card.py``) and its config into a Hydra search path (as if it were
``conf/method/toy.yaml``); its authors' released log sits in a repository laid out as alinlab/smoothing-catrs (a
``toy-rs`` folder beside the other methods'). The importer indexes that log as the toy's, ``python -m rsbench.report
--against-released`` pairs a toy run with it, the leaderboard names both by the card's title, and the README's methods
table lists the toy in the card's place with the card's citation.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from hydra.utils import get_object

import rsbench.methods
from rsbench.leaderboard.entries import published_entries, run_entries
from rsbench.methods import card as registry
from rsbench.published import catalogue as released
from rsbench.published import importer
from rsbench.report.__main__ import main as report
from tests.helpers import ROOT, compose_config
from tests.published.test_import_released_logs import TRAINING, commit_all, target
from tests.run_folders import make_run
from tests.tools.test_docs import make_docs

MODULE = '''"""A toy method: Gaussian augmentation under its own name."""

from rsbench.methods.gaussian import GaussianAugmentation


class ToyTraining(GaussianAugmentation):
    """Gaussian augmentation, named toy."""

    method_name = "toy"
'''
CARD = '''"""The toy's card."""

from rsbench.methods.card import MethodCard

CARD = MethodCard(
    name="toy",
    target="rsbench.methods.toy.ToyTraining",
    paper="Toy, Rosen and Berg, ICML 2031",
    repository="someone/toy-smoothing",
    title="Toy-RS",
    citation="Toy et al., ICML 2031",
    methods_table=9,
    log_folders=("toy-rs",),
)
'''
SIGMA = 0.25
IMAGES = list(range(0, 800, 20))  # the authors certified every 20th test image, the first 40
RADII = [0.3 + 0.01 * (i % 7) if i % 5 else 0.0 for i in range(len(IMAGES))]  # every 5th wrong


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The toy's module, card and config in place; the card registry rediscovers the cards; the config folder."""
    methods = tmp_path / "methods"
    methods.mkdir()
    (methods / "toy.py").write_text(MODULE)
    (methods / "toy_card.py").write_text(CARD)
    config = tmp_path / "conf" / "method" / "toy.yaml"
    config.parent.mkdir(parents=True)
    gaussian = (ROOT / "conf" / "method" / "gaussian.yaml").read_text()
    config.write_text(gaussian.replace("rsbench.methods.GaussianAugmentation", "rsbench.methods.ToyTraining"))
    monkeypatch.setattr(rsbench.methods, "__path__", [*rsbench.methods.__path__, str(methods)])
    monkeypatch.setattr(registry, "_cards", {})
    monkeypatch.setattr(registry, "_discovered", False)
    try:
        yield config.parents[1]
    finally:
        for name in ("rsbench.methods.toy", "rsbench.methods.toy_card"):
            sys.modules.pop(name, None)


def released_folder(tmp_path: Path) -> Path:
    """A released/ folder imported from a CAT-RS-like repository holding the toy's Fashion-MNIST log."""
    repository = tmp_path / "catrs"
    log = repository / "data" / "fmnist" / f"noise_{SIGMA}" / "toy-rs" / f"noise_{SIGMA}.tsv"
    log.parent.mkdir(parents=True)
    lines = [
        f"{i}\t{i % 10}\t{i % 10 if r else -1}\t{r}\t{int(r > 0)}\t0:00:01" for i, r in zip(IMAGES, RADII, strict=True)
    ]
    log.write_text("idx\tlabel\tpredict\tradius\tcorrect\ttime\n" + "\n".join(lines) + "\n")
    (log.parent / "log.txt").write_text(TRAINING)  # the authors' training log beside it
    (repository / "LICENSE").write_text("MIT License\n")
    folder = target(tmp_path / "released", {"catrs2023": commit_all(repository)})
    assert importer.main([str(repository), "--target", str(folder)]) == 0
    return folder


def test_a_toy_method_with_a_released_log_reaches_every_reader_from_its_three_files(
    toy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = compose_config("method=toy", f"hydra.searchpath=[file://{toy}]")
    toy_class = get_object(cfg.method._target_)
    assert toy_class is rsbench.methods.ToyTraining  # exported from its card's target, no list names it
    assert toy_class.method_name == registry.method_card("toy").name

    folder = released_folder(tmp_path)
    index = pd.read_csv(folder / "index.csv", dtype=str, keep_default_na=False)
    (line,) = index.itertuples()
    assert (line.method, line.dataset, line.arch) == ("toy", "fashion_mnist", "lenet")
    assert line.training == "Fashion-MNIST training set"  # conf/dataset/fashion_mnist.yaml's title
    monkeypatch.setattr(released, "_released_folder", lambda: folder)
    released._index.cache_clear()
    try:
        radii = [r + 0.05 if r else 0.0 for r in RADII]  # the toy run certifies each correct image 0.05 further
        run = make_run(tmp_path / "run", radii, method="toy", sigma=SIGMA, indices=IMAGES, n=100_000)
        run_metrics = (run / "metrics.json").read_text().replace('"mnist_embedded"', '"fashion_mnist"')
        (run / "metrics.json").write_text(run_metrics)
        report([str(run), "--against-released", "--out", str(tmp_path / "r"), "--no-plots"])
        (paired,) = pd.read_csv(tmp_path / "r" / "released.csv").itertuples()
        assert paired.method == "toy"
        correct = sum(1 for r in RADII if r) / len(RADII)
        delta = float(str(paired[paired._fields.index("ΔACR")]).split()[0])  # "+0.040 [+0.0xx, +0.0xx]"
        assert delta == pytest.approx(0.05 * correct, abs=1e-3)  # shown with 3 decimals

        entries, _ = published_entries("fashion_mnist", sources=["catrs2023"])
        (published,) = [entry for entry in entries if entry.method == "toy"]
        assert published.label == "Toy-RS"
        (mine,) = run_entries([run])
        assert mine.label.startswith("Toy-RS")
    finally:
        released._index.cache_clear()

    monkeypatch.setattr(make_docs, "fashion_comparison", pd.DataFrame)  # the toy has no Fashion-MNIST study cell
    table = make_docs.methods_table().splitlines()
    assert table[-1].startswith("| `toy` | Toy et al., ICML 2031 | - / - / -; - / - / - |")
    assert [row.split("`")[1] for row in table[2:]][-2:] == ["sun2025", "toy"]
