"""Pure tests: the one socket-table parser and endpoint filter (capture/sockets.py)."""

from __future__ import annotations

from kafka_runbooks.host import sockets as S

SS_LISTEN = """\
LISTEN 0      50     [::ffff:127.0.0.11]:9092            *:*    users:(("java",pid=1111,fd=120))
LISTEN 0      50     [::ffff:127.0.0.11]:9093            *:*    users:(("java",pid=1111,fd=121))
LISTEN 0      50     [::ffff:127.0.0.12]:9092            *:*
LISTEN 0      50     [::ffff:127.0.0.13]:9092            *:*
LISTEN 0      128          127.0.0.11:2222        0.0.0.0:*
LISTEN 0      50                    *:9999              *:*    users:(("java",pid=2222,fd=7),("java",pid=2222,fd=8))
LISTEN 0      50              0.0.0.0:9094        0.0.0.0:*    users:(("java",pid=3333,fd=7))
"""


def ep(addrs, *ports):
    return S.Endpoint.of(addrs, ports)


def test_pid_from_ss_listener_on_the_brokers_own_address():
    ls = S.parse_listeners(SS_LISTEN)
    assert S.find_broker_pid(ls, ep(["127.0.0.11"], 9093, 9092)) == 1111
    # peer brokers on the same port belong to other users: no pid visible -> not ours
    assert S.find_broker_pid(ls, ep(["127.0.0.12"], 9092)) is None
    assert S.find_broker_pid(ls, ep(["127.0.0.12"], 9999)) == 2222  # wildcard '*'
    assert S.find_broker_pid(ls, ep(["10.0.0.5"], 9094)) == 3333  # wildcard 0.0.0.0
    assert S.find_broker_pid(ls, ep(["127.0.0.11"], 9095)) is None
    assert S.listening(ls, ep(["127.0.0.11"], 9093), 1111)
    assert not S.listening(ls, ep(["127.0.0.11"], 9093), 4444)


def test_a_host_name_is_never_compared_with_an_address():
    # names must be resolved first (detect/endpoints.py); an unresolved name matches nothing but wildcards
    ls = S.parse_listeners(SS_LISTEN)
    assert S.Endpoint.of(["broker1.example", "127.0.0.11"], [9092]).addresses == frozenset({"127.0.0.11"})
    assert S.find_broker_pid(ls, ep(["broker1.example"], 9092)) is None


def test_pid_parser_tolerates_header_and_ipv6_wildcard():
    text = "State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process\n" \
           "LISTEN 0 50 [::]:9092 [::]:* users:((\"java\",pid=42,fd=1))\n"
    assert S.find_broker_pid(S.parse_listeners(text), ep(["127.0.0.1"], 9092)) == 42


def test_pid_from_netstat():
    text = """Active Internet connections (only servers)
Proto Recv-Q Send-Q Local Address           Foreign Address         State       PID/Program name
tcp        0      0 127.0.0.11:2222         0.0.0.0:*               LISTEN      100/sshd
tcp6       0      0 127.0.0.11:9092         :::*                    LISTEN      555/java
tcp6       0      0 :::9093                 :::*                    LISTEN      -
"""
    ls = S.parse_listeners(text)
    assert S.find_broker_pid(ls, ep(["127.0.0.11"], 9092)) == 555
    assert S.find_broker_pid(ls, ep(["127.0.0.11"], 9093)) is None


SS_CONNS = """State      Recv-Q Send-Q        Local Address:Port         Peer Address:Port Process
LISTEN     0      50     [::ffff:127.0.0.11]:9092                     *:*
ESTAB      0      0      [::ffff:127.0.0.11]:9092  [::ffff:127.0.0.1]:51000
CLOSE-WAIT 1      0      [::ffff:127.0.0.11]:9092  [::ffff:127.0.0.1]:51001
CLOSE-WAIT 7      0      [::ffff:127.0.0.11]:9093  [::ffff:127.0.0.1]:51002
ESTAB      0      0      [::ffff:127.0.0.12]:9092  [::ffff:127.0.0.1]:51003
ESTAB      0      0             127.0.0.1:51000  127.0.0.11:9092
TIME-WAIT  0      0      [::ffff:127.0.0.11]:9092  [::ffff:127.0.0.1]:51004
"""


