"""``python -m rsbench.importer origin=<codebase> path=<file> dataset=<name> sigma=<s> [arch=...] [input_layer=...]``.

Writes an rsbench checkpoint that ``python -m rsbench.certify model.path=<out>`` certifies (see
``conf/importer.yaml`` and ``--help``).
"""

from __future__ import annotations

import logging
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from omegaconf.errors import MissingMandatoryValue

from rsbench.errors import RsbenchError

log = logging.getLogger("rsbench")


@hydra.main(version_base="1.3", config_path="../../conf", config_name="importer")
def main(cfg: DictConfig) -> None:
    """Import ``cfg.path`` as ``cfg.origin`` says and save it; errors end with their message and exit status 2."""
    from rsbench.checkpoint import SIGNATURE_KEY  # (torch, like the importer: loaded once the command runs)
    from rsbench.importer.convert import IMPORT_KEY, DatasetFacts, default_output, import_checkpoint, save_imported

    try:
        chosen_arch = HydraConfig.get().runtime.choices.get("arch")
        checkpoint = import_checkpoint(
            cfg.origin,
            cfg.path,
            DatasetFacts.from_config(cfg.dataset),
            cfg.sigma,
            arch=None if chosen_arch == "recipe" else cfg.arch.arch,
            input_layer=cfg.input_layer,
            method=cfg.method,
        )
        out = save_imported(checkpoint, cfg.out or default_output(cfg.path), overwrite=cfg.overwrite)
    except (RsbenchError, MissingMandatoryValue) as error:
        log.error("%s", error)
        sys.exit(2)
    signature, source = checkpoint[SIGNATURE_KEY], checkpoint[IMPORT_KEY]
    for note in source["notes"]:
        log.info("note: %s", note)
    log.info(
        "wrote %s: %s %s, input layer %s, sigma=%s, %d classes\ncertify it with:\n  python -m rsbench.certify "
        "model.path=%s dataset=%s",
        out,
        signature["method"],
        signature["arch"],
        source["input_layer"],
        signature["sigma"],
        signature["num_classes"],
        out,
        cfg.dataset.name,
    )


if __name__ == "__main__":
    main()
