"""Where the lab's Kafka comes from: KAFKA_HOME, ../shared/kafka, a downloaded copy, or the Apache archive
(verified against its published SHA-512). A local HTTP server stands in for the archive, which is unreachable here."""

from __future__ import annotations

import hashlib
import http.server
import io
import tarfile
import threading
from pathlib import Path

import pytest

from kafka_lab import kafka_home as kh
from kafka_lab.net import service_ip

# `gpg --print-md SHA512 /tmp/x.tgz` for a file holding b"hi\n" (recorded on this machine), the layout Apache publishes
GPG_LAYOUT = """/tmp/x.tgz: D78ABB05 42736865 F9470452 1609C230 DAC03A2F 369D043A C212D693
            3B91410E 06399E37 F9C5CC88 436A3173 7330C1C8 ECCB2C2F 9F374D62
            F716432A 32D50FAC
"""
HI_SHA512 = hashlib.sha512(b"hi\n").hexdigest()


def fake_kafka(root: Path) -> Path:
    home = root / kh.DIST_NAME
    (home / "bin").mkdir(parents=True)
    (home / "libs").mkdir()
    (home / "bin" / "kafka-server-start.sh").write_text("#!/bin/sh\n")
    (home / "libs" / f"kafka_{kh.SCALA_VERSION}-{kh.KAFKA_VERSION}.jar").write_bytes(b"PK")
    return home


def tarball_of(home: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(home, arcname=kh.DIST_NAME)
    return buf.getvalue()


def gpg_print_md(name: str, digest_hex: str) -> str:
    groups = [digest_hex[i:i + 8].upper() for i in range(0, 128, 8)]
    lines = [" ".join(groups[i:i + 7]) for i in range(0, 16, 7)]
    pad = " " * (len(name) + 2)
    return f"{name}: {lines[0]}\n" + "".join(f"{pad}{ln}\n" for ln in lines[1:])


def test_parse_gpg_print_md_layout():
    assert kh.parse_sha512_file(GPG_LAYOUT, "x.tgz") == HI_SHA512
    assert kh.parse_sha512_file(gpg_print_md(kh.TARBALL, HI_SHA512)) == HI_SHA512


def test_parse_sha512sum_layout():
    assert kh.parse_sha512_file(f"{HI_SHA512.upper()}  {kh.TARBALL}\n") == HI_SHA512


@pytest.mark.parametrize("text, why", [
    (GPG_LAYOUT, "not 'kafka_2.12-2.3.0.tgz'"),
    (f"{kh.TARBALL}: D78ABB05 42736865\n", "16 hex digits, expected 128"),
    ("<html>404 Not Found</html>", "unrecognised SHA-512 file layout"),
])
def test_parse_rejects(text, why):
    with pytest.raises(kh.KafkaHomeError, match=why):
        kh.parse_sha512_file(text)


def test_kafka_home_env_wins_and_must_be_kafka(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    fake_kafka(tmp_path / "shared" / "kafka")
    mine = fake_kafka(tmp_path / "mine")
    assert kh.resolve(repo, {"KAFKA_HOME": str(mine)}, allow_download=False) == mine.resolve()
    with pytest.raises(kh.KafkaHomeError, match="KAFKA_HOME=.* is not an Apache Kafka 2.3.0"):
        kh.resolve(repo, {"KAFKA_HOME": str(tmp_path)}, allow_download=False)


def test_order_shared_then_downloaded_copy(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    downloaded = fake_kafka(repo / "var" / "kafka")
    assert kh.resolve(repo, {}, allow_download=False) == downloaded.resolve()
    shared = fake_kafka(tmp_path / "shared" / "kafka")
    assert kh.resolve(repo, {}, allow_download=False) == shared.resolve()


def test_nothing_found_says_what_was_tried(tmp_path):
    with pytest.raises(kh.KafkaHomeError) as e:
        kh.resolve(tmp_path, {}, allow_download=False)
    msg = str(e.value)
    assert "KAFKA_HOME (not set)" in msg and str(kh.shared_home(tmp_path)) in msg and "Set KAFKA_HOME" in msg


@pytest.fixture
def archive(tmp_path):
    """A local HTTP server standing in for https://archive.apache.org/dist/kafka/2.3.0/."""
    files: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = files.get(self.path.rsplit("/", 1)[-1])
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body if body is not None else b"not found")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((service_ip("kafka_archive"), 0), Handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield files, f"http://{service_ip('kafka_archive')}:{server.server_address[1]}/dist/kafka/2.3.0/"
    finally:
        server.shutdown()
        server.server_close()


def test_download_verifies_published_sha512(tmp_path, archive):
    files, url = archive
    tgz = tarball_of(fake_kafka(tmp_path / "build"))
    files[kh.TARBALL] = tgz
    files[kh.TARBALL + ".sha512"] = gpg_print_md(kh.TARBALL, hashlib.sha512(tgz).hexdigest()).encode()
    repo = tmp_path / "repo"
    repo.mkdir()
    home = kh.resolve(repo, {}, base_url=url)
    assert home == repo / "var" / "kafka" / kh.DIST_NAME and kh.is_kafka_home(home)
    assert (repo / "var" / "kafka" / kh.TARBALL).read_bytes() == tgz


def test_download_with_wrong_checksum_is_refused_and_removed(tmp_path, archive):
    files, url = archive
    tgz = tarball_of(fake_kafka(tmp_path / "build"))
    files[kh.TARBALL] = tgz
    files[kh.TARBALL + ".sha512"] = gpg_print_md(kh.TARBALL, hashlib.sha512(b"another file").hexdigest()).encode()
    repo = tmp_path / "repo"
    repo.mkdir()
    with pytest.raises(kh.KafkaHomeError, match="SHA-512 mismatch") as e:
        kh.resolve(repo, {}, base_url=url)
    assert f"download of {url}{kh.TARBALL} was rejected" in str(e.value)
    assert not (repo / "var" / "kafka" / kh.TARBALL).exists()
    assert not (repo / "var" / "kafka" / kh.DIST_NAME).exists()


def test_unreachable_archive_error_says_what_was_tried_and_what_to_set(tmp_path, archive):
    files, url = archive  # serves nothing: 404 for both files
    repo = tmp_path / "repo"
    repo.mkdir()
    with pytest.raises(kh.KafkaHomeError) as e:
        kh.resolve(repo, {}, base_url=url)
    msg = str(e.value)
    assert f"{url}{kh.TARBALL}" in msg and "failed" in msg and "404" in msg
    assert "set KAFKA_HOME" in msg and "unreachable" in msg


def test_the_lab_runs_kafka_2_3_0_only():
    """Kafka 0.10.2.1 was withdrawn (issue 27): asking for it, or any other version, is a clear error naming 2.3.0."""
    assert sorted(kh.DISTRIBUTIONS) == ["2.3.0"]
    for gone in ("0.10.2.1", "0.9.0.1"):
        with pytest.raises(kh.KafkaHomeError, match=f"the lab runs Kafka 2.3.0, not '{gone}'"):
            kh.distribution(gone)
