"""The default split size of the JVM scan: about four splits per core (no core idles while another reads the
last split), 1 to 32 MiB, always a multiple or a divisor of the survey's 4 MiB read chunk."""

import sys

from analyze_helpers import REPO

sys.path.insert(0, str(REPO / "spark_apps"))

import analyze_bundle  # noqa: E402

from kafka_runbooks.analyze.survey import CHUNK  # noqa: E402

MiB = 1 << 20


def test_split_gives_every_core_several_splits():
    assert analyze_bundle.auto_split_bytes(100_000_000, 2) == 8 * MiB  # 12 splits of 3 x 33 MB for 2 cores
    assert analyze_bundle.auto_split_bytes(500_000_000, 2) == 32 * MiB
    assert analyze_bundle.auto_split_bytes(1_000_000_000, 2) == 32 * MiB  # capped
    assert analyze_bundle.auto_split_bytes(100_000_000, 16) == MiB
    assert analyze_bundle.auto_split_bytes(0, 2) == MiB  # nothing known: the smallest


def test_split_is_a_multiple_or_divisor_of_the_survey_chunk():
    for size in (0, 1, 10**5, 10**6, 3 * 10**7, 10**8, 7 * 10**8, 10**9, 10**11):
        for cores in (1, 2, 3, 8, 64):
            s = analyze_bundle.auto_split_bytes(size, cores)
            assert MiB <= s <= 32 * MiB and (s % CHUNK == 0 or CHUNK % s == 0), (size, cores, s)
