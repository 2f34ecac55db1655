"""``ZooKeeperHook``: kazoo clients for a cluster's ZooKeeper ensemble, from an Airflow connection.

The connection (conn_type ``generic``): host ``"zk1:2181,zk2:2181,zk3:2181"``, extra
``{"chroot": "/kafka"}``. The clients themselves (and the four-letter-word client) are in
``kafka_runbooks.zookeeper``, which needs no Airflow.
"""

from __future__ import annotations

import contextlib

from airflow.sdk import BaseHook

from kafka_runbooks.zookeeper import four_letter, kazoo_client, parse_hosts, validate_chroot, zk_session
from kafka_runbooks.hooks.quiet import quiet_connection_noise

quiet_connection_noise()  # connection chatter at DEBUG (hooks/quiet.py)

__all__ = ["ZooKeeperHook", "ZooKeeperUnreachable", "four_letter", "kazoo_client", "zk_session"]


class ZooKeeperUnreachable(ConnectionError):
    """A session to the ensemble could not be started (a wrong address, the ensemble down): the message names the
    ensemble, the connection and, when known, the cluster -- not kazoo's bare "Connection time-out". An ``OSError``, so
    the health check still reads it as "ZooKeeper unreachable" (detect/observe.py)."""


class ZooKeeperHook(BaseHook):
    """A cluster's ZooKeeper ensemble, from an Airflow connection."""

    conn_name_attr = "zk_conn_id"
    default_conn_name = "zookeeper_default"
    conn_type = "kafka_runbooks_zookeeper"  # provider.py registers it (a connection of type generic works too)
    hook_name = "ZooKeeper (kafka-runbooks)"

    def __init__(self, zk_conn_id: str = default_conn_name, *, timeout_s: float = 10.0, tries: int = 3,
                 cluster: str | None = None) -> None:
        super().__init__()
        self.zk_conn_id = zk_conn_id
        self.cluster = cluster
        self.timeout_s = timeout_s
        self.tries = tries
        conn = self.get_connection(zk_conn_id)
        hosts = (conn.host or "").strip()
        if conn.port and "," not in hosts and ":" not in hosts:
            hosts = f"{hosts}:{conn.port}"
        self.hosts = hosts
        self.chroot = validate_chroot((conn.extra_dejson or {}).get("chroot"))
        self.servers = parse_hosts(hosts)

    def get_conn(self):
        """An unstarted, chrooted KazooClient (use :meth:`session` to have it started and closed)."""
        return kazoo_client(self.hosts, self.chroot, timeout_s=self.timeout_s, tries=self.tries)

    def describe(self) -> str:
        """Which ensemble: ``ZooKeeper h1:2181,h2:2181/kafka, connection 'x'[, cluster 'c']`` (as the health check says it)."""
        servers = ",".join(f"{h}:{p}" for h, p in self.servers)
        return f"ZooKeeper {servers}{self.chroot or ''}, connection {self.zk_conn_id!r}" + (
            f", cluster {self.cluster!r}" if self.cluster else "")

    @contextlib.contextmanager
    def session(self):
        """A started session, stopped and closed after; one that cannot start raises :class:`ZooKeeperUnreachable`
        naming the ensemble (kazoo's own error is its cause, and named in the message)."""
        from kazoo.exceptions import KazooException
        from kazoo.handlers.threading import KazooTimeoutError

        client = self.get_conn()
        try:
            client.start()
        except (KazooTimeoutError, KazooException, OSError) as exc:
            with contextlib.suppress(Exception):
                client.stop()
                client.close()
            raise ZooKeeperUnreachable(f"{type(exc).__name__}: {exc or 'no answer'} ({self.describe()}): no session could be "
                                       "started; is the connection's address right, and is the ensemble up?") from exc
        try:
            yield client
        finally:
            client.stop()
            client.close()

    def four_letter(self, word: str, timeout_s: float = 2.0) -> dict[str, str | OSError]:
        """``{"host:port": answer or the OSError}`` for every server of the ensemble."""
        out: dict[str, str | OSError] = {}
        for host, port in self.servers:
            try:
                out[f"{host}:{port}"] = four_letter(host, port, word, timeout_s)
            except OSError as exc:
                out[f"{host}:{port}"] = exc
        return out
