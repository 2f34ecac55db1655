"""Where a broker is: the ports of its registered listeners and its addresses, host names resolved.

Probes and capture filter sockets with the :class:`~kafka_runbooks.host.sockets.Endpoint` built
here: the configured listener's port first (``config.listener``), then the broker's other
registered listeners, on every address its registered host names resolve to, plus the address of
its SSH host. Names are resolved where the sockets are matched (this worker); a name that does not
resolve is reported, never compared with an address.
"""

from __future__ import annotations

import functools
import socket
from typing import Callable, Iterable

from kafka_runbooks.host.sockets import Endpoint, is_ip, norm_addr
from kafka_runbooks.model import Broker

Resolver = Callable[[str], tuple[str, ...]]


@functools.lru_cache(maxsize=256)
def resolve(host: str) -> tuple[str, ...]:
    """Every address ``host`` resolves to here (an IP literal is its own); () when it does not."""
    if not host:
        return ()
    if is_ip(host):
        return (norm_addr(host),)
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return ()
    return tuple(dict.fromkeys(norm_addr(str(i[4][0])) for i in infos))


def broker_ports(broker: Broker, listener: str | None, fallback_port: int) -> tuple[int, ...]:
    """The configured listener's port first, then every other registered listener's, then the
    registration's own port; ``fallback_port`` when nothing is registered."""
    found = broker.listeners()
    ports: list[int] = []
    if listener and listener in found:
        ports.append(found[listener][1])
    ports += [port for _, port in found.values()]
    if broker.port and broker.port > 0:
        ports.append(broker.port)
    return tuple(dict.fromkeys(ports)) or (int(fallback_port),)


def broker_hosts(broker: Broker) -> tuple[str, ...]:
    return tuple(dict.fromkeys(h for h in [broker.host, *(h for h, _ in broker.listeners().values())] if h))


def broker_endpoint(
    broker: Broker,
    listener: str | None,
    fallback_port: int,
    extra_hosts: Iterable[str] = (),
    resolver: Resolver = resolve,
) -> tuple[Endpoint, list[str]]:
    """(Endpoint, problems): the problems name host names that resolved to nothing."""
    problems = []
    addresses: list[str] = []
    for host in [*broker_hosts(broker), *extra_hosts]:
        found = resolver(host)
        if not found:
            problems.append(f"host name {host!r} does not resolve here")
        addresses += found
    return Endpoint.of(addresses, broker_ports(broker, listener, fallback_port)), problems
