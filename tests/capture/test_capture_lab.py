"""Capture on the lab's real Kafka 2.3.0 brokers: gentle with the peers, heavy only on the suspect,
bounded on a stopped JVM, truthful about what it could not do."""

from __future__ import annotations

import json
import os

import pytest

from kafka_runbooks import clock
from kafka_runbooks.capture.bundle import EvidenceBundle, verify
from kafka_runbooks.capture.collector import capture_cluster
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.detect.observe import brokers_to_probe, known_registrations, take_snapshot
from kafka_runbooks.hooks.kafka import KafkaHook
from kafka_runbooks.model import Finding, Severity
from kafka_runbooks.runbook.capture import MaintenanceLockGate

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]


def capture(lab, tmp_path, suspects, **capture_settings):
    os.environ.update(lab.airflow_env())
    raw = dict(lab.cluster_settings()["lab"])
    raw["bundle_base"] = str(tmp_path / "bundles")
    raw["incident_base"] = str(tmp_path / "incidents")
    raw["capture"] = {**raw.get("capture", {}), **capture_settings}
    config = ClusterConfig.from_dict("lab", raw)
    known = known_registrations(config)
    snapshot = take_snapshot(config, known=known)
    targets, missing = brokers_to_probe(config, snapshot, known)
    hook = KafkaHook(config.kafka_conn_id, listener=config.listener)
    bundle = EvidenceBundle(config.bundle_base, "lab", "inc-lab", capture_id=clock.stamp(micros=True))
    # the incident's trigger, as the health check opens it for a broker that does not serve: what corroborates a direct
    # check with no answer before the intrusive tools may pause the broker (capture.commands.intrusive_evidence)
    trigger = [Finding("broker_unresponsive", Severity.CRITICAL, f"broker {b} failed its direct check, corroborated", broker_ids=(b,))
               for b in suspects]
    gate = MaintenanceLockGate(config, {b.id: b for b in targets}, run_id="capture-test", dag_id="test", findings=trigger)
    manifest = capture_cluster(config, snapshot, [1, 2, 3], bundle, suspects=suspects, known={b.id: b for b in targets}, trigger=trigger[0],
                               checker=lambda: hook.check_all(targets, 5.0, unregistered=missing), intrusive=gate)
    return bundle, manifest


def names(manifest, broker):
    return [c["name"] for c in manifest["commands"] if c["broker_id"] == broker]


