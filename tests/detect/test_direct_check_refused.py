"""The direct check of a broker nobody listens for (a killed broker): a refused TCP connection is said at once, as a
no-answer failure (``host.commands.NO_ANSWER_CODES``), instead of librdkafka retrying it for the whole timeout -- the
kill took ~5 s of every health check and of the serving watch's run (issue 30, "detection as deployed"). Real
sockets on loopback: a port nothing listens on, and a listener that accepts and never answers (a hung broker)."""

from __future__ import annotations

import socket
import threading

from kafka_runbooks.hooks.kafka import KafkaHook, connection_refused
from kafka_runbooks.host.commands import NO_ANSWER_CODES
from kafka_runbooks.model import Broker


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # bound once, now nothing listens: a connection is refused
    return port


def test_a_port_nobody_listens_on_is_a_no_answer_failure_at_once():
    port = _closed_port()
    assert connection_refused("127.0.0.1", port, 1.0).startswith("ConnectionRefusedError")
    check = KafkaHook(kafka_version="2.3.0").check_broker(Broker(3, "127.0.0.1", port, schema_version=4), 5.0)
    assert not check.ok and check.error_code == "ConnectionRefusedError" and check.error_code in NO_ANSWER_CODES
    assert check.method == "TCP connect" and "nothing listens" in check.error


def test_a_listener_that_never_answers_is_left_to_the_real_check():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()
    held = []

    def accept():  # a hung broker: its acceptor takes connections, nothing reads them
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        assert connection_refused("127.0.0.1", server.getsockname()[1], 1.0) is None
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        server.close()
