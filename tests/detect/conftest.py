"""Fixtures: a real ZooKeeper node (session-wide) and a fresh chrooted kazoo client per test."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


def _zkserver():
    name = "kafka_runbooks_tests_zkserver"  # one module object for every conftest that loads it
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("zkserver.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


zkserver = _zkserver()


@pytest.fixture(scope="session")
def zookeeper():
    server = zkserver.acquire()
    try:
        yield server
    finally:
        zkserver.release()


@pytest.fixture
def zk(zookeeper):
    """A started KazooClient chrooted at a fresh, empty path (like "127.0.0.1:21890/t-abc")."""
    chroot = zkserver.fresh_chroot(zookeeper)
    client = zookeeper.client(chroot)
    client.chroot_path = chroot  # for tests that open a second client on the same chroot
    try:
        yield client
    finally:
        client.stop()
        client.close()
