"""A slow offsets loader (incident 002b's drill): one broker thread limited to a share of a CPU with a cgroup.

Seed 002's load took long because the partition held 2,000+ segments of ~100 MB. The lab's disks and CPUs load a
few hundred MB of offsets in well under a second (measured: 150 MB in 0.7 s), and growing a partition to many GB
is not a drill. So the drill grows a real partition (bigoffsets.py) and limits the brokers' offsets loader
threads -- ``group-metadata-manager-N`` (native name ``group-metadata-``), which do nothing but load and expire
offsets -- to ``cpu_percent`` of one CPU through a cgroup v1 ``cpu`` controller (``cpu.cfs_quota_us``): a
stand-in for a partition many times larger. The rest of the broker runs at full speed. Undone by ``release``
(and by ``Lab.reset()``); a restarted broker's new loader thread is not limited.
"""

from __future__ import annotations

import os
from pathlib import Path

from .net import slot
from .procs import LabError

CPU_ROOT = Path("/sys/fs/cgroup/cpu")
LOADER = "group-metadata-"


def _group(b: int) -> Path:
    return CPU_ROOT / f"kafka-lab-s{slot()}-loader-b{int(b)}"


def thread_ids(pid: int, prefix: str) -> list[int]:
    out = []
    for t in Path(f"/proc/{int(pid)}/task").iterdir():
        try:
            if (t / "comm").read_text().strip().startswith(prefix):
                out.append(int(t.name))
        except OSError:
            continue
    return sorted(out)


def limit(b: int, pid: int, cpu_percent: float, prefix: str = LOADER) -> list[int]:
    """Put the threads of ``pid`` named ``prefix*`` in a cgroup limited to ``cpu_percent`` of one CPU."""
    if not (CPU_ROOT / "tasks").exists():
        raise LabError(f"no cgroup v1 cpu controller at {CPU_ROOT}: cannot slow a thread down")
    tids = thread_ids(pid, prefix)
    if not tids:
        raise LabError(f"broker {b} (pid {pid}) has no thread named {prefix}*")
    g = _group(b)
    g.mkdir(exist_ok=True)
    period = int((g / "cpu.cfs_period_us").read_text())
    (g / "cpu.cfs_quota_us").write_text(str(max(1000, int(period * cpu_percent / 100))))
    for tid in tids:
        (g / "tasks").write_text(str(tid))
    return tids


def release(b: int | None = None) -> list[str]:
    """Every thread of this slot's loader cgroups (or broker b's) back to the root group; the groups removed."""
    done = []
    groups = [_group(b)] if b is not None else sorted(CPU_ROOT.glob(f"kafka-lab-s{slot()}-loader-b*"))
    for g in groups:
        if not g.exists():
            continue
        for tid in (g / "tasks").read_text().split():
            try:
                (CPU_ROOT / "tasks").write_text(tid)
            except OSError:
                pass  # the thread is gone
        os.rmdir(g)
        done.append(g.name)
    return done
