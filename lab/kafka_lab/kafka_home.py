"""Where the lab's Apache Kafka comes from: one implementation, used by the lab and by scripts/bootstrap.sh.

The lab runs one version (``DISTRIBUTIONS``): Apache Kafka 2.3.0. (Kafka 0.10.2.1, the seed incidents' era, ran
here until its distribution was withdrawn; what was recorded from it stays as test fixtures: docs/VERSIONS.md.)
Order: ``KAFKA_HOME`` (it must be a 2.3.0 distribution: no silent fallback when the user named one), else
``<repo>/../shared/kafka/kafka_2.12-2.3.0``, else a copy already downloaded into ``<repo>/var/kafka/``, else the
release downloaded from the Apache archive into ``<repo>/var/kafka/`` and checked against its published SHA-512
(``kafka_2.12-2.3.0.tgz.sha512``, written by ``gpg --print-md SHA512``).

Standard library only, so that bootstrap can run it before anything is installed:

    python3 lab/kafka_lab/kafka_home.py [--repo DIR] [--no-download]   # prints the Kafka directory
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import sys
import tarfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Mapping

KAFKA_VERSION = "2.3.0"  # the lab's default version
SCALA_VERSION = "2.12"
DIST_NAME = f"kafka_{SCALA_VERSION}-{KAFKA_VERSION}"
TARBALL = f"{DIST_NAME}.tgz"
ARCHIVE_URL = f"https://archive.apache.org/dist/kafka/{KAFKA_VERSION}/"
DOWNLOAD_TIMEOUT_S = 30.0
REPO = Path(__file__).resolve().parents[2]


class Distribution:
    """One Kafka version the lab can run: its Scala build, directory name, core jar and environment variable."""

    def __init__(self, version: str, scala: str, downloadable: bool) -> None:
        self.version, self.scala, self.downloadable = version, scala, downloadable
        self.name = f"kafka_{scala}-{version}"
        self.core_jar = f"libs/kafka_{scala}-{version}.jar"
        self.env = "KAFKA_HOME" if version == KAFKA_VERSION else "KAFKA_HOME_" + version.replace(".", "_")

    def __repr__(self) -> str:
        return f"Distribution({self.version!r})"


DISTRIBUTIONS = {d.version: d for d in (Distribution(KAFKA_VERSION, SCALA_VERSION, True),)}


def distribution(version: str | None = None) -> Distribution:
    v = version or KAFKA_VERSION
    if v not in DISTRIBUTIONS:
        raise KafkaHomeError(f"the lab runs Kafka {' or '.join(sorted(DISTRIBUTIONS))}, not {v!r}")
    return DISTRIBUTIONS[v]


class KafkaHomeError(RuntimeError):
    """No usable Kafka distribution; the message says what was tried and what to set."""


def is_kafka_home(path: Path, version: str | None = None) -> bool:
    return (path / "bin" / "kafka-server-start.sh").is_file() and (path / distribution(version).core_jar).is_file()


def shared_home(repo: Path, version: str | None = None) -> Path:
    return repo.parent / "shared" / "kafka" / distribution(version).name


def download_dir(repo: Path) -> Path:
    return repo / "var" / "kafka"


def parse_sha512_file(text: str, filename: str = TARBALL) -> str:
    """The lower-case hex SHA-512 of ``filename`` from a ``.sha512`` file.

    Apache publishes ``gpg --print-md SHA512`` output: ``NAME: 8-digit upper-case hex groups`` wrapped over
    indented lines. ``sha512sum`` layout (``HEX  NAME``) is accepted too.
    """
    compact = " ".join(text.split())
    m = re.match(r"^(\S+?):\s*((?:[0-9A-Fa-f]+\s*)+)$", compact)
    if m:
        name, digest = m.group(1), re.sub(r"\s+", "", m.group(2))
    else:
        m = re.match(r"^([0-9A-Fa-f]{128})\s+\*?(\S+)$", compact)
        if not m:
            raise KafkaHomeError(f"unrecognised SHA-512 file layout for {filename}: {text[:200]!r}")
        digest, name = m.group(1), m.group(2)
    if os.path.basename(name) != filename:
        raise KafkaHomeError(f"the SHA-512 file is for {name!r}, not {filename!r}")
    if len(digest) != 128:
        raise KafkaHomeError(f"the SHA-512 file for {filename} holds {len(digest)} hex digits, expected 128")
    return digest.lower()


def sha512_of(path: Path) -> str:
    h = hashlib.sha512()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_sha512(path: Path, expected_hex: str) -> None:
    actual = sha512_of(path)
    if actual != expected_hex.lower():
        raise KafkaHomeError(f"SHA-512 mismatch for {path}: expected {expected_hex.lower()}, got {actual}; the file was removed")


def _fetch(url: str, dest: Path, timeout: float) -> None:
    tmp = dest.with_name(dest.name + ".part")
    with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as out:
        shutil.copyfileobj(resp, out, 1 << 20)
    tmp.replace(dest)


def download(repo: Path, base_url: str = ARCHIVE_URL, timeout: float = DOWNLOAD_TIMEOUT_S) -> Path:
    """Downloads and checks the release into ``<repo>/var/kafka/``; returns the extracted distribution."""
    target = download_dir(repo)
    target.mkdir(parents=True, exist_ok=True)
    base = base_url if base_url.endswith("/") else base_url + "/"
    tgz, sums = target / TARBALL, target / (TARBALL + ".sha512")
    _fetch(base + TARBALL + ".sha512", sums, timeout)
    expected = parse_sha512_file(sums.read_text(errors="replace"))
    _fetch(base + TARBALL, tgz, timeout)
    try:
        verify_sha512(tgz, expected)
    except KafkaHomeError:
        tgz.unlink(missing_ok=True)
        raise
    with tarfile.open(tgz) as tar:
        tar.extractall(target, filter="data")
    home = target / DIST_NAME
    if not is_kafka_home(home):
        raise KafkaHomeError(f"{tgz} (SHA-512 ok) did not contain {DIST_NAME}/bin/kafka-server-start.sh")
    return home


def resolve(repo: Path = REPO, env: Mapping[str, str] | None = None, allow_download: bool = True,
            base_url: str = ARCHIVE_URL, timeout: float = DOWNLOAD_TIMEOUT_S, version: str | None = None) -> Path:
    env = os.environ if env is None else env
    dist = distribution(version)
    named = env.get(dist.env, "").strip()
    if named:
        home = Path(named).expanduser().resolve()
        if not is_kafka_home(home, dist.version):
            raise KafkaHomeError(f"{dist.env}={named} is not an Apache Kafka {dist.version} (Scala {dist.scala}) distribution: "
                                 f"expected bin/kafka-server-start.sh and {dist.core_jar} in it")
        return home
    tried = [f"{dist.env} (not set)"]
    for candidate in (shared_home(repo, dist.version), download_dir(repo) / dist.name):
        if is_kafka_home(candidate, dist.version):
            return candidate.resolve()
        tried.append(f"{candidate} (absent)")
    if not allow_download or not dist.downloadable:
        raise KafkaHomeError(f"Apache Kafka {dist.version} not found; tried: {'; '.join(tried)}. "
                             f"Set {dist.env} to an unpacked {dist.name} directory.")
    url = (base_url if base_url.endswith("/") else base_url + "/") + TARBALL
    try:
        return download(repo, base_url, timeout)
    except (OSError, urllib.error.URLError, tarfile.TarError) as exc:
        tried.append(f"download of {url} (+ .sha512) into {download_dir(repo)} failed: {exc}")
    except KafkaHomeError as exc:
        tried.append(f"download of {url} was rejected: {exc}")
    raise KafkaHomeError(
        f"Apache Kafka {KAFKA_VERSION} not found and not downloadable; tried: {'; '.join(tried)}. "
        f"The Apache archive may be unreachable from this machine: download {TARBALL} and its .sha512 elsewhere, "
        f"unpack it, and set KAFKA_HOME to the {DIST_NAME} directory (or place it at {shared_home(repo)}).")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", type=Path, default=REPO)
    ap.add_argument("--no-download", action="store_true")
    a = ap.parse_args(argv)
    try:
        print(resolve(a.repo.resolve(), allow_download=not a.no_download, version=KAFKA_VERSION))
    except KafkaHomeError as exc:
        print(f"kafka_home: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
