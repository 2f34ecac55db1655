"""``kafka-runbooks``: the console script (pyproject.toml).

    kafka-runbooks validate FILE         check a JSON file of {cluster: settings} (what the Variable holds)
    kafka-runbooks validate --variable   check the Airflow Variable kafka_runbooks_clusters (Airflow configured)
    kafka-runbooks validate              $KAFKA_RUNBOOKS_CLUSTERS_FILE, else the Variable
    kafka-runbooks schema [-o FILE]      the settings' JSON Schema (docs/settings.schema.json is this output)
    kafka-runbooks dag-file              the one DAG file that creates every DAG (copy it into your DAG folder)

``validate`` checks each cluster exactly as the DAG file's parse does and prints one sentence per problem (the
cluster, the key, what was expected); exit status 0: every cluster valid, 1: a problem, 2: nothing readable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from importlib import resources
from typing import Any, Sequence

EXAMPLE_DAG_FILE = "kafka_runbooks_dags.py"


def _read(args: argparse.Namespace) -> tuple[str, Any]:
    from kafka_runbooks.config import VARIABLE_NAME, raw_clusters  # deferred: each subcommand loads only what it uses

    if args.file:
        with open(args.file, encoding="utf-8") as fh:
            return args.file, json.load(fh)
    if args.variable:
        from airflow.sdk import Variable

        return f"Variable {VARIABLE_NAME}", Variable.get(VARIABLE_NAME, deserialize_json=True)
    from kafka_runbooks.config import FILE_ENV  # deferred: each subcommand loads only what it uses

    return os.environ.get(FILE_ENV) or f"Variable {VARIABLE_NAME}", raw_clusters()


def validate(args: argparse.Namespace) -> int:
    from kafka_runbooks.config import all_errors  # deferred: each subcommand loads only what it uses

    try:
        source, raw = _read(args)
    except (OSError, ValueError) as exc:
        print(f"kafka-runbooks: cannot read the settings: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the Variable missing, the metadata database unreachable: say so
        print(f"kafka-runbooks: cannot read the settings: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    problems = all_errors(raw)
    for cluster, errs in problems.items():
        for err in errs:
            print(err)
    names = sorted(map(str, raw)) if isinstance(raw, dict) else []
    good = [n for n in names if n not in problems]
    print(f"{source}: {len(good)} of {len(names)} cluster(s) valid" + (f": {', '.join(good)}" if good else ""),
          file=sys.stderr)
    return 1 if problems or not names else 0


def schema(args: argparse.Namespace) -> int:
    from kafka_runbooks.config import ClusterConfig  # deferred: each subcommand loads only what it uses
    from kafka_runbooks.settings_model import json_schema  # deferred: each subcommand loads only what it uses

    text = json.dumps(json_schema(ClusterConfig), indent=2, sort_keys=True) + "\n"
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


def dag_file(args: argparse.Namespace) -> int:
    sys.stdout.write(resources.files("kafka_runbooks").joinpath("example_dags", EXAMPLE_DAG_FILE).read_text("utf-8"))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafka-runbooks", description="kafka-runbooks: settings and DAG file tools")
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="check the clusters' settings as the DAG file's parse does")
    src = v.add_mutually_exclusive_group()
    src.add_argument("file", nargs="?", help="a JSON file of {cluster: settings}")
    src.add_argument("--variable", action="store_true", help="the Airflow Variable kafka_runbooks_clusters")
    v.set_defaults(run=validate)
    s = sub.add_parser("schema", help="print (or write) the settings' JSON Schema")
    s.add_argument("-o", "--output", help="write it to this file")
    s.set_defaults(run=schema)
    d = sub.add_parser("dag-file", help="print the DAG file that creates every kafka-runbooks DAG")
    d.set_defaults(run=dag_file)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
