"""Known Kafka deadlock bugs, their fix versions, and matching against an observed lock cycle.

A version at or after the fix (same release branch, or at/after the newest fix version) is never
blamed on that bug.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable


def parse_version(v: str | None) -> tuple[int, ...] | None:
    """'0.10.1.0' -> (0, 10, 1, 0); '2.8.1' -> (2, 8, 1, 0); '0.10.1.1-SNAPSHOT' -> (0, 10, 1, 1); junk -> None."""
    if not v:
        return None
    m = re.match(r"^\s*v?(\d+(?:\.\d+){0,3})", str(v))
    if not m:
        return None
    parts = tuple(int(x) for x in m.group(1).split("."))
    return parts + (0,) * (4 - len(parts))


def branch(v: tuple[int, ...]) -> tuple[int, ...]:
    """Release line: 0.10.1.x -> (0, 10, 1); 2.8.x -> (2, 8)."""
    return v[:3] if v[0] == 0 else v[:2]


def is_fixed(version: str | None, fixed_in: Iterable[str]) -> bool | None:
    """True if `version` contains the fix, False if not, None if the version is unknown/unparsable."""
    v = parse_version(version)
    if v is None:
        return None
    fixes = [f for f in (parse_version(x) for x in fixed_in) if f]
    if not fixes:
        return False
    if any(branch(f) == branch(v) and v >= f for f in fixes):
        return True
    return v >= max(fixes)


@dataclass(frozen=True)
class Signature:
    """What an observed deadlock looks like (thread names, lock classes, frames), lower-cased for matching."""

    threads: frozenset[str]
    lock_classes: frozenset[str]
    frames: frozenset[str]

    def has_thread(self, prefix: str) -> bool:
        return any(t.startswith(prefix.lower()) for t in self.threads)

    def has_class(self, part: str) -> bool:
        return any(part.lower() in c for c in self.lock_classes)

    def has_frame(self, part: str) -> bool:
        return any(part.lower() in f for f in self.frames)


def make_signature(threads: Iterable[str], lock_classes: Iterable[str], frames: Iterable[str]) -> Signature:
    return Signature(
        frozenset(t.lower() for t in threads),
        frozenset(c.lower() for c in lock_classes),
        frozenset(f.lower() for f in frames),
    )


@dataclass(frozen=True)
class KnownBug:
    id: str
    title: str
    affects: tuple[str, ...]
    fixed_in: tuple[str, ...]
    matches: Callable[[Signature], bool]
    note: str = ""

    @property
    def url(self) -> str:
        return f"https://issues.apache.org/jira/browse/{self.id}"

    def to_dict(self, status: str) -> dict:
        return {"id": self.id, "title": self.title, "affects": list(self.affects), "fixed_in": list(self.fixed_in),
                "url": self.url, "status": status, "note": self.note}


def _group_deadlock(s: Signature) -> bool:
    return s.has_class("GroupMetadata") or s.has_frame("GroupMetadataManager") or s.has_frame("GroupCoordinator")


KNOWN_BUGS: tuple[KnownBug, ...] = (
    KnownBug(
        "KAFKA-3994", "Deadlock between consumer heartbeat expiration and offset commit",
        ("0.10.0.0", "0.10.1.0"), ("0.10.1.1", "0.10.2.0"),
        lambda s: _group_deadlock(s) and (s.has_thread("executor-heartbeat") or s.has_frame("onExpireHeartbeat"))
        and (s.has_thread("kafka-request-handler") or s.has_frame("putCacheCallback")),
    ),
    KnownBug(
        "KAFKA-4399", "Deadlock between cleanupGroupMetadata and offset commit",
        ("0.10.1.0",), ("0.10.1.1", "0.10.2.0"),
        lambda s: _group_deadlock(s) and (s.has_thread("group-metadata-manager") or s.has_frame("cleanupGroupMetadata")),
    ),
    KnownBug(
        "KAFKA-4478", "Deadlock between heartbeat executor, group metadata manager and request handler",
        ("0.10.1.0",), ("0.10.1.1",),
        lambda s: _group_deadlock(s) and s.has_thread("executor-heartbeat") and s.has_thread("group-metadata-manager")
        and s.has_thread("kafka-request-handler"),
        note="resolved as a duplicate of KAFKA-3994 (fixed by 0.10.1.1)",
    ),
    KnownBug(
        "KAFKA-4562", "Deadlock in GroupMetadataManager / request handler (same stacks as KAFKA-4478)",
        ("0.10.1.0",), ("0.10.1.1",),
        lambda s: _group_deadlock(s) and (s.has_frame("cleanupGroupMetadata") or s.has_thread("group-metadata-manager"))
        and (s.has_frame("putCacheCallback") or s.has_thread("kafka-request-handler")),
        note="resolved by the KAFKA-3994 fix",
    ),
    KnownBug(
        "KAFKA-4477", "Node reduces its ISR to itself and does not recover; cluster sick until the node restarts",
        ("0.10.1.0",), ("0.10.1.1",),
        lambda s: _group_deadlock(s) and (s.has_thread("kafka-request-handler") or s.has_frame("KafkaApis")),
        note="symptom report (ISR shrink to self, file handles exhausted) caused by the group-coordinator deadlocks",
    ),
    KnownBug(
        "KAFKA-5970", "Deadlock due to locking of DelayedProduce and group (DelayedProduce vs GroupMetadata)",
        ("0.10.1.1", "0.11.0.0", "0.11.0.1"), ("0.11.0.2", "1.0.0"),
        lambda s: s.has_class("DelayedProduce") and s.has_class("GroupMetadata"),
        note="still present after upgrading to 0.10.1.1 (seen in incident 001's follow-up)",
    ),
)


def match_known_bugs(sig: Signature, version: str | None) -> tuple[list[dict], list[dict]]:
    """(candidates, ruled_out). Candidates: signature matches and the version is affected or unknown."""
    candidates, ruled_out = [], []
    for bug in KNOWN_BUGS:
        if not bug.matches(sig):
            continue
        fixed = is_fixed(version, bug.fixed_in)
        if fixed is True:
            ruled_out.append(bug.to_dict(f"fixed in {version} (fix: {', '.join(bug.fixed_in)})"))
        elif fixed is False:
            candidates.append(bug.to_dict(f"affects {version}"))
        else:
            candidates.append(bug.to_dict("version unknown: possible"))
    return candidates, ruled_out


def remaining_after(target: str) -> list[KnownBug]:
    """Catalogued deadlock bugs still present in `target`."""
    return [b for b in KNOWN_BUGS if is_fixed(target, b.fixed_in) is False]


def upgrade_advice(broker_id: int | None, version: str | None, candidates: list[dict]) -> str:
    who = f"broker {broker_id}" if broker_id is not None else "the broker"
    restart = (f"Restart {who} to clear the deadlock (the evidence is captured); it will not recover by itself. "
               "Restart one broker at a time and keep the other replicas of __consumer_offsets up.")
    if not candidates:
        return restart + " No catalogued Kafka bug matches this cycle" + (
            f" for version {version}" if version else "") + ": report it upstream with the jstack evidence."
    if version is None:
        ids = ", ".join(c["id"] for c in candidates)
        return restart + f" Kafka version unknown: check it; if it is older than the fixes of {ids}, upgrade."
    targets = sorted({f for c in candidates for f in c["fixed_in"]}, key=lambda x: parse_version(x) or ())
    v = parse_version(version)
    # the smallest fix version on the broker's own branch (or later) that fixes every candidate
    viable = [t for t in targets if (parse_version(t) or ()) > (v or ()) and all(is_fixed(t, c["fixed_in"]) for c in candidates)]
    target = viable[0] if viable else targets[-1]
    ids = ", ".join(c["id"] for c in candidates)
    advice = (restart + f" Then rolling-upgrade {version} -> {target} or later (fixes {ids}), one broker at a time, "
              "verifying produce/consume and ISR re-expansion after each broker.")
    left = [b for b in remaining_after(target) if b.id not in {c["id"] for c in candidates}]
    if left:
        advice += " Note: " + "; ".join(f"{b.id} ({b.title}) is still present in {target}, fixed in {', '.join(b.fixed_in)}"
                                       for b in left) + "."
    return advice
