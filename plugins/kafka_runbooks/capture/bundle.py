"""The evidence bundle: a directory of captured files plus manifest.json (docs/CONTRACTS.md)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Any, Mapping

from kafka_runbooks.host.argv import validate_broker_id
from kafka_runbooks import clock
from kafka_runbooks.hooks.ssh import CommandResult

SCHEMA = "kafka-runbooks/evidence-bundle/v1"
MANIFEST = "manifest.json"
SNAPSHOT = "snapshot.json"

_COMPONENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+@-]{0,199}$")
_FILE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class BundleError(ValueError):
    pass


DIR_MODE = 0o700  # a bundle holds hosts' logs and configs: its owner only
FILE_MODE = 0o600


def private_dir(path: Path, stop_at: Path | None = None) -> None:
    """Make ``path`` (and its missing parents below ``stop_at``) owner-only directories."""
    missing = []
    p = path
    while not p.exists() and p != stop_at and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        d.mkdir(mode=DIR_MODE, exist_ok=True)
        os.chmod(d, DIR_MODE)
    if path.exists():
        os.chmod(path, DIR_MODE)


def validate_component(value: object, what: str) -> str:
    """One path component (cluster name, incident id): no separators, no traversal, no NUL."""
    if not isinstance(value, str) or not _COMPONENT_RE.fullmatch(value) or value in (".", ".."):
        raise BundleError(f"invalid {what} {value!r}: use letters, digits and ._:+@- (no '/', no leading '.')")
    return value


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> tuple[str, int]:
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as fh:
        while True:
            b = fh.read(chunk)
            if not b:
                break
            h.update(b)
            n += len(b)
    return h.hexdigest(), n


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n").encode())


class EvidenceBundle:
    """``<bundle_base>/<cluster>/<incident_id>/``. Thread-safe: hosts are captured in parallel.

    Refuses to reuse a directory that already holds a manifest (evidence is never overwritten).
    """

    def __init__(
        self,
        bundle_base: str | os.PathLike,
        cluster: str,
        incident_id: str,
        trigger: Mapping | None = None,
        *,
        capture_id: str | None = None,
    ):
        """``capture_id`` gives each capture of one incident its own ``<incident_id>/<capture_id>/``."""
        self.cluster = validate_component(cluster, "cluster name")
        self.incident_id = validate_component(incident_id, "incident id")
        self.capture_id = validate_component(capture_id, "capture id") if capture_id is not None else None
        base = Path(bundle_base).resolve()
        self.path = base / self.cluster / self.incident_id
        if self.capture_id is not None:
            self.path = self.path / self.capture_id
        levels = 3 if self.capture_id is not None else 2
        if self.path.resolve().parents[levels - 1] != base:
            raise BundleError(f"bundle path escapes {base}: {self.path}")
        if (self.path / MANIFEST).exists():
            raise BundleError(f"evidence bundle already exists: {self.path}")
        base.mkdir(parents=True, exist_ok=True)
        private_dir(self.path, stop_at=base)
        self._lock = threading.RLock()
        self.manifest: dict[str, Any] = {
            "schema": SCHEMA,
            "incident_id": self.incident_id,
            "capture_id": self.capture_id,
            "cluster": self.cluster,
            "created_at": clock.now_iso(),
            "finished_at": None,
            "trigger": dict(trigger) if trigger is not None else None,
            "hosts": {},
            "commands": [],
            "files": [],
        }

    # -- paths --------------------------------------------------------------------------------

    def host_dir(self, broker_id: int) -> Path:
        d = self.path / "hosts" / str(validate_broker_id(broker_id))
        if not d.is_dir():
            private_dir(d, stop_at=self.path)
        return d

    def file_path(self, broker_id: int, filename: str) -> Path:
        if not _FILE_NAME_RE.fullmatch(filename):
            raise BundleError(f"invalid bundle file name {filename!r}")
        return self.host_dir(broker_id) / filename

    def zk_file_path(self, server: str, filename: str) -> Path:
        """``zookeeper/<server id>/<file>``: a ZooKeeper member's evidence."""
        if not _FILE_NAME_RE.fullmatch(filename):
            raise BundleError(f"invalid bundle file name {filename!r}")
        d = self.path / "zookeeper" / validate_component(str(server), "ZooKeeper server id")
        if not d.is_dir():
            private_dir(d, stop_at=self.path)
        return d / filename

    def set_zookeeper(self, server: str, **fields: Any) -> None:
        """The manifest's ``zookeeper.<server id>`` entry (address, zone, role, status, ...)."""
        key = validate_component(str(server), "ZooKeeper server id")
        with self._lock:
            self.manifest.setdefault("zookeeper", {}).setdefault(key, {}).update(fields)

    def record_zk_command(self, server: str, host: str, name: str, kind: str, result: CommandResult, **extra: Any) -> dict:
        """As :meth:`record_command`, for a ZooKeeper member: files under ``zookeeper/<server>/`` with ``server`` set."""
        out = self.zk_file_path(server, f"{name}.out")
        if result.stdout_path is None:
            out.write_bytes(result.stdout)
        self.add_file(out, kind=kind, host=host, command=name, stream="stdout", server=str(server), **extra)
        err_rel = None
        if result.stderr:
            err = self.zk_file_path(server, f"{name}.err")
            err.write_bytes(result.stderr)
            self.add_file(err, kind=kind, host=host, command=name, stream="stderr", server=str(server))
            err_rel = self.rel(err)
        entry = {"broker_id": None, "server": str(server), "host": host, "name": name, "kind": kind, "argv": list(result.argv),
                 "command": result.command, "started_at": result.started_at, "duration_s": result.duration_s,
                 "exit_code": result.exit_code, "error": result.error, "stdout": self.rel(out), "stderr": err_rel, **extra}
        with self._lock:
            self.manifest["commands"].append(entry)
        return entry

    def rel(self, path: str | os.PathLike) -> str:
        p = Path(path).resolve()
        try:
            return p.relative_to(self.path.resolve()).as_posix()
        except ValueError:
            raise BundleError(f"{p} is outside the bundle {self.path}") from None

    # -- recording ----------------------------------------------------------------------------

    def set_host(self, broker_id: int, **fields: Any) -> None:
        key = str(validate_broker_id(broker_id))
        with self._lock:
            entry = self.manifest["hosts"].setdefault(
                key, {"ssh_conn_id": None, "address": None, "reachable": False, "error": None, "pid": None}
            )
            entry.update(fields)

    def add_file(
        self,
        path: str | os.PathLike,
        *,
        kind: str,
        broker_id: int | None = None,
        host: str | None = None,
        command: str | None = None,
        stream: str | None = None,
        **extra: Any,
    ) -> dict:
        rel = self.rel(path)
        os.chmod(self.path / rel, FILE_MODE)
        digest, size = sha256_file(self.path / rel)
        entry = {
            "path": rel,
            "broker_id": broker_id,
            "host": host,
            "kind": kind,
            "command": command,
            "stream": stream,
            "bytes": size,
            "sha256": digest,
            **extra,
        }
        with self._lock:
            self.manifest["files"] = [f for f in self.manifest["files"] if f["path"] != rel] + [entry]
        return entry

    def record_command(self, broker_id: int, host: str, name: str, kind: str, result: CommandResult) -> dict:
        """Write stdout (unless already streamed to its file) and stderr (only when non-empty),
        register both files and the command."""
        broker_id = validate_broker_id(broker_id)
        out = self.file_path(broker_id, f"{name}.out")
        if result.stdout_path is None:
            out.write_bytes(result.stdout)
        elif Path(result.stdout_path).resolve() != out.resolve():
            raise BundleError(f"{name}: stdout was streamed to {result.stdout_path}, expected {out}")
        self.add_file(out, kind=kind, broker_id=broker_id, host=host, command=name, stream="stdout")
        err_rel = None
        if result.stderr:
            err = self.file_path(broker_id, f"{name}.err")
            err.write_bytes(result.stderr)
            self.add_file(err, kind=kind, broker_id=broker_id, host=host, command=name, stream="stderr")
            err_rel = self.rel(err)
        entry = {
            "broker_id": broker_id,
            "host": host,
            "name": name,
            "kind": kind,
            "argv": list(result.argv),
            "command": result.command,
            "started_at": result.started_at,
            "duration_s": result.duration_s,
            "exit_code": result.exit_code,
            "error": result.error,
            "stdout": self.rel(out),
            "stderr": err_rel,
        }
        with self._lock:
            self.manifest["commands"].append(entry)
        return entry

    def write_snapshot(self, snapshot: Any) -> None:
        data = snapshot.to_dict() if hasattr(snapshot, "to_dict") else dict(snapshot)
        p = self.path / SNAPSHOT
        atomic_write_json(p, data)
        self.add_file(p, kind="cluster_snapshot")

    def write_manifest(self, *, finished: bool = True) -> dict:
        with self._lock:
            if finished:
                self.manifest["finished_at"] = clock.now_iso()
            self.manifest["commands"].sort(key=lambda c: (c.get("broker_id") is None, c.get("broker_id") or 0,
                                                          str(c.get("server") or ""), c["started_at"]))
            self.manifest["files"].sort(key=lambda f: f["path"])
            atomic_write_json(self.path / MANIFEST, self.manifest)
            return json.loads(json.dumps(self.manifest, default=str))


