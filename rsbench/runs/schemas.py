"""The structured configs Hydra composes rsbench's YAML onto, registered in Hydra's config store.

``conf/certify/default.yaml`` lists ``optional /certify_schema@_here_: settings`` first in its defaults, so once
:func:`register_schemas` has run, the ``certify`` node is :data:`rsbench.certify.pipeline.settings.CertifyConfig` with
the YAML merged onto it: a key that is not a certification setting, or a value of the wrong type, fails when Hydra
composes the config (``Key 'nn' not in 'CertifyConfig'``, ``Value 'abc' ... could not be converted to Integer``), naming
the key. The schema comes from the settings dataclasses, which load torch, so the command registers it for the runs it
starts and not for queries (``--help``, ``--cfg job``), which compose the YAML alone and stay instant.
"""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from rsbench.certify.pipeline.settings import CertifyConfig

CERTIFY_SCHEMA = ("certify_schema", "settings")  # (group, name) that conf/certify/default.yaml's defaults list names


def register_schemas() -> None:
    """Store the ``certify`` schema in Hydra's config store (idempotent); call it before Hydra composes."""
    group, name = CERTIFY_SCHEMA
    ConfigStore.instance().store(group=group, name=name, node=CertifyConfig)
