"""Redaction of JVM command lines (capture/redact.py): a secret value is redacted whole, also when it held a space.

``ps -o args`` prints a process's arguments joined by single spaces, their quotes gone: ``-Dvault.token="abc dEf123"``
in KAFKA_OPTS reaches the bundle as ``-Dvault.token=abc dEf123``, and a JAAS configuration passed with
``--override sasl.jaas.config=...`` as ``... PlainLoginModule required username="admin" password="admin-secret";``.
Pure: no process is started; the lines are built the way ``ps`` prints them (procps joins argv with spaces)."""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_runbooks.capture.redact import REDACTED, redact_command_line, redact_properties

PS_PREFIX = "  81068 123456 1901924 "
JAVA_HEAD = ("java -Xmx1G -Xms1G -server -XX:+UseG1GC -Djava.awt.headless=true -Dcom.sun.management.jmxremote.port=9999 "
             "-Dkafka.logs.dir=/opt/kafka/logs")
JAVA_TAIL = "-cp /opt/kafka/libs/* kafka.Kafka /opt/kafka/config/server.properties"
CI = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def ps_line(*argv: str) -> str:
    return PS_PREFIX + " ".join(argv)


def test_a_system_property_with_a_space_is_redacted_whole():
    line = ps_line(JAVA_HEAD, "-Dcom.example.vault.token=abc dEf123", JAVA_TAIL)
    out = redact_command_line(line)
    assert "dEf123" not in out and "abc" not in out, out
    assert f"-Dcom.example.vault.token={REDACTED}" in out
    # what follows the value is kept: the next option, the class path, the main class, its arguments
    assert out.endswith(JAVA_TAIL) and out.startswith(PS_PREFIX + JAVA_HEAD), out


def test_a_jaas_configuration_override_is_redacted_up_to_its_semicolon_and_past_it():
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";'
    line = ps_line(JAVA_HEAD, JAVA_TAIL, "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}",
                   "--override", "broker.id=2")
    out = redact_command_line(line)
    assert "admin-secret" not in out and 'username="admin"' not in out and "PlainLoginModule" not in out, out
    assert out.endswith(f"--override listener.name.sasl_plaintext.plain.sasl.jaas.config={REDACTED} --override broker.id=2"), out


def test_a_quoted_value_is_redacted_to_its_closing_quote_even_past_an_option_like_word():
    line = ps_line(JAVA_HEAD, '-Dapp.db.password="s3cret -Dnot.an.option=x tail"', JAVA_TAIL)
    out = redact_command_line(line)
    assert "s3cret" not in out and "not.an.option" not in out and "tail" not in out, out
    assert out.endswith(JAVA_TAIL)


def test_allow_listed_values_and_the_rest_are_kept():
    line = ps_line(JAVA_HEAD, JAVA_TAIL, "--override", "broker.id=3", "--override", "log.dirs=/data/kafka")
    assert redact_command_line(line) == line


def test_a_jaas_configuration_in_server_properties_is_redacted_whole():
    text = ('broker.id=1\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n'
            '    username="admin" password="admin-secret";\nlisteners=SASL_PLAINTEXT://h:9092')
    out = redact_properties(text)
    assert "admin-secret" not in out and 'username="admin"' not in out, out
    assert out.split("\n")[0] == "broker.id=1" and out.split("\n")[3] == "listeners=SASL_PLAINTEXT://h:9092"


# a word of a secret: anything printable without a space, not a word that starts the next JVM argument
# (a value cannot be told from an option that follows it: ps dropped the quotes; such a word ends it early)
_WORD = st.text(alphabet=string.ascii_letters + string.digits + "!#$%&()*+,./:;<=>?@[]^_{|}~'", min_size=1, max_size=12)
_SECRET_KEY = st.sampled_from(["com.example.vault.token", "app.db.password", "ssl.truststore.password", "my.client.secret",
                               "javax.net.ssl.keyStorePassword", "some.plugin.setting"])


@settings(max_examples=400, **CI)
@given(key=_SECRET_KEY, words=st.lists(_WORD, min_size=1, max_size=6), override=st.booleans(), quoted=st.booleans())
def test_no_word_of_a_redacted_value_reaches_the_bundle(key, words, override, quoted):
    secret_words = ["SECRET" + w for w in words]  # marked: no word of the rest of the line contains "SECRET"
    value = " ".join(secret_words)
    if quoted:
        value = f'"{value}"'
    arg = ("--override", f"{key}={value}") if override else (f"-D{key}={value}",)
    line = ps_line(JAVA_HEAD, *(() if override else arg), JAVA_TAIL, *(arg if override else ()), "--override", "broker.id=2")
    out = redact_command_line(line)
    assert "SECRET" not in out, (line, out)
    # nothing but the value went: the JVM options, the main class and a later allow-listed override are all there
    assert out.startswith(PS_PREFIX + JAVA_HEAD) and JAVA_TAIL in out and out.endswith("--override broker.id=2"), (line, out)
