"""A client sending requests the brokers do not understand (incident 002a). Pure.

``unknown_api_requests`` (opens an incident: the response captures the socket tables and logs, the analysis
names the client; nothing is restarted): brokers whose server.log, within ``health.bad_request_window_s``,
rejected requests with an API key they do not know. One finding per client address. Severity:

* critical for the 0.9 - 0.10.0 form (``Processor got uncaught exception`` ... ``ArrayIndexOutOfBoundsException:
  18 at ApiKeys.forId``): the exception escapes the network thread's loop over the requests it selected in
  that poll, so every request of the same batch -- other clients', other brokers' -- is dropped (seed 002:
  the monitor's write failed and recovered at once; replication between brokers suffered too);
* warning for the later form (0.10.1+: ``Closing socket for <connection> because of error`` /
  ``InvalidRequestException: Unknown API key N``, 0.10.1 - 0.11: ``... Error getting request for apiKey: N``, seen on
  the lab's 0.10.2.1): only that client's connection is closed.

The product itself is never that client: a broker that may be older than 0.10.0 is sent no ApiVersions and no key
it does not know, by the product's wire code or its librdkafka clients (``versions.asking``).

The client is named by what the broker saw: its address and port (Kafka's connection id
``local-peer-index``) and the sockets that address holds on the broker now (the socket table). Its client id
is NOT in the broker's log: Kafka rejects the request header before reading it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kafka_runbooks.detect.context import Context
from kafka_runbooks.model import Evidence, Finding, Severity

PROBLEM = "bad_client_requests"
OPENS_INCIDENT = ("unknown_api_requests",)
RUNBOOK = "runbooks/unsupported-client-request.md"
BATCH_DROPPED = ("on Kafka 0.9 - 0.10.0 brokers this request ('Processor got uncaught exception', ArrayIndexOutOfBoundsException "
                 "from ApiKeys.forId) aborts the network thread's pass over the requests it selected in that poll: every "
                 "request of the same batch -- other clients', and replication and controller requests between brokers -- is "
                 "dropped, which is why a monitor sees writes fail and recover at once")


def detect_unknown_api_requests(ctx: Context) -> list[Finding]:
    by_client: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    for p in ctx.snapshot.probes:
        if not p.reachable:
            continue
        for x in p.lines("unknown_api_key"):
            by_client[x.attrs.get("client_host") or "unknown address"].append((p.broker_id, x))
    findings = []
    for client, seen in sorted(by_client.items()):
        brokers = sorted({b for b, _ in seen})
        keys = sorted({x.attrs.get("api_key") for _, x in seen if x.attrs.get("api_key")}, key=lambda k: int(k))
        old_form = any(x.attrs.get("form") == "processor_uncaught_exception" for _, x in seen)
        ports = sorted({x.attrs["client_port"] for _, x in seen if x.attrs.get("client_port")}, key=int)
        now_held = sorted({s.strip() for _, x in seen for s in (x.attrs.get("client_sockets_now") or "").split(";")
                           if s.strip() and s.strip() != "none"})
        versions = {b: (ctx.snapshot.broker(b).version if ctx.snapshot.broker(b) else None) for b in brokers}
        first, last = min(x.at for _, x in seen), max(x.at for _, x in seen)
        key_text = ", ".join(f"API key {k}" for k in keys) or "an API key it could not read"
        summary = (f"Broker(s) {brokers} rejected {len(seen)} request(s) with {key_text} from client {client}"
                   + (f" (ports {', '.join(ports[:8])})" if ports else "") + f" between {first} and {last}"
                   + (f"; that address holds now: {'; '.join(now_held[:4])}" if now_held else "; that address holds no socket on the broker now")
                   + "; the client id is not in the broker's log (the request header is rejected before it is read): find it by address")
        summary += ("; " + BATCH_DROPPED) if old_form else (
            "; this broker only closes that client's connection ('Closing socket ... because of error'); " + BATCH_DROPPED.replace(
                "on Kafka 0.9 - 0.10.0 brokers this request", "on 0.9 - 0.10.0 brokers the same request"))
        summary += "; no restart: upgrade the brokers or pin the client's protocol version"
        evidence = [Evidence(source=f"probe:broker/{b}/{x.source or 'server.log'}", lines=(x.line_no,), excerpt=x.excerpt, host=ctx.host_of(b))
                    for b, x in seen[-ctx.settings.max_evidence:]]
        findings.append(Finding(
            kind="unknown_api_requests", severity=Severity.CRITICAL if old_form else Severity.WARNING, summary=summary,
            broker_ids=tuple(brokers), evidence=tuple(evidence),
            details={"problem": PROBLEM, "subject": client, "client": {"host": client, "ports": ports, "sockets_now": now_held},
                     "api_keys": keys, "form": "processor_uncaught_exception" if old_form else "invalid_request",
                     "batch_dropped": old_form, "broker_versions": {str(b): v for b, v in versions.items()},
                     "count": len(seen), "first": first, "last": last, "no_restart": True, "runbook": RUNBOOK,
                     "advice": "Find the client by its address; pin its protocol/API version (or upgrade it to one that checks "
                               "ApiVersions) to what the brokers support, or upgrade the brokers. Nothing is restarted."},
        ))
    return findings
