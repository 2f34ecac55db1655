"""Reading Kafka's JmxTool (issue 16 §3): from its real output, recorded on the lab (tests/detect/fixtures/README.md).
A figure JmxTool did not print is unknown, never zero and never a pass."""

from __future__ import annotations

from pathlib import Path

from kafka_runbooks.host.jmxtool import (FAILED_PRODUCE, REQUEST_QUEUE, fetcher_lag, jmxtool_argv, log_end_offset,
                                          metrics_from, metrics_summary, parse_jmxtool_output, replica_names)

FIXTURES = Path(__file__).with_name("fixtures")


def test_kafka_230_csv_report_starts_with_its_time_line():
    raw = (FIXTURES / "jmxtool_2.3.0_csv.txt").read_bytes()
    assert raw.startswith(b'time,"')  # what the old reader took for a header ("JmxTool printed a header but no values")
    r = parse_jmxtool_output(raw)
    assert r.problems == () and r.form == "csv"
    assert r.time_ms == int(raw.split(b'"')[1])
    assert r.values[f"{REQUEST_QUEUE}:Value"] == 0.0
    assert "time" not in r.values and len(r.values) == raw.count(b"\n") - 1
    m = metrics_from(1, "2026-11-24T20:47:15Z", r)
    assert m.ok and metrics_summary(m)["request_queue"] == 0.0 and metrics_summary(m)["request_rate"] is not None


def test_kafka_230_original_format_header_then_rows():
    raw = (FIXTURES / "jmxtool_2.3.0_original.txt").read_text()
    assert raw.startswith('"time",')
    r = parse_jmxtool_output(raw)
    assert r.form == "original" and r.problems == ()
    assert r.values == {f"{REQUEST_QUEUE}:Value": 0.0, f"{FAILED_PRODUCE}:Count": 0.0, f"{FAILED_PRODUCE}:OneMinuteRate": 0.0}
    # with a reporting interval (0.10's only mode: no --one-time), rows follow rows: the newest complete one counts
    more = raw + raw.splitlines()[1].replace(",0,0,0.0", ",7,0,0.5") + "\n" + "1795553384999,8\n"
    assert parse_jmxtool_output(more).values[f"{REQUEST_QUEUE}:Value"] == 7.0


def test_missing_figures_are_unknown_not_zero():
    only_time = 'time,"1795553235973"\n'
    r = parse_jmxtool_output(only_time)
    assert r.values == {} and "no JmxTool values" in r.problems[0]
    assert not metrics_from(1, None, r).ok
    without_queue = 'time,"1"\nkafka.server:type=BrokerTopicMetrics,name=BytesInPerSec:OneMinuteRate,"3.5"\n'
    m = metrics_from(2, None, parse_jmxtool_output(without_queue))
    assert not m.ok and "without kafka.network:type=RequestChannel,name=RequestQueueSize:Value: unknown" in m.error
    assert metrics_summary(m)["request_queue"] is None
    assert parse_jmxtool_output("").problems == ("JmxTool printed nothing",)
    garbage = parse_jmxtool_output("Exception in thread main java.io.IOException: Failed to retrieve RMIServer stub\n")
    assert garbage.values == {} and "no JmxTool values" in garbage.problems[0]
    assert not metrics_from(3, None, parse_jmxtool_output(""), error="JmxTool exit 1: Could not connect").ok
    assert parse_jmxtool_output('"time","a:Value"\n').problems == ("JmxTool printed its header but no row of values",)
    nan = parse_jmxtool_output(f'time,"1"\n{REQUEST_QUEUE}:Value,"NaN"\n')
    assert f"{REQUEST_QUEUE}:Value" not in nan.values


def test_per_replica_names_are_spelled_out_no_patterns():
    assert log_end_offset("orders", 2) == "kafka.log:type=Log,name=LogEndOffset,topic=orders,partition=2"
    assert fetcher_lag(0, 2, "__consumer_offsets", 0) == (
        "kafka.server:type=FetcherLagMetrics,name=ConsumerLag,clientId=ReplicaFetcherThread-0-2,topic=__consumer_offsets,partition=0")
    assert replica_names("orders", 1, 3, 2) == (log_end_offset("orders", 1), fetcher_lag(0, 3, "orders", 1), fetcher_lag(1, 3, "orders", 1))
    from kafka_runbooks import versions

    url = "service:jmx:rmi:///jndi/rmi://h:9999/jmxrmi"
    argv = jmxtool_argv("/opt/kafka", url, extra_names=replica_names("orders", 1, 3, 1), version=versions.assumed("2.3.0"))
    names = [argv[i + 1] for i, a in enumerate(argv) if a == "--object-name"]
    assert names and not any("*" in a or "?" in a for a in names)  # JmxTool 2.3 + --attributes + a pattern = NullPointerException
    assert argv[argv.index("--report-format") + 1] == "csv" and log_end_offset("orders", 1) in argv
    # before 2.0 (or a version not observed): no --one-time, no --attributes; stopped after its first row
    for old in (versions.assumed("0.10.2.1"), None):
        argv = jmxtool_argv("/opt/kafka", url, extra_names=replica_names("orders", 1, 3, 1), version=old)
        assert argv[:2] == ("bash", "-c") and "--one-time" not in argv and "--attributes" not in argv
        assert log_end_offset("orders", 1) in argv
    import pytest

    with pytest.raises(ValueError):
        log_end_offset("orders,name=x", 1)


def test_the_tools_heap_setting_takes_sizes_only():
    """``leadership.jmx_heap`` reaches a JVM command line on the broker's host: sizes only, never an agent or a
    system property; a refused value is no read, saying why."""
    import pytest

    from kafka_runbooks.config import ClusterConfig, LeadershipSettings
    from kafka_runbooks.host.jmxtool import heap_options, jmx_read
    from kafka_runbooks.model import Broker

    assert heap_options("-Xms16m -Xmx64m") == ("-Xms16m", "-Xmx64m")
    for bad in ("", "-javaagent:/tmp/x.jar", "-Xmx64m -Dcom.sun.management.jmxremote.port=1", "-Xmx64m; reboot"):
        with pytest.raises(ValueError, match="only -Xmx/-Xms/-Xss"):
            heap_options(bad)
    cfg = ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "ssh_b1"}, kafka_home="/opt/kafka",
                        leadership=LeadershipSettings(jmx_heap="-javaagent:/tmp/x.jar"))
    read = jmx_read(cfg, Broker(1, "kafka1", 9092, jmx_port=9999))
    assert read.argv is None and "leadership.jmx_heap '-javaagent:/tmp/x.jar'" in read.unavailable
    from kafka_runbooks.config import ConfigError

    with pytest.raises(ConfigError, match=r"leadership.jmx_heap '-Xmx64m -javaagent:/x.jar': only -Xmx/-Xms/-Xss"):
        LeadershipSettings.from_dict({"jmx_heap": "-Xmx64m -javaagent:/x.jar"})
