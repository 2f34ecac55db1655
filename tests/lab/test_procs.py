"""The lab's process helpers that need no lab running."""

from __future__ import annotations

import os
import subprocess

from kafka_lab.procs import forget_stale_attach_sockets


def a_dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_stale_attach_sockets_of_lab_users_go_and_live_ones_stay(tmp_path):
    me, lab_user, stranger = os.getuid(), 4242, 4343

    def socket(pid, uid):
        f = tmp_path / f".java_pid{pid}"
        f.touch()
        os.chown(f, uid, uid)
        return f

    dead_jvms = socket(a_dead_pid(), me)
    reused_pid = socket(1, lab_user)  # pid 1 is alive and is root's, not the file owner's
    live_jvm = socket(os.getpid(), me)
    older_than_its_jvm = socket(os.getppid(), me)  # the same user's pid, reused after the socket was made
    os.utime(older_than_its_jvm, (1, 1))
    strangers = socket(a_dead_pid(), stranger)
    not_a_socket = socket("x1", me)

    removed = forget_stale_attach_sockets({me, lab_user}, tmp_path)

    assert sorted(removed) == sorted([dead_jvms, reused_pid, older_than_its_jvm])
    assert live_jvm.exists() and not_a_socket.exists()
    assert strangers.exists()  # not a lab user's file: never touched