def test_connection_states_count_only_the_brokers_own_local_ends():
    assert S.connection_states(SS_CONNS, ep(["127.0.0.11"], 9092)) == {"CLOSE_WAIT": 1, "ESTABLISHED": 1, "TIME_WAIT": 1}
    # both listeners of a multi-listener registration
    assert S.connection_states(SS_CONNS, ep(["127.0.0.11"], 9092, 9093)) == {"CLOSE_WAIT": 2, "ESTABLISHED": 1, "TIME_WAIT": 1}
    assert S.connection_states(SS_CONNS, ep(["127.0.0.12"], 9092)) == {"ESTABLISHED": 1}
    ns = """Proto Recv-Q Send-Q Local Address           Foreign Address         State       PID/Program name
tcp6     120      0 127.0.0.11:9092         127.0.0.1:40000         CLOSE_WAIT  555/java
tcp6       0      0 127.0.0.11:9092         127.0.0.1:40001         ESTABLISHED 555/java
tcp        0      0 127.0.0.1:40001         127.0.0.11:9092         ESTABLISHED -
"""
    assert S.connection_states(ns, ep(["127.0.0.11"], 9092), netstat=True) == {"CLOSE_WAIT": 1, "ESTABLISHED": 1}
    summary = S.summarize(S.parse_connections(ns, netstat=True), ep(["127.0.0.11"], 9092))
    assert (summary.recv_q_bytes, summary.recv_q_sockets, summary.close_wait) == (120, 1, 1)


def test_ss_info_lines_give_byte_counters_and_queues():
    # as printed by `ss -Htani` on this machine (info line indented with a tab)
    text = (
        "LISTEN    0      50      [::ffff:127.104.1.1]:9093                      *:*    \n"
        "\t bbr cwnd:10\n"
        "ESTAB     0      0      [::ffff:127.104.1.1]:9093  [::ffff:127.0.0.1]:57746 \n"
        "\t bbr wscale:1,1 rto:204 rtt:0.012/0.002 mss:32742 bytes_sent:8043 bytes_acked:8044 bytes_received:2754 segs_out:240\n"
        "CLOSE-WAIT 310   0      [::ffff:127.104.1.1]:9093  [::ffff:127.0.0.1]:57750 \n"
        "\t cubic bytes_acked:1 bytes_received:310\n"
        "ESTAB     0      0         [::ffff:127.0.0.1]:57746  [::ffff:127.104.1.1]:9093 \n"
        "\t bbr bytes_acked:2755 bytes_received:8043\n"
    )
    s = S.summarize(S.parse_connections(text), ep(["127.104.1.1"], 9093))
    assert s.states == {"CLOSE_WAIT": 1, "ESTABLISHED": 1}
    assert (s.recv_q_bytes, s.recv_q_sockets) == (310, 1)
    assert (s.bytes_received, s.bytes_acked) == (2754 + 310, 8044 + 1)
    # without -i there are no counters (None, not 0)
    plain = S.summarize(S.parse_connections(SS_CONNS), ep(["127.0.0.11"], 9092))
    assert plain.bytes_received is None and plain.bytes_acked is None


def test_the_probe_and_the_analysis_read_a_recorded_table_alike():
    """One row reader (host/sockets.read_row) under both: the connections the host probe reads from a real table are
    the analysis's rows of the same table (recorded from the 2.3.0 lab's ss and netstat)."""
    from tests.analyze.analyze_helpers import fixture_bytes

    from kafka_runbooks.analyze.parsers.sockets import parse_sockets

    for name, netstat in (("real23/ss-tanp.txt", False), ("real23/netstat-anp.txt", True)):
        text = fixture_bytes(name).decode()
        probe = {(c.state, c.local_addr, c.local_port, c.peer_addr, c.peer_port) for c in S.parse_connections(text, netstat=netstat)}
        table = {(r.state, r.local_host, r.local_port, r.peer_host, r.peer_port) for r in parse_sockets(text).rows
                 if r.proto.startswith("tcp") and r.local_port is not None}
        assert probe and probe == table, name
        listeners = {(l.address, l.port) for l in S.parse_listeners(text)}
        assert listeners == {(h, p) for s, h, p, _, _ in table if s == "LISTEN"}, name
