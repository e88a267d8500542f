"""The one packaging detail setup.cfg cannot express: ship ``conf/`` inside the package, as ``rsbench/conf``.

Metadata and dependencies live in setup.cfg. In a checkout (and an editable install) the configs are read from
``conf/``; an installed wheel reads its copy in ``rsbench/conf`` (see ``rsbench.runs.cli.config_dir``).
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["rsbench", "rsbench.*"]), "rsbench.conf"],
    package_dir={"rsbench.conf": "conf"},
    package_data={
        "rsbench.conf": ["*.yaml", "**/*.yaml"],
        "rsbench.report": [
            "published.csv",
            "released/*.csv",
            "released/*.yaml",
            "released/LICENSE",
            "released/*/LICENSE",
            "released/**/*.tsv.gz",
        ],
    },
    exclude_package_data={"rsbench.conf": ["local/*"]},  # per-machine overrides stay on the machine
)
