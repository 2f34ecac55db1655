"""Migrate or inspect the state database by hand (every process also migrates it on first use):

    python -m kafka_runbooks.state upgrade              # the database of the Airflow connection kafka_runbooks_db
    python -m kafka_runbooks.state current --cluster lab  # that cluster's database (the connection, else its embedded one)
    python -m kafka_runbooks.state upgrade --url sqlite:////var/lib/kafka-runbooks/state.sqlite
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafka_runbooks.state", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["upgrade", "current", "head"])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--cluster", help="a cluster of the Variable kafka_runbooks_clusters")
    where.add_argument("--url", help="a SQLAlchemy URL (postgresql+psycopg2://... or sqlite:///...)")
    args = parser.parse_args(argv)

    from kafka_runbooks.state.db import StateDb, head_revision

    if args.command == "head":
        print(head_revision())
        return 0
    if args.url:
        db = StateDb(args.url, migrate=False)
    elif args.cluster:
        from kafka_runbooks.config import load_cluster
        from kafka_runbooks.hooks.db import state_db_for

        db = StateDb(state_db_for(load_cluster(args.cluster)).url, migrate=False)
    else:
        from kafka_runbooks.hooks.db import DEFAULT_CONN_ID, KafkaRunbooksDbHook, configured

        if not configured(DEFAULT_CONN_ID):
            print(f"no Airflow connection {DEFAULT_CONN_ID!r}: name a --cluster (its embedded database) or a --url",
                  file=sys.stderr)
            return 2
        db = StateDb(KafkaRunbooksDbHook().get_url(), migrate=False)
    if args.command == "upgrade":
        print(f"{db.safe_url}: at {db.upgrade()}")
    else:
        print(f"{db.safe_url}: at {db.current()} (head {head_revision()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
