"""``experiments/fashion_mnist_table/subset_bias.py``: the authors' ACR on the every-20th subset against all 10,000
images.

Tolerance: 5e-5 against numbers quoted with 4 decimals (the README's and the report's), 5e-3 against the quoted z;
1e-9 between two means of the same 500 float64 scores summed in different orders (rounding about 1e-15).
"""

from __future__ import annotations

import pytest

from rsbench.published.catalogue import released_logs
from tests.scripts import experiment_script

pytestmark = pytest.mark.study


def test_every_fashion_mnist_log_is_listed_and_gaussian_at_sigma_1_is_the_tables_and_the_reports_number() -> None:
    lines = experiment_script("fashion_mnist_table/subset_bias").subset_bias()
    assert len(lines) == 21  # 7 methods x 3 sigmas
    _, _, full, subset, z = next(line for line in lines if line[:2] == ("gaussian", 1.0))
    assert full == pytest.approx(1.3163, abs=5e-5)  # the table's number (README), all 10,000 images
    assert subset == pytest.approx(1.4185, abs=5e-5)  # the report's "authors' ACR (same images)" for the 500
    assert z == pytest.approx(2.16, abs=5e-3)
    log = next(
        log for log in released_logs() if (log.method, log.dataset, log.sigma) == ("gaussian", "fashion_mnist", 1.0)
    )
    released = log.read()
    every_20th = [score for image, score in zip(released.images, released.scores, strict=True) if image % 20 == 0]
    assert len(every_20th) == 500
    assert subset == pytest.approx(sum(every_20th) / 500, abs=1e-9)


def test_a_subset_that_is_the_whole_test_set_is_refused() -> None:
    with pytest.raises(ValueError, match="skip=1: the subset must leave images out"):
        experiment_script("fashion_mnist_table/subset_bias").subset_bias(1)
