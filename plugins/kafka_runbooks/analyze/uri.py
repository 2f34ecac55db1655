"""Bundle locations as URIs: ``file:///shared/bundles/...`` (default; a plain path means file://),
``s3a://bucket/prefix/...`` or ``hdfs://namenode/path``. Executors read evidence through these, so the
bundle must live where every executor can reach it (a shared mount, S3, HDFS), never only on the Airflow
worker's disk.

Python-side reads (the per-file survey, small evidence files) go through ``pyarrow.fs`` for s3a/hdfs
(s3a:// is read as s3://) and plain ``open`` for local paths; Spark reads the big logs itself.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from typing import BinaryIO
from urllib.parse import urlparse


def is_local(uri: str) -> bool:
    return "://" not in uri or uri.startswith("file:")


def local_path(uri: str) -> str:
    if "://" not in uri:
        return os.path.abspath(uri)
    p = urlparse(uri)
    return p.path


def to_uri(path_or_uri: str) -> str:
    """A plain path -> file:///abs/path; URIs unchanged (trailing slashes dropped)."""
    if "://" in path_or_uri:
        return path_or_uri.rstrip("/")
    return "file://" + os.path.abspath(path_or_uri)


def join(base: str, rel: str) -> str:
    if "://" not in base:
        return os.path.join(base, rel)
    return base.rstrip("/") + "/" + rel.lstrip("/")


def safe_relative(rel: str) -> bool:
    """A bundle-relative path that cannot escape the bundle."""
    if not rel or rel.startswith("/") or "\\" in rel or ":" in rel.split("/", 1)[0]:
        return False
    parts = rel.split("/")
    return ".." not in parts and posixpath.normpath(rel) == rel.rstrip("/")


def _arrow_fs(uri: str):
    import pyarrow.fs as pafs  # imported lazily: only remote bundles need it

    u = uri.replace("s3a://", "s3://", 1).replace("s3n://", "s3://", 1)
    return pafs.FileSystem.from_uri(u)


def open_binary(uri: str) -> BinaryIO:
    """A file of evidence, for reading. Locally only a regular file: a FIFO or a device in a bundle would block the
    reader, or never end (opened without waiting for a writer, then refused)."""
    if is_local(uri):
        import stat

        if not stat.S_ISREG(os.stat(local_path(uri)).st_mode):  # opening some devices acts by itself
            raise OSError(f"not a regular file: {local_path(uri)}")
        fd = os.open(local_path(uri), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since
                raise OSError(f"not a regular file: {local_path(uri)}")
            if hasattr(os, "set_blocking"):
                os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
    fs, path = _arrow_fs(uri)
    return fs.open_input_stream(path)


def read_bytes(uri: str, limit: int | None = None) -> bytes:
    with open_binary(uri) as fh:
        return fh.read() if limit is None else fh.read(limit)


def read_text(uri: str) -> str:
    return read_bytes(uri).decode("utf-8", errors="replace")


def exists(uri: str) -> bool:
    if is_local(uri):
        return os.path.exists(local_path(uri))
    fs, path = _arrow_fs(uri)
    import pyarrow.fs as pafs

    return fs.get_file_info(path).type != pafs.FileType.NotFound


def list_manifests(base: str) -> list[str]:
    """Every manifest.json under a base location (any depth), as URIs, sorted."""
    if is_local(base):
        root = local_path(base)
        out = []
        for d, _dirs, files in os.walk(root):
            if "manifest.json" in files:
                out.append(to_uri(os.path.join(d, "manifest.json")))
        return sorted(out)
    import pyarrow.fs as pafs

    fs, path = _arrow_fs(base)
    sel = pafs.FileSelector(path, recursive=True, allow_not_found=True)
    scheme = base.split("://", 1)[0]
    return sorted(f"{scheme}://{i.path}" for i in fs.get_file_info(sel) if i.path.endswith("/manifest.json"))


OWNER_ONLY_UMASK = 0o077  # a bundle and what is made of it (findings.json, report.html, parquet/) are its owner's only
FILE_MODE, DIR_MODE = 0o600, 0o700


@contextlib.contextmanager
def owner_only():
    """Within it this process (the Spark driver) creates files 0600 and directories 0700; its umask is restored after."""
    old = os.umask(OWNER_ONLY_UMASK)
    try:
        yield
    finally:
        os.umask(old)


def private_file(path: str) -> None:
    """Creates ``path`` empty and 0600 (or makes an existing one 0600), so that a writer opening it next (pyarrow)
    truncates a file already its owner's only, whatever the writing process's umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def restrict_tree(uri: str) -> None:
    """A local tree written partly by processes with another umask (a JVM executor started by someone else, its Python
    workers): directories 0700, files 0600. Remote stores keep their own permissions (a bucket policy, HDFS ACLs)."""
    if not is_local(uri) or not os.path.isdir(local_path(uri)):
        return
    root = local_path(uri)
    os.chmod(root, DIR_MODE)
    for d, dirs, files in os.walk(root):
        for n in dirs:
            os.chmod(os.path.join(d, n), DIR_MODE, follow_symlinks=False)
        for n in files:
            if not os.path.islink(os.path.join(d, n)):
                os.chmod(os.path.join(d, n), FILE_MODE)


def write_text(uri: str, text: str) -> None:
    """Write a small file atomically where the location allows it (local: temp file + rename), 0600 (its owner's only)."""
    if is_local(uri):
        p = local_path(uri)
        os.makedirs(os.path.dirname(p), mode=DIR_MODE, exist_ok=True)
        tmp = p + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        os.fchmod(fd, FILE_MODE)  # an older temp file keeps its mode through O_CREAT
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, p)
        return
    fs, path = _arrow_fs(uri)
    with fs.open_output_stream(path) as fh:
        fh.write(text.encode("utf-8"))
