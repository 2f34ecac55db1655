"""Incidents: one record per incident, its notes, and its append-only audit trail -- kept in the product's state
database (``state/incidents.py``: tables ``krb_incident``, ``krb_incident_note``, ``krb_audit``), reached through
the Airflow connection ``kafka_runbooks_db`` or, without it, the embedded SQLite under the cluster's
``incident_base``. Build the store from the cluster's settings: ``IncidentStore(config)``.

A record: ``id``, ``cluster``, ``status``, ``broker_ids``, ``reason``, ``trigger`` (the finding, or what started a
roll or an election), ``opened_at``/``opened_by``, ``closed_at``, ``notes`` and whatever the response adds (bundle,
report, findings, plan...). An audit entry: who, when, what, where (host, argv), outcome, details.

Concurrency is the database's: every move (a status with its note and audit entry) is one transaction; an incident
opened for a detected problem carries that problem episode's key, unique in the database, so two health checks
racing to open it open it once (the second gets ``IncidentExists``); the audit trail cannot be edited or deleted.

An incident's status, and who moves it (every move is audited as ``status -> <new>``):

    open          opened (by the health check or by hand); no response started yet
    responding    a response run is working on it (``response_run``)
    closed        the response fixed it (approved, done and verified)
    needs_person  the response was rejected, refused or failed: a person owns it now. It no longer
                  holds back the automation: a new detection of the same problem opens a new incident
    resolved      its finding cleared for ``health.clear_checks`` checks in a row, by itself

Only ``responding`` dedupes new detections (detect/: "dedupe only while a response is running").

Least power: a response run takes an incident id only if it is its cluster's and covers its brokers
(``get(id, cluster=, broker_ids=)``: :class:`IncidentMismatch` otherwise); one response per cluster at a time
(``claim_response``: :class:`ResponseRefused` naming the running one); at most ``capture.max_per_hour`` captures of a
cluster in any hour (``start_capture``, audited ``capture_started``: :class:`ResponseRefused` naming the cap).
"""

from kafka_runbooks.state.incidents import (
    CAPTURE_STARTED,
    CLOSED,
    NEEDS_PERSON,
    OPEN,
    RESOLVED,
    RESPONDING,
    STATUSES,
    TERMINAL,
    IncidentError,
    IncidentExists,
    IncidentMismatch,
    IncidentStore,
    ResponseRefused,
    new_incident_id,
    validate_id,
)

__all__ = ["CAPTURE_STARTED", "CLOSED", "NEEDS_PERSON", "OPEN", "RESOLVED", "RESPONDING", "STATUSES", "TERMINAL",
           "IncidentError", "IncidentExists", "IncidentMismatch", "IncidentStore", "ResponseRefused", "new_incident_id",
           "validate_id"]
