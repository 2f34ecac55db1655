"""Values that go into a remote argv, checked before any command is built: integers, pids, ports, absolute paths
without ``..``, the work directory, argv itself (a sequence of strings, no NUL). Pure. What ``detect/`` and
``capture/`` run on a broker's host, and what ``hooks/ssh.py`` runs, passes through here."""

from __future__ import annotations

import re
from typing import Sequence

# a directory that goes inside jmap's "-dump:live,format=b,file=PATH" option: no commas, no spaces
_SAFE_DIR_RE = re.compile(r"^/[A-Za-z0-9_./-]*$")


class UnsafeValueError(ValueError):
    """A value meant for a remote argv failed validation (hostile or malformed)."""


def validate_int(value: object, what: str, *, minimum: int = 0, maximum: int = 2**31 - 1) -> int:
    """An integer (int, or a string of decimal digits only) within bounds; anything else is refused."""
    if isinstance(value, bool):
        raise UnsafeValueError(f"{what} must be an integer, got {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and re.fullmatch(r"[0-9]{1,10}", value):
        n = int(value)
    else:
        raise UnsafeValueError(f"{what} must be an integer, got {value!r}")
    if not minimum <= n <= maximum:
        raise UnsafeValueError(f"{what} out of range [{minimum}, {maximum}]: {n}")
    return n


def validate_pid(pid: object) -> int:
    return validate_int(pid, "pid", minimum=1, maximum=2**22)


def validate_broker_id(broker_id: object) -> int:
    return validate_int(broker_id, "broker id", minimum=0)


def validate_port(port: object) -> int:
    return validate_int(port, "port", minimum=1, maximum=65535)


def validate_abs_path(path: object, what: str = "path") -> str:
    if not isinstance(path, str) or not path:
        raise UnsafeValueError(f"{what} must be a non-empty string, got {path!r}")
    if "\x00" in path or "\n" in path or "\r" in path:
        raise UnsafeValueError(f"{what} contains NUL or newline: {path!r}")
    if not path.startswith("/"):
        raise UnsafeValueError(f"{what} must be absolute: {path!r}")
    if any(part == ".." for part in path.split("/")):
        raise UnsafeValueError(f"{what} must not contain '..': {path!r}")
    return path


def validate_work_dir(path: object) -> str:
    path = validate_abs_path(path, "remote_work_dir")
    if not _SAFE_DIR_RE.fullmatch(path):
        raise UnsafeValueError(f"remote_work_dir may only contain [A-Za-z0-9_./-]: {path!r}")
    return path.rstrip("/") or "/"


def validate_argv(argv: Sequence[str]) -> tuple[str, ...]:
    if isinstance(argv, (str, bytes)) or not argv:
        raise UnsafeValueError(f"argv must be a non-empty sequence of strings, got {argv!r}")
    out = []
    for a in argv:
        if not isinstance(a, str):
            raise UnsafeValueError(f"argv element must be str, got {a!r}")
        if "\x00" in a:
            raise UnsafeValueError(f"argv element contains NUL: {a!r}")
        out.append(a)
    return tuple(out)
