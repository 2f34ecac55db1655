"""wait_started after log4j's hourly roll of server.log (drill 003 on 0.10.2.1, 2026-11-25: broker 3 started at 08:58,
server.log rolled at 09:00, the flap at 09:04 waited 90 s for a 'started' line that was in server.log.2026-11-25-08)."""

from __future__ import annotations

from kafka_lab.leadership import STARTED, since_last_start

FIRST = "[2026-11-25 08:58:01,000] INFO Registered kafka:type=kafka.Log4jController MBean (kafka.utils.Log4jControllerRegistration$)\n"
OLD_FIRST = FIRST.replace("08:58:01", "08:50:01")


def test_the_current_jvms_start_is_found_in_the_rolled_file(tmp_path):
    rolled = tmp_path / "server.log.2026-11-25-08"
    rolled.write_text(OLD_FIRST + "[2026-11-25 08:50:05,000] INFO [Kafka Server 3], started (kafka.server.KafkaServer)\n"
                      + FIRST + "[2026-11-25 08:58:04,505] INFO [Kafka Server 3], started (kafka.server.KafkaServer)\n")
    log = tmp_path / "server.log"
    log.write_text("[2026-11-25 09:00:04,211] INFO [Group Metadata Manager on Broker 3]: Removed 0 expired offsets in 1 milliseconds.\n")
    text = since_last_start(log)
    assert text.startswith(FIRST[FIRST.index("INFO"):]) and "08:58:04,505" in text and "08:50:05" not in text and STARTED.search(text)


def test_a_jvm_that_has_not_logged_started_yet_is_not_started(tmp_path):
    (tmp_path / "server.log.2026-11-25-08").write_text(OLD_FIRST + "[2026-11-25 08:50:05,000] INFO [Kafka Server 3], started (kafka.server.KafkaServer)\n")
    log = tmp_path / "server.log"
    log.write_text(FIRST)  # the new JVM's first line, after the roll
    assert not STARTED.search(since_last_start(log))


def test_a_new_jvm_is_not_seen_started_by_its_predecessors_rolled_lines(tmp_path):
    import os

    rolled = tmp_path / "server.log.2026-11-25-08"
    rolled.write_text(OLD_FIRST + "[2026-11-25 08:50:05,000] INFO [Kafka Server 3], started (kafka.server.KafkaServer)\n")
    os.utime(rolled, (1000, 1000))
    log = tmp_path / "server.log"
    log.write_text("[2026-11-25 09:00:04,211] INFO [Group Metadata Manager on Broker 3]: Removed 0 expired offsets in 1 milliseconds.\n")
    assert STARTED.search(since_last_start(log))  # without the JVM's start: the predecessor's line
    assert not STARTED.search(since_last_start(log, jvm_started=2000))  # the new JVM (started later) has not logged yet