def test_a_hung_broker_gets_the_heavy_tools_and_its_peers_one_plain_jstack(healthy_lab, tmp_path):
    healthy_lab.hang(3)
    bundle, m = capture(healthy_lab, tmp_path, [3], heap_dump=False)
    assert m["suspects"] == [3] and m["status"] == "complete", m["status_reasons"]
    three = names(m, 3)
    assert [n for n in three if n.startswith("jstack-")] == ["jstack-1", "jstack-2", "jstack-3"]
    # the lock detail (-l) on the accused suspect only; its peers' dumps are plain, and no two hosts' dumps ran at once
    argvs = {(c["broker_id"], c["name"]): c["argv"] for c in m["commands"] if c["kind"] == "jstack"}
    assert all(("-l" in a) == (b == 3) for (b, _), a in argvs.items()), argvs
    assert "jmap-histo" in three and "heap-info" in three
    # the intrusive tools ran after every gentle one, under the maintenance lock, on the broker proven not serving
    assert m["hosts"]["3"]["intrusive"]["not_serving"].startswith("direct check at") and m["intrusive"]["lock"]["purpose"].startswith("capture")
    assert three.index("jmap-histo") > max(three.index(n) for n in three if n.startswith(("jstack-", "sockets-ss-")))
    for peer in (1, 2):
        assert [n for n in names(m, peer) if n.startswith(("jstack", "jmap", "heap"))] == ["jstack-1"]
        assert m["hosts"][str(peer)]["role"] == "peer" and m["hosts"][str(peer)]["status"] == "complete"
    dump = (bundle.path / "hosts" / "3" / "jstack-1.out").read_text()
    assert "data-plane-kafka-request-handler" in dump  # Kafka 2.3's own request handlers, stuck behind the fault
    # the broker's logs, and the direct checks made during the capture
    kinds = {(f["broker_id"], f["kind"]) for f in m["files"]}
    for kind in ("server_log", "controller_log", "state_change_log", "log_cleaner_log", "kafka_stdout", "gc_log", "proc_threads"):
        assert (3, kind) in kinds, kind
    checks = json.loads((bundle.path / "kafka-checks.json").read_text())
    assert {(c["broker_id"], c["ok"]) for c in checks} == {(1, True), (2, True), (3, False)}
    assert {c["during_capture"] for c in checks} == {"start", "end"}
    # its JMX: one read, bounded, no answer (Kafka's RequestQueueSize gauge waits for the request queue's lock, which
    # the fault holds) -- evidence about a broker that failed every direct check, not a gap in the capture
    jmx = m["hosts"]["3"]["jmx"]
    assert jmx["answered"] is False and jmx["counted_as"] == "evidence" and 0 < jmx["bound_s"] <= 15, jmx
    assert "direct check at the start" in jmx["not_serving"] and "direct check at the end" in jmx["not_serving"]
    (read,) = [c for c in m["commands"] if c["broker_id"] == 3 and c["kind"] == "jmx"]
    assert read["error"] == f"timeout after {jmx['bound_s']:g}s" and read["duration_s"] < jmx["bound_s"] + 10, read
    # ... and it left nothing behind on the host: the one JmxTool JVM is gone with its bound
    left = [p for p in os.listdir("/proc") if p.isdigit() and jmx["url"].encode() in _cmdline(p)]
    assert left == [], left
    for peer in (1, 2):
        assert m["hosts"][str(peer)]["jmx"]["answered"] is True and "counted_as" not in m["hosts"][str(peer)]["jmx"]
    assert verify(bundle.path) == []


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def test_a_paused_jvm_is_captured_within_the_deadline_and_reported_partial(healthy_lab, tmp_path):
    healthy_lab.pause(3)
    bundle, m = capture(healthy_lab, tmp_path, [3], heap_dump=True)
    assert m["hosts"]["3"]["intrusive"]["not_serving"]  # a stopped JVM fails its direct check: jhsdb may read it
    h = m["hosts"]["3"]
    assert h["process_state"] == "stopped" and h["status"] == "partial" and m["status"] == "partial"
    assert m["duration_s"] <= m["deadline_s"] + 15 and h["duration_s"] <= m["deadline_s"]
    # no attach tool, no signal: only the ptrace-based jhsdb, bounded (on JDK 17 it cannot read a Kafka 2.3 JVM: recorded)
    assert [n for n in names(m, 3) if n.startswith(("jstack", "jmap", "heap", "sigquit"))] == ["jstack-jhsdb-1"]
    reasons = " ".join(m["status_reasons"])
    assert "broker 3: skipped jstack: the process is stopped" in reasons and "the process is stopped" in h["heap_dump"]["reason"]
    assert "broker 3: skipped JMX read: the process is stopped" in reasons and "jmx" not in names(m, 3) and "jmx" not in h
    threads = (bundle.path / "hosts" / "3" / "proc-threads.out").read_text()
    assert "kafka-log-clean" in threads and " T " in threads  # the thread list, from the kernel
    assert m["hosts"]["1"]["status"] == m["hosts"]["2"]["status"] == "complete"
    assert healthy_lab.broker_pid(3) and open(f"/proc/{healthy_lab.broker_pid(3)}/stat").read().rsplit(")", 1)[1].split()[0] == "T"



def test_a_serving_suspect_gets_no_tool_that_pauses_it(healthy_lab, tmp_path):
    """Issue 17 §2: a suspect named by whoever triggered the response, but answering its direct check: thread dumps and
    heap sizes only; no jmap -histo:live, no heap dump, no jhsdb -- and its peers never get one either."""
    bundle, m = capture(healthy_lab, tmp_path, [2], heap_dump=True)
    cmds = [c["name"] for c in m["commands"]]
    assert not [n for n in cmds if n.startswith(("jmap", "heap-dump", "jstack-jhsdb"))], cmds
    two = m["hosts"]["2"]
    assert [n for n in names(m, 2) if n.startswith("jstack-")] == ["jstack-1", "jstack-2", "jstack-3"] and "heap-info" in names(m, 2)
    assert {t["tool"] for t in two["left_out"] if "answered a direct Kafka-protocol check" in t["reason"]} == {
        "jhsdb", "jmap -histo:live", "heap dump"}
    assert two["status"] == "complete" and m["status"] == "complete", m["status_reasons"]
    # the JMX read of every broker (the health check's JmxTool), checksummed in the manifest, and read by the analysis
    from kafka_runbooks.analyze.parsers import parse_jmx

    for b in (1, 2, 3):
        entry = next(f for f in m["files"] if f["broker_id"] == b and f["kind"] == "jmx" and f["stream"] == "stdout")
        assert entry["path"] == f"hosts/{b}/jmx.out" and entry["sha256"], entry
        text = (bundle.path / entry["path"]).read_text()
        assert text.startswith('time,"'), text[:200]  # the real tool's first line
        j = parse_jmx(text)
        assert j.ok and j.series("RequestQueueSize") and j.series("FailedProduceRequestsPerSec"), (j.unparsable, text[:300])
        assert m["hosts"][str(b)]["jmx"]["answered"] is True and m["hosts"][str(b)]["plan"]["jmx"] is True
    assert verify(bundle.path) == []