def load_manifest(bundle_dir: str | os.PathLike) -> dict:
    with open(Path(bundle_dir) / MANIFEST, encoding="utf-8") as fh:
        return json.load(fh)


def verify(bundle_dir: str | os.PathLike) -> list[dict]:
    """Recompute sizes and sha256 of every file the manifest lists. Returns the mismatches
    (empty list = intact): ``{"path", "problem": "missing"|"size"|"sha256"|"unsafe path", ...}``."""
    root = Path(bundle_dir).resolve()
    manifest = load_manifest(root)
    problems: list[dict] = []
    if manifest.get("schema") != SCHEMA:
        problems.append({"path": MANIFEST, "problem": "schema", "found": manifest.get("schema")})
    for f in manifest.get("files", []):
        rel = f.get("path", "")
        p = (root / rel).resolve()
        if not str(p).startswith(str(root) + os.sep):
            problems.append({"path": rel, "problem": "unsafe path"})
            continue
        if not p.is_file():
            problems.append({"path": rel, "problem": "missing"})
            continue
        digest, size = sha256_file(p)
        if size != f.get("bytes"):
            problems.append({"path": rel, "problem": "size", "expected": f.get("bytes"), "found": size})
        if digest != f.get("sha256"):
            problems.append({"path": rel, "problem": "sha256", "expected": f.get("sha256"), "found": digest})
    return problems
