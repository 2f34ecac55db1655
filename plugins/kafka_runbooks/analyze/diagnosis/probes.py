"""Direct Kafka checks taken during the capture: request handling stalled (every check timed out while unread bytes
grew on the listener), or a broker that did not answer for reasons the evidence cannot tell."""

from __future__ import annotations

from ...model import Evidence, Finding, Severity
from ..parsed_file import ParsedFile
from ..parsers.listings import is_timeout
from .core import broker_label, by_broker
from .sockets import on_broker_endpoint, socket_tables


def _recvq_series(files: list[ParsedFile], broker: int | None, broker_ports, broker_hosts) -> list[tuple[ParsedFile, int, int, int]]:
    """(file, Recv-Q bytes, CLOSE_WAIT count, ESTABLISHED count) on the broker's listener, per socket table in order."""
    out = []
    for f in socket_tables(files).get(broker, []):
        rows = [r for r in f.result.rows if on_broker_endpoint(r, broker, broker_ports, broker_hosts) and r.state != "LISTEN"]
        out.append((f, sum(r.recv_q for r in rows), sum(1 for r in rows if r.state == "CLOSE_WAIT"),
                    sum(1 for r in rows if r.state == "ESTABLISHED")))
    return out


def probe_findings(files: list[ParsedFile], broker_ports, broker_hosts) -> list[Finding]:
    out = []
    probes = by_broker(files, "kafka_probe")
    for b, fs in probes.items():
        results = [(f, r) for f in fs for r in f.result.results]
        if not results:
            continue
        failed = [(f, r) for f, r in results if not r.ok]
        timeouts = [(f, r) for f, r in failed if is_timeout(r.error)]
        series = _recvq_series(files, b, broker_ports, broker_hosts)
        grows = len(series) >= 2 and series[-1][1] > series[0][1]
        cw_grows = len(series) >= 2 and series[-1][2] > series[0][2]
        ev = [Evidence(f.path, (), "\n".join(f"{r.at} {r.check}: {'ok' if r.ok else r.error} "
                                            f"({r.latency_ms} ms)" for g, r in results if g is f)[:1500], f.host) for f in fs]
        ev += [Evidence(f.path, (), f"Recv-Q {q} bytes, CLOSE_WAIT {cw}, ESTABLISHED {es} on the listener", f.host)
               for f, q, cw, es in series]
        if timeouts and len(failed) == len(results) and (grows or cw_grows):
            out.append(Finding(
                kind="request_handling_stalled", severity=Severity.CRITICAL,
                summary=(f"request handling stalled on {broker_label(b)}: all {len(results)} direct Kafka check(s) failed "
                         f"({len(timeouts)} timed out) while unread bytes on its listener grew "
                         f"{series[0][1]} -> {series[-1][1]} (CLOSE_WAIT {series[0][2]} -> {series[-1][2]}) across "
                         f"{len(series)} socket tables"),
                broker_ids=(b,) if b is not None else (), evidence=tuple(ev),
                details={"cause": "probes_and_recv_q", "checks": len(results), "timeouts": len(timeouts),
                         "recv_q": [s[1] for s in series], "close_wait": [s[2] for s in series]}))
        elif failed:
            why = ("Recv-Q did not grow" if len(series) >= 2 else "fewer than two socket tables to compare Recv-Q")
            out.append(Finding(
                kind="broker_unresponsive", severity=Severity.WARNING,
                summary=(f"{len(failed)} of {len(results)} direct Kafka check(s) of {broker_label(b)} failed "
                         f"({failed[-1][1].error}); ambiguous: {why}, so a stall of request handling is not shown"),
                broker_ids=(b,) if b is not None else (), evidence=tuple(ev),
                details={"checks": len(results), "failed": len(failed), "timeouts": len(timeouts),
                         "ambiguity": why}))
    return out