SECRETS = {
    "ssl.keystore.password": "KRSECRET-keystore-7f3a",
    "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="svc" password="KRSECRET-jaas-91c2";',
    "listener.name.client.plain.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required password="KRSECRET-listener-55d0";',
    "my.plugin.api.token": "KRSECRET-token-0b77",
}
CMDLINE_SECRET = "KRSECRET-cmdline-c4e9"


@pytest.mark.airflow
@pytest.mark.spark
def test_planted_secrets_reach_no_bundle_report_or_task_log(healthy_lab, airflow_db, tmp_path, monkeypatch, capfd):
    """Secrets planted in broker 2's server.properties and JVM command line (KAFKA_OPTS), then an incident response run
    for broker 2 (capture, Spark analysis, report; Reject): no secret in any bundle file, the report, the incident's
    records or anything the tasks logged; every bundle file and directory is its owner's only."""
    import stat

    from kafka_lab.airflow_home import load_dags
    from kafka_lab.approvals import Responder
    from kafka_lab.drill import RESPONSE

    lab = healthy_lab
    props = lab.host_dir(2) / "config" / "server.properties"
    start = lab.host_dir(2) / "bin" / "kafka-start"
    original_props, original_start = props.read_text(), start.read_text()
    assert "export KAFKA_OPTS='" in original_start
    try:
        props.write_text(original_props + "".join(f"{k}={v}\n" for k, v in SECRETS.items()))
        start.write_text(original_start.replace("export KAFKA_OPTS='", f"export KAFKA_OPTS='-Dkafka.runbooks.test.password={CMDLINE_SECRET} "))
        lab.stop(2)
        lab.start(2)
        assert CMDLINE_SECRET in open(f"/proc/{lab.broker_pid(2)}/cmdline").read()  # planted for real
        lab.wait_full_isr(120)

        os.environ.update(lab.airflow_env())
        clusters = lab.cluster_settings()
        clusters["lab"] = {**clusters["lab"], "incident_base": str(tmp_path / "incidents"), "bundle_base": str(tmp_path / "bundles")}
        monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(clusters))
        conf = {"cluster": "lab", "broker_ids": [2], "zookeeper_servers": [], "reason": "secrets test", "incident_id": None}
        with Responder(RESPONSE, "approve", "Reject", user="oncall-alice", timeout_s=600) as responder:
            run = load_dags().get_dag(RESPONSE).test(run_conf=conf)
        logged = capfd.readouterr()
    finally:
        props.write_text(original_props)
        start.write_text(original_start)
        lab.stop(2, check=False)
        lab.start(2)
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert responder.error is None and states["capture"] == "success" and states["report"] == "success", states
    secrets = [v.split('password="')[-1].rstrip('";') if "password=" in v else v for v in SECRETS.values()] + [CMDLINE_SECRET]

    checked = 0
    for path in (tmp_path / "bundles").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not [s for s in secrets if s.encode() in data], path
            checked += 1
    # owner-only: the cluster's, the incident's and the capture's directories (nothing below them is reachable by
    # anyone else, the analysis' outputs included), every directory the capture made and every file it wrote
    captured = next((tmp_path / "bundles").rglob("manifest.json")).parent
    for d in (captured, captured.parent, captured.parent.parent, *[p for p in captured.rglob("*") if p.is_dir()
                                                                    and p.relative_to(captured).parts[0] in ("hosts", "zookeeper")]):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, (d, oct(d.stat().st_mode))
    for f in json.loads((captured / "manifest.json").read_text())["files"] + [{"path": "manifest.json"}]:
        assert stat.S_IMODE((captured / f["path"]).stat().st_mode) == 0o600, f["path"]
    # what the capture kept instead: the keys, with their values redacted, and the harmless values as they are
    props_out = next(captured.rglob("hosts/2/server-properties.out")).read_text()
    assert "ssl.keystore.password=[redacted by kafka-runbooks]" in props_out and "broker.id=2" in props_out
    cmdline = next(captured.rglob("hosts/2/process-stat.out")).read_text()
    assert "-Dkafka.runbooks.test.password=[redacted by kafka-runbooks]" in cmdline and "kafka.Kafka" in cmdline
    for path in (tmp_path / "incidents").rglob("*"):
        if path.is_file():
            assert not [s for s in secrets if s.encode() in path.read_bytes()], path
    assert checked > 20 and list((tmp_path / "bundles").rglob("report.html"))
    assert not [s for s in secrets if s in logged.out or s in logged.err]
    assert "capture plan:" in logged.out + logged.err  # the tasks' logs were indeed captured
