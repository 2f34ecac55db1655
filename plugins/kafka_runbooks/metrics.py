"""The product's own metrics, sent through Airflow's Stats (``airflow.sdk.observability.stats``): whatever the
deployment configured in ``[metrics]`` -- StatsD (``statsd_on``, needs Airflow's ``statsd`` extra), DogStatsD or
OpenTelemetry (``otel_on``) -- with its prefix, allow/block lists and name handler. Nothing configured: nothing sent.

Names (after the deployment's prefix, e.g. ``airflow.``):

* ``kafka_runbooks.findings.<kind>`` (counter): a finding the health check acted on;
* ``kafka_runbooks.incidents.opened`` / ``kafka_runbooks.incidents.closed`` (counters);
* ``kafka_runbooks.incident.time_to_detect`` (timer): from when the problem began (the finding's ``since``) to the
  incident being opened; ``...time_to_mitigate``: opened to the last broker restarted; ``...time_to_recover``: opened to closed;
* ``kafka_runbooks.roll.duration`` / ``kafka_runbooks.election.duration`` (timers): one roll, one election;
* ``kafka_runbooks.refusals.<code>`` (counter): a plan or an approval refused, by reason code.

Every call is a no-op on error: a metric never changes what a run does. In a task, Airflow's task runner has
initialised Stats from the deployment's configuration; elsewhere (a script, a test) it is initialised here, once,
from the same configuration, as Airflow's own modules do (``airflow.sdk.serde``).
"""

from __future__ import annotations

import datetime as _dt
import logging
import re
from typing import Any, Mapping

log = logging.getLogger(__name__)

PREFIX = "kafka_runbooks"
_NAME_RE = re.compile(r"[^a-zA-Z0-9_-]")


def _stats():
    from airflow.sdk._shared.observability.metrics import stats as shared
    from airflow.sdk.observability import stats

    if shared._factory is None:  # not initialised by Airflow's task runner in this process
        from airflow.sdk.configuration import conf
        from airflow.sdk.observability.metrics.stats_utils import get_stats_factory

        stats.initialize(factory=get_stats_factory(), export_legacy_names=conf.getboolean("metrics", "legacy_names_on"))
    return stats


def part(value: Any) -> str:
    """One dot-free part of a metric name (a finding kind, a reason code)."""
    return _NAME_RE.sub("_", str(value)).strip("_")[:100] or "unknown"


def incr(name: str, count: int = 1) -> None:
    try:
        _stats().incr(f"{PREFIX}.{name}", count)
    except Exception as exc:  # noqa: BLE001 - a metric never fails a run
        log.warning("metric %s not sent: %r", name, exc)


def timing(name: str, seconds: float | None) -> None:
    if seconds is None or seconds < 0:
        return
    try:
        _stats().timing(f"{PREFIX}.{name}", _dt.timedelta(seconds=seconds))
    except Exception as exc:  # noqa: BLE001
        log.warning("metric %s not sent: %r", name, exc)


def _at(value: Any) -> _dt.datetime | None:
    if isinstance(value, _dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _dt.datetime.fromtimestamp(float(value), _dt.timezone.utc)
    if isinstance(value, str) and value:
        try:
            return _at(_dt.datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return None
    return None


def seconds_between(start: Any, end: Any) -> float | None:
    a, b = _at(start), _at(end)
    return (b - a).total_seconds() if a is not None and b is not None else None


def finding(kind: str) -> None:
    incr(f"findings.{part(kind)}")


def refusal(code: str) -> None:
    incr(f"refusals.{part(code)}")


def incident_opened(record: Mapping[str, Any]) -> None:
    """An incident was opened: counted, and its time to detect when its trigger says when the problem began."""
    incr("incidents.opened")
    trigger = record.get("trigger") or {}
    began = (trigger.get("details") or {}).get("since") if isinstance(trigger, Mapping) else None
    timing("incident.time_to_detect", seconds_between(began, record.get("opened_at")))


def restarted(audit: Any) -> list[Mapping[str, Any]]:
    """The audit entries of brokers really restarted (``restart_broker`` ok): not a skipped step, not a resumed step that
    ran its gates only (audited ``gates_only``; before, ``restart_broker`` ok with ``timing.resumed`` "gates only")."""
    def real(e: Any) -> bool:
        if not isinstance(e, Mapping) or e.get("action") != "restart_broker" or e.get("outcome") != "ok":
            return False
        timing_ = (e.get("details") or {}).get("timing") if isinstance(e.get("details"), Mapping) else None
        return not (isinstance(timing_, Mapping) and timing_.get("resumed") == "gates only")

    return [e for e in (audit or ()) if real(e)]


def incident_closed(record: Mapping[str, Any], audit: Any = None) -> None:
    """An incident was closed: counted, with its time to recover (opened to closed) and, when its audit trail holds
    a broker restarted (``restart_broker`` ok), its time to mitigate (opened to the last broker restarted)."""
    incr("incidents.closed")
    restarts = [e.get("at") for e in restarted(audit)]
    timing("incident.time_to_mitigate", seconds_between(record.get("opened_at"), restarts[-1]) if restarts else None)
    timing("incident.time_to_recover", seconds_between(record.get("opened_at"), record.get("closed_at")))


def roll_finished(result: Any) -> None:
    """A roll restarted every broker: its wall time (the executor's ``wall_s``)."""
    timing("roll.duration", (result or {}).get("wall_s") if isinstance(result, Mapping) else None)


def election_finished(result: Any) -> None:
    """An election finished: its wall time (the election run's ``wall_s``)."""
    timing("election.duration", (result or {}).get("wall_s") if isinstance(result, Mapping) else None)


_BROKER_RE = re.compile(r"^broker \d+: ")
_CODE_RE = re.compile(r"[a-z][a-z_-]*")


def refusal_code(reason: str) -> str:
    """A reason's code: its first words up to the first number, name or quote ("broker 2: 3 partition(s) would go
    offline" -> "partitions_would_go_offline"; "no broker to restart" -> "no_broker_to_restart")."""
    words: list[str] = []
    for token in _BROKER_RE.sub("", str(reason)).lower().replace("(s)", "s").split():
        if not _CODE_RE.fullmatch(token.strip(",.;:")):
            if words:
                break
            continue
        words.append(token.strip(",.;:"))
        if len(words) == 5 or token.endswith((",", ";", ":")):
            break
    return part("_".join(words)) if words else "other"


def plan_refused(reasons: Any) -> None:
    """A plan was refused: one count per distinct reason code."""
    for code in sorted({refusal_code(r) for r in (reasons or ())}):
        refusal(code)
