"""Validation of an incident-response request (DAG-run conf from the UI form or the health check)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from kafka_runbooks.incidents.store import IncidentError, validate_id

MAX_REASON = 2000


@dataclass(frozen=True)
class IncidentRequest:
    cluster: str
    broker_ids: tuple[int, ...]
    reason: str
    incident_id: str | None
    zookeeper_servers: tuple[str, ...] = ()  # a ZooKeeper incident: the member(s) it is about


_ZK_SERVER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


def _zk_server(value: Any) -> str:
    """A ZooKeeper member: its server id (myid) as configured, or "host:port" when the cluster names none."""
    if not isinstance(value, (str, int)) or isinstance(value, bool) or not _ZK_SERVER_RE.fullmatch(str(value)) or ".." in str(value):
        raise IncidentError(f"'zookeeper_servers' holds {value!r}, which is not a ZooKeeper server id")
    return str(value)


def parse_request(conf: Mapping[str, Any], known_brokers: set[int] | None = None) -> IncidentRequest:
    """Checks every field; a wrong one is a clear error naming it, never a guess."""
    cluster = conf.get("cluster")
    if not isinstance(cluster, str) or not cluster:
        raise IncidentError("'cluster' must be a non-empty string")
    validate_id(cluster, "cluster name")

    raw_zk = conf.get("zookeeper_servers") or []
    if isinstance(raw_zk, (str, bytes)) or not isinstance(raw_zk, (list, tuple)):
        raise IncidentError("'zookeeper_servers' must be a list of ZooKeeper server ids")
    zk = tuple(_zk_server(z) for z in raw_zk)
    raw_ids = conf.get("broker_ids")
    # a request naming an incident may leave its brokers to the incident's record (the health check's conf names only
    # the incident: the response reads the rest from what was recorded)
    by_incident = bool(conf.get("incident_id"))
    if raw_ids is None and (zk or by_incident):
        raw_ids = []
    if isinstance(raw_ids, (str, bytes)) or not isinstance(raw_ids, (list, tuple)) or (not raw_ids and not zk and not by_incident):
        raise IncidentError("'broker_ids' must be a non-empty list of broker ids (or 'zookeeper_servers' name the ZooKeeper members)")
    ids: list[int] = []
    for raw in raw_ids:
        if isinstance(raw, bool) or not isinstance(raw, (int, str)) or not str(raw).strip().isdigit():
            raise IncidentError(f"'broker_ids' holds {raw!r}, which is not a broker id")
        ids.append(int(raw))
    if known_brokers is not None:
        unknown = sorted(set(ids) - known_brokers)
        if unknown:
            raise IncidentError(f"brokers {unknown} are not configured for cluster {cluster!r} (known: {sorted(known_brokers)})")

    reason = conf.get("reason") or ""
    if not isinstance(reason, str):
        raise IncidentError("'reason' must be a string")
    incident_id = conf.get("incident_id") or None
    if incident_id is not None:
        validate_id(incident_id)
    return IncidentRequest(cluster=cluster, broker_ids=tuple(sorted(set(ids))), reason=reason[:MAX_REASON], incident_id=incident_id,
                           zookeeper_servers=tuple(sorted(set(zk))))
