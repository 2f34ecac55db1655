"""Evidence bundle: layout, manifest schema, checksums, verify, tamper detection, traversal refusal."""

from __future__ import annotations

import json
import os

import pytest

from kafka_runbooks import model
from kafka_runbooks.capture.bundle import SCHEMA, BundleError, EvidenceBundle, load_manifest, verify
from kafka_runbooks.hooks.ssh import CommandResult


def _result(argv, out=b"", err=b"", code=0, error=None):
    import shlex
    return CommandResult(tuple(argv), shlex.join(argv), out, err, code, "2024-05-01T07:00:00.000+00:00", 0.25, error)


def _bundle(tmp_path, incident="inc-001"):
    trig = model.Finding(kind="broker_unresponsive", severity=model.Severity.CRITICAL, summary="broker 3 silent", broker_ids=(3,))
    return EvidenceBundle(tmp_path, "prod", incident, trigger=trig.to_dict())


def test_manifest_layout_and_checksums(tmp_path):
    b = _bundle(tmp_path)
    snap = model.ClusterSnapshot("prod", "2024-05-01T07:00:00Z", (model.Broker(3, "10.0.0.3", 9092),), 3, ())
    b.write_snapshot(snap)
    b.set_host(3, ssh_conn_id="ssh_b3", address="10.0.0.3:22", reachable=True, pid=42)
    b.record_command(3, "10.0.0.3:22", "jstack-1", "jstack", _result(["jstack", "-l", "42"], b"\"main\" #1\n", b"warn\n"))
    b.record_command(3, "10.0.0.3:22", "disk-free", "disk_free", _result(["df", "-Pk", "/tmp"], b"x\n"))
    m = b.write_manifest()

    root = tmp_path / "prod" / "inc-001"
    assert b.path == root
    on_disk = load_manifest(root)
    assert on_disk == m
    assert m["schema"] == SCHEMA == "kafka-runbooks/evidence-bundle/v1"
    assert m["incident_id"] == "inc-001" and m["cluster"] == "prod"
    assert m["created_at"] and m["finished_at"]
    assert m["trigger"]["kind"] == "broker_unresponsive"
    assert m["hosts"]["3"] == {"ssh_conn_id": "ssh_b3", "address": "10.0.0.3:22", "reachable": True, "error": None, "pid": 42}
    c = {c["name"]: c for c in m["commands"]}
    assert c["jstack-1"]["stdout"] == "hosts/3/jstack-1.out" and c["jstack-1"]["stderr"] == "hosts/3/jstack-1.err"
    assert c["disk-free"]["stderr"] is None
    assert c["jstack-1"]["argv"] == ["jstack", "-l", "42"] and c["jstack-1"]["command"] == "jstack -l 42"
    assert set(c["jstack-1"]) == {"broker_id", "host", "name", "kind", "argv", "command", "started_at", "duration_s",
                                  "exit_code", "error", "stdout", "stderr"}
    files = {f["path"]: f for f in m["files"]}
    assert set(files) == {"snapshot.json", "hosts/3/jstack-1.out", "hosts/3/jstack-1.err", "hosts/3/disk-free.out"}
    assert files["snapshot.json"]["kind"] == "cluster_snapshot"
    assert files["hosts/3/jstack-1.err"]["stream"] == "stderr"
    assert files["hosts/3/jstack-1.out"]["bytes"] == len(b"\"main\" #1\n")
    assert set(files["hosts/3/jstack-1.out"]) == {"path", "broker_id", "host", "kind", "command", "stream", "bytes", "sha256"}
    assert (root / "hosts/3/disk-free.out").read_bytes() == b"x\n"
    assert not (root / "hosts/3/disk-free.err").exists()
    assert json.loads((root / "snapshot.json").read_text())["brokers"][0]["id"] == 3
    assert verify(root) == []
    assert not [p for p in os.listdir(root) if p.endswith(".tmp")]


def test_tamper_detection(tmp_path):
    b = _bundle(tmp_path)
    b.record_command(1, "h", "jstack-1", "jstack", _result(["jstack", "-l", "1"], b"abc\n"))
    b.record_command(1, "h", "server-log", "server_log", _result(["tail"], b"log\n"))
    b.record_command(1, "h", "ps", "process_stat", _result(["ps"], b"1 2 3 java\n"))
    b.write_manifest()
    root = b.path
    (root / "hosts/1/jstack-1.out").write_bytes(b"abd\n")  # same size, other content
    (root / "hosts/1/server-log.out").write_bytes(b"log plus\n")
    os.unlink(root / "hosts/1/ps.out")
    problems = {(p["path"], p["problem"]) for p in verify(root)}
    assert ("hosts/1/jstack-1.out", "sha256") in problems
    assert ("hosts/1/server-log.out", "size") in problems
    assert ("hosts/1/ps.out", "missing") in problems


def test_verify_refuses_manifest_paths_outside_bundle(tmp_path):
    b = _bundle(tmp_path)
    b.write_manifest()
    m = load_manifest(b.path)
    m["files"].append({"path": "../../../etc/passwd", "bytes": 1, "sha256": "0" * 64})
    (b.path / "manifest.json").write_text(json.dumps(m))
    assert {"path": "../../../etc/passwd", "problem": "unsafe path"} in verify(b.path)


@pytest.mark.parametrize("bad", ["../x", "..", ".", "a/b", "/etc", "", ".hidden", "x\n", "x\x00", "a b", None, "inc;rm"])
def test_incident_id_traversal_refused(tmp_path, bad):
    with pytest.raises(BundleError):
        EvidenceBundle(tmp_path, "prod", bad)
    with pytest.raises(BundleError):
        EvidenceBundle(tmp_path, bad, "inc-1")
    assert not (tmp_path / "etc").exists()


def test_airflow_run_id_style_incident_ok(tmp_path):
    b = EvidenceBundle(tmp_path, "prod", "manual__2024-05-01T07:00:00+00:00")
    assert b.path.parent == tmp_path / "prod"


def test_existing_bundle_not_overwritten(tmp_path):
    _bundle(tmp_path).write_manifest()
    with pytest.raises(BundleError, match="already exists"):
        _bundle(tmp_path)


def test_bad_broker_id_and_file_names_refused(tmp_path):
    b = _bundle(tmp_path)
    with pytest.raises(ValueError):
        b.host_dir("../1")
    with pytest.raises(BundleError):
        b.file_path(1, "../../x.out")
