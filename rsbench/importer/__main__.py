"""``python -m rsbench.importer origin=<codebase> path=<file> dataset=<name> sigma=<s> [arch=...] [input_layer=...]``.

Writes an rsbench checkpoint that ``python -m rsbench.certify model.path=<out>`` certifies (see
``conf/importer.yaml`` and ``--help``). ``--help`` answers at once (nothing imports torch before the import runs);
a bad request ends with one line, ``rsbench: error: ...``, and exit status 2.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

from rsbench.errors import ConfigError, RsbenchError
from rsbench.methods.card import origins
from rsbench.runs.cli import HELP_FLAGS, config_dir, is_query, share_config_store
from rsbench.runs.floor import refuse
from rsbench.runs.quoting import override, shell_command

log = logging.getLogger("rsbench")

REQUIRED = {
    "origin": f"the codebase that released the file, one of {', '.join(sorted(origins()))} (the method cards' origins)",
    "path": "the released file",
    "sigma": "the noise level it was trained at (the authors' folder names: noise_0.25, sig0_tr_0.25)",
}


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="importer")
def main(cfg: DictConfig) -> None:
    """Import ``cfg.path`` as ``cfg.origin`` says and save it; errors end with one line and exit status 2."""
    try:
        out, checkpoint = _import(cfg)
    except (RsbenchError, MissingMandatoryValue) as error:
        refuse(str(error))
    from rsbench.checkpoint import SIGNATURE_KEY
    from rsbench.importer.convert import IMPORT_KEY

    signature, source = checkpoint[SIGNATURE_KEY], checkpoint[IMPORT_KEY]
    for note in source["notes"]:
        log.info("note: %s", note)
    log.info(
        "wrote %s: %s %s, input layer %s, sigma=%s, %d classes\ncertify it with:\n  %s",
        out,
        signature["method"],
        signature["arch"],
        source["input_layer"],
        signature["sigma"],
        signature["num_classes"],
        shell_command("rsbench.certify", override("model.path", out), f"dataset={cfg.dataset.name}"),
    )


def _import(cfg: DictConfig) -> tuple[Path, dict]:
    """Check the request, then import and write the checkpoint; return where it was written and the checkpoint."""
    missing = [key for key in REQUIRED if OmegaConf.is_missing(cfg, key) or cfg[key] is None]
    if cfg.get("dataset") is None:
        missing.insert(1, "dataset")
    if missing:
        what = {**REQUIRED, "dataset": "the dataset it was trained on (cifar10, cifar100, imagenet, mnist, ...)"}
        raise ConfigError("; ".join(f"{key}= is required: {what[key]}" for key in missing))
    from rsbench.importer.convert import DatasetFacts, check_output, default_output, import_checkpoint, save_imported

    out = check_output(cfg.out or default_output(cfg.path), overwrite=cfg.overwrite)  # before the work
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
    return save_imported(checkpoint, out, overwrite=cfg.overwrite), checkpoint


if __name__ == "__main__":
    if not is_query(sys.argv[1:]):
        from rsbench.runs.cli import override_key
        from rsbench.runs.request import check_choice, check_request

        try:
            check_request(sys.argv[1:], "importer")
            for arg in sys.argv[1:]:
                if override_key(arg) == "origin" and "=" in arg:
                    check_choice("origin", arg.split("=", 1)[1], sorted(origins()))
        except ConfigError as error:
            refuse(str(error))
    elif HELP_FLAGS.intersection(sys.argv[1:]):
        share_config_store()
    main()
