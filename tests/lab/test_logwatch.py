"""LogCursor follows a log across log4j's hourly roll (Kafka's DailyRollingFileAppender, '.'yyyy-MM-dd-HH): a 0.10 lab
test once waited 90 s for a line that was there, because server.log had rolled at 05:00 under its cursor."""

from __future__ import annotations

import os

from kafka_lab.logwatch import LogCursor


def test_a_cursor_reads_what_was_written_since_it_across_a_roll(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("before\n")
    cur = LogCursor(log)
    with open(log, "a") as fh:
        fh.write("after 1\n")
    assert cur.new() == "after 1\n"
    os.rename(log, tmp_path / "server.log.2026-11-25-04")  # the roll
    with open(tmp_path / "server.log.2026-11-25-04", "a") as fh:  # log4j may still finish a write to the old file
        fh.write("after 2\n")
    assert cur.new() == "after 1\nafter 2\n"
    log.write_text("after the roll\n")
    assert cur.new() == "after 1\nafter 2\nafter the roll\n"
    assert cur.wait_for(r"^after the roll$", 1).group(0) == "after the roll"


def test_a_cursor_on_a_file_not_yet_written_reads_it_from_its_start(tmp_path):
    cur = LogCursor(tmp_path / "log-cleaner.log")
    assert cur.new() == ""
    (tmp_path / "log-cleaner.log").write_text("first\n")
    assert cur.new() == "first\n"
