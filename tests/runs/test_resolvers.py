"""rs.lookup: per-dataset, per-sigma defaults in method configs."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf
from omegaconf.errors import InterpolationResolutionError

import rsbench  # noqa: F401 (registers the resolvers)

CONFIG = """
sigma: 1
dataset: {family: cifar10}
method:
  lbd: "${rs.lookup:{0.25: 0.5, 0.5: 1.0, 1.0: 2.0},${sigma}}"
  step_size: "${rs.lookup:{cifar10: {0.25: 0.5, 0.5: 1.0, 1.0: 2.0}, mnist: {0.25: 1.0}},${dataset.family},${sigma}}"
"""


def test_lookup_by_sigma_and_by_dataset_then_sigma() -> None:
    cfg = OmegaConf.create(CONFIG)
    assert cfg.method.lbd == 2.0  # sigma=1 finds the key 1.0
    assert cfg.method.step_size == 2.0
    cfg.sigma = 0.25
    assert cfg.method.lbd == 0.5


def test_uncovered_combination_names_the_key_and_the_way_out() -> None:
    cfg = OmegaConf.create(CONFIG)
    cfg.dataset.family = "mnist"
    with pytest.raises(
        InterpolationResolutionError, match=r"method\.step_size: .* cover 0\.25, not 1.*method\.step_size="
    ):
        _ = cfg.method.step_size
    cfg.dataset.family = "imagenet"
    with pytest.raises(InterpolationResolutionError, match="cover 'cifar10', 'mnist', not 'imagenet'"):
        _ = cfg.method.step_size


def test_explicit_value_replaces_the_lookup() -> None:
    cfg = OmegaConf.create(CONFIG)
    cfg.sigma = 0.12
    cfg.method.lbd = 4.0
    assert cfg.method.lbd == 4.0


def test_a_stored_config_of_the_teacher_folder_still_resolves_where_it_did() -> None:
    """Runs made before prerequisite_dir keep ``teacher_dir: ${rs.teacher_dir:...}`` in .hydra/config.yaml."""
    stored = OmegaConf.create(
        {
            "run": "${rs.teacher_dir:RunMode.RUN,multirun/x}",
            "sweep": "${rs.teacher_dir:RunMode.MULTIRUN,multirun/x}",
            "now": "${rs.prerequisite_dir:RunMode.MULTIRUN,multirun/x}",
        }
    )
    assert (stored.run, stored.sweep, stored.now) == ("outputs/teachers", "multirun/x/teachers", "multirun/x")
