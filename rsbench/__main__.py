"""``python -m rsbench [overrides]``: train and certify, configured by Hydra (see ``--help`` and ``--cfg job``)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from rsbench.allocator import reexec_with_fast_allocator


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    """Train and certify as ``cfg`` says; return the sweep objective."""
    from rsbench.run import run

    return run(cfg)


if __name__ == "__main__":
    reexec_with_fast_allocator("rsbench")
    main()
