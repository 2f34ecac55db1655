"""Analyze: the bundle goes through the PySpark job (Airflow's SparkSubmitOperator, shipping the package); its findings
and report join the incident (``runbook/analyze.py``)."""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Sequence

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperator

import kafka_runbooks
from kafka_runbooks.operators.glue import service
from kafka_runbooks.operators.links import LINKS
from kafka_runbooks.spark_apps_path import ANALYZE_BUNDLE, FLEET_ANALYTICS, app_path

PACKAGE_DIR = Path(kafka_runbooks.__file__).resolve().parent
# package data (importlib.resources): the same file in an installed wheel, an editable install and the checkout
DEFAULT_APP = app_path(ANALYZE_BUNDLE)
FLEET_APP = app_path(FLEET_ANALYTICS)
SPARK_APPS = DEFAULT_APP.parent


def package_zip(dest_dir: str) -> str:
    """Zip of the kafka_runbooks package, shipped with --py-files so any Spark master can import it."""
    path = Path(dest_dir) / "kafka_runbooks.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in sorted(PACKAGE_DIR.rglob("*.py")):
            zf.write(file, file.relative_to(PACKAGE_DIR.parent).as_posix())
    return str(path)


class PackagedSparkSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator for one of ``spark_apps/`` that ships the kafka_runbooks package with the job.

    Executors run the same interpreter as this worker unless the deployment sets ``PYSPARK_PYTHON``.
    """

    def __init__(self, **kwargs: Any) -> None:
        env = dict(kwargs.pop("env_vars", None) or {})
        if "PYSPARK_PYTHON" not in os.environ:
            env.setdefault("PYSPARK_PYTHON", sys.executable)
        kwargs["env_vars"] = env
        super().__init__(**kwargs)

    def execute(self, context) -> None:
        with tempfile.TemporaryDirectory(prefix="kafka-runbooks-spark-") as tmp:
            self.py_files = package_zip(tmp)
            super().execute(context)


class AnalyzeBundleOperator(PackagedSparkSubmitOperator):
    """``spark_apps/analyze_bundle.py`` on one evidence bundle.

    ``bundle_dir`` is a path on storage every executor can read (a shared mount) or an s3a:// / hdfs:// URI. With an
    ``incident`` (the open task's output), the bundle analysed is the incident's recorded one and ``bundle_dir`` (what
    the capture task pushed) must be it (``runbook.analyze.bundle_to_analyze``): the task fails naming both otherwise.
    """

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report
    template_fields: Sequence[str] = tuple(SparkSubmitOperator.template_fields) + ("incident",)

    def __init__(self, *, bundle_dir: str, kafka_version: str = "", incident: Any = None, extra_args: Sequence[str] = (),
                 **kwargs: Any) -> None:
        kwargs.setdefault("application", os.environ.get("KAFKA_RUNBOOKS_SPARK_APP", str(DEFAULT_APP)))
        kwargs.setdefault("name", "kafka-runbooks-analyze-bundle")
        kwargs["application_args"] = ["--bundle", bundle_dir, "--kafka-version", kafka_version, *extra_args]
        self.incident = incident
        super().__init__(**kwargs)

    def execute(self, context) -> None:
        if self.incident is not None:  # the incident's recorded bundle, never the pushed one alone
            from kafka_runbooks.runbook import analyze  # keeps DAG parsing fast: loaded when the task runs

            with service(context, self.log) as task:
                self.application_args[1] = analyze.bundle_to_analyze(self.incident, self.application_args[1], task)
        super().execute(context)


class FleetAnalyticsOperator(PackagedSparkSubmitOperator):
    """``spark_apps/fleet_analytics.py`` over every bundle under a base location."""

    template_fields: Sequence[str] = tuple(SparkSubmitOperator.template_fields) + ("base", "out")

    def __init__(self, *, base: str, out: str, days: int = 30, analyze_missing: bool = True, **kwargs: Any) -> None:
        kwargs.setdefault("application", str(FLEET_APP))
        kwargs.setdefault("name", "kafka-runbooks-fleet-analytics")
        self.base, self.out = base, out
        self._fleet_args = ["--days", str(int(days))] + (["--analyze-missing"] if analyze_missing else [])
        super().__init__(**kwargs)

    def execute(self, context) -> None:
        self.application_args = ["--base", self.base, "--out", self.out, *self._fleet_args]
        super().execute(context)


class PublishReportOperator(BaseOperator):
    """Reads the job's findings.json, attaches findings and report to the incident; returns a reference to them (the
    incident, the bundle, the count, the file's SHA-256), never the findings (``runbook/finding_records.py``)."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = ("incident", "bundle_dir")

    def __init__(self, *, incident: Any, bundle_dir: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.incident = incident
        self.bundle_dir = bundle_dir

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.runbook import analyze  # keeps DAG parsing fast: loaded when the task runs

        with service(context, self.log) as task:
            return analyze.publish(self.incident, str(self.bundle_dir), task)
