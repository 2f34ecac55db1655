"""Where the Spark applications are: ``spark_apps/`` ships inside the package (package data; in the repository
``plugins/kafka_runbooks/spark_apps`` links to the top-level ``spark_apps/``), found through importlib.resources so an
installed wheel, an editable install and the checkout all give spark-submit a real file."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

ANALYZE_BUNDLE = "analyze_bundle.py"
FLEET_ANALYTICS = "fleet_analytics.py"


def app_path(name: str) -> Path:
    """The file of one Spark application (spark-submit needs a path on disk, not a resource in a zip)."""
    ref = resources.files("kafka_runbooks").joinpath("spark_apps", name)
    path = Path(str(ref))
    if not isinstance(ref, Path) or not path.is_file():
        raise FileNotFoundError(f"the Spark application {name!r} is not a file of the installed kafka_runbooks package "
                                f"({ref}): install the distribution from a wheel or a checkout, not from a zip")
    return path
