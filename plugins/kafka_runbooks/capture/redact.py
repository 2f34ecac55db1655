"""Secrets stay out of evidence bundles: configuration files and JVM command lines are redacted by an
allow-list before they are written.  Pure, but for ``redact_file``, which rewrites a captured file in place.

* ``server.properties`` (and ``zoo.cfg``): a value is kept only when its key is on the allow-list -- every
  broker config Apache Kafka 2.3.0 declares (``kafka.server.KafkaConfig``'s own table, printed by
  ``kafka-run-class.sh kafka.server.KafkaConfig`` and recorded here) except those of type PASSWORD and every
  key naming a password, secret, keystore, truststore, JAAS configuration or credential; ZooKeeper's server
  keys likewise. ``listener.name.<listener>.[<mechanism>.]<key>`` is judged by its ``<key>``. Anything else
  -- ``sasl.jaas.config``, ``ssl.keystore.password``, a plugin's own ``x.api.token`` -- keeps its key and
  loses its value. Comment lines lose their text. Line numbers do not change (evidence cites them).
* JVM command lines (``ps -o args``, which carries ``KAFKA_OPTS``, ``KAFKA_JMX_OPTS``, ...): a system
  property ``-Dkey=value`` keeps its value only for allow-listed keys; ``--override key=value`` (kafka.Kafka)
  is judged as a server.properties line. A value is redacted whole: ``ps`` joins the arguments with spaces and drops
  their quotes, so the words after a redacted value go with it until the next JVM option, ``--override`` or main
  class -- and past those while a double quote is open or a JAAS configuration has not reached its ``;``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TypeVar

R = TypeVar("R")  # hooks/ssh.CommandResult: its stdout_bytes is set to the redacted size

REDACTED = "[redacted by kafka-runbooks]"

# kafka.server.KafkaConfig of Apache Kafka 2.3.0, types other than PASSWORD, minus secret-looking names
KAFKA_KEYS = frozenset((
    "advertised.host.name", "advertised.listeners", "advertised.port", "alter.config.policy.class.name",
    "alter.log.dirs.replication.quota.window.num", "alter.log.dirs.replication.quota.window.size.seconds",
    "authorizer.class.name", "auto.create.topics.enable", "auto.leader.rebalance.enable", "background.threads",
    "broker.id", "broker.id.generation.enable", "broker.rack", "client.quota.callback.class", "compression.type",
    "connection.failed.authentication.delay.ms", "connections.max.idle.ms", "connections.max.reauth.ms",
    "control.plane.listener.name", "controlled.shutdown.enable", "controlled.shutdown.max.retries",
    "controlled.shutdown.retry.backoff.ms", "controller.socket.timeout.ms", "create.topic.policy.class.name",
    "default.replication.factor", "delegation.token.expiry.check.interval.ms", "delegation.token.expiry.time.ms",
    "delegation.token.max.lifetime.ms", "delete.records.purgatory.purge.interval.requests", "delete.topic.enable",
    "fetch.purgatory.purge.interval.requests", "group.initial.rebalance.delay.ms", "group.max.session.timeout.ms",
    "group.max.size", "group.min.session.timeout.ms", "host.name", "inter.broker.listener.name",
    "inter.broker.protocol.version", "kafka.metrics.polling.interval.secs", "kafka.metrics.reporters",
    "leader.imbalance.check.interval.seconds", "leader.imbalance.per.broker.percentage",
    "listener.security.protocol.map", "listeners", "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.delete.retention.ms", "log.cleaner.enable", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second", "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleaner.min.compaction.lag.ms", "log.cleaner.threads",
    "log.cleanup.policy", "log.dir", "log.dirs", "log.flush.interval.messages", "log.flush.interval.ms",
    "log.flush.offset.checkpoint.interval.ms", "log.flush.scheduler.interval.ms",
    "log.flush.start.offset.checkpoint.interval.ms", "log.index.interval.bytes", "log.index.size.max.bytes",
    "log.message.downconversion.enable", "log.message.format.version", "log.message.timestamp.difference.max.ms",
    "log.message.timestamp.type", "log.preallocate", "log.retention.bytes", "log.retention.check.interval.ms",
    "log.retention.hours", "log.retention.minutes", "log.retention.ms", "log.roll.hours", "log.roll.jitter.hours",
    "log.roll.jitter.ms", "log.roll.ms", "log.segment.bytes", "log.segment.delete.delay.ms", "max.connections",
    "max.connections.per.ip", "max.connections.per.ip.overrides", "max.incremental.fetch.session.cache.slots",
    "message.max.bytes", "metric.reporters", "metrics.num.samples", "metrics.recording.level",
    "metrics.sample.window.ms", "min.insync.replicas", "num.io.threads", "num.network.threads", "num.partitions",
    "num.recovery.threads.per.data.dir", "num.replica.alter.log.dirs.threads", "num.replica.fetchers",
    "offset.metadata.max.bytes", "offsets.commit.required.acks", "offsets.commit.timeout.ms",
    "offsets.load.buffer.size", "offsets.retention.check.interval.ms", "offsets.retention.minutes",
    "offsets.topic.compression.codec", "offsets.topic.num.partitions", "offsets.topic.replication.factor",
    "offsets.topic.segment.bytes", "port", "principal.builder.class", "producer.purgatory.purge.interval.requests",
    "queued.max.request.bytes", "queued.max.requests", "quota.consumer.default", "quota.producer.default",
    "quota.window.num", "quota.window.size.seconds", "replica.fetch.backoff.ms", "replica.fetch.max.bytes",
    "replica.fetch.min.bytes", "replica.fetch.response.max.bytes", "replica.fetch.wait.max.ms",
    "replica.high.watermark.checkpoint.interval.ms", "replica.lag.time.max.ms",
    "replica.socket.receive.buffer.bytes", "replica.socket.timeout.ms", "replication.quota.window.num",
    "replication.quota.window.size.seconds", "request.timeout.ms", "reserved.broker.max.id",
    "sasl.client.callback.handler.class", "sasl.enabled.mechanisms", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.kerberos.service.name", "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.callback.handler.class", "sasl.login.class", "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.mechanism.inter.broker.protocol",
    "sasl.server.callback.handler.class", "security.inter.broker.protocol", "socket.receive.buffer.bytes",
    "socket.request.max.bytes", "socket.send.buffer.bytes", "ssl.cipher.suites", "ssl.client.auth",
    "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm", "ssl.keymanager.algorithm",
    "ssl.principal.mapping.rules", "ssl.protocol", "ssl.provider", "ssl.secure.random.implementation",
    "ssl.trustmanager.algorithm", "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.max.timeout.ms", "transaction.remove.expired.transaction.cleanup.interval.ms",
    "transaction.state.log.load.buffer.size", "transaction.state.log.min.isr",
    "transaction.state.log.num.partitions", "transaction.state.log.replication.factor",
    "transaction.state.log.segment.bytes", "transactional.id.expiration.ms", "unclean.leader.election.enable",
    "zookeeper.connect", "zookeeper.connection.timeout.ms", "zookeeper.max.in.flight.requests",
    "zookeeper.session.timeout.ms", "zookeeper.set.acl", "zookeeper.sync.time.ms",
))
ZOOKEEPER_KEYS = frozenset((
    "tickTime", "initLimit", "syncLimit", "dataDir", "dataLogDir", "clientPort", "clientPortAddress", "secureClientPort",
    "maxClientCnxns", "minSessionTimeout", "maxSessionTimeout", "autopurge.snapRetainCount", "autopurge.purgeInterval",
    "4lw.commands.whitelist", "admin.enableServer", "admin.serverAddress", "admin.serverPort", "standaloneEnabled",
    "reconfigEnabled", "electionAlg", "electionPortBindRetry", "quorumListenOnAllIPs", "preAllocSize", "snapCount",
    "globalOutstandingLimit", "syncEnabled", "peerType", "leaderServes", "cnxTimeout", "forceSync", "skipACL",
    "metricsProvider.className", "metricsProvider.httpPort", "metricsProvider.exportJvmInfo", "jute.maxbuffer",
    "connectToLearnerMasterLimit", "initLimit", "snapSizeLimitInKb", "txnLogSizeLimitInKb", "serverCnxnFactory",
    "sslQuorum", "portUnification", "multiAddress.enabled",
))
_ZOOKEEPER_PATTERNS = (re.compile(r"server\.\d+"), re.compile(r"group\.\d+"), re.compile(r"weight\.\d+"))
# JVM system properties whose values are harmless (paths, switches, host names)
JVM_PROPERTIES = frozenset((
    "java.awt.headless", "kafka.logs.dir", "log4j.configuration", "zookeeper.sasl.client", "java.security.auth.login.config",
    "java.io.tmpdir", "java.rmi.server.hostname", "file.encoding", "java.net.preferIPv4Stack", "user.timezone",
    "com.sun.management.jmxremote", "com.sun.management.jmxremote.authenticate", "com.sun.management.jmxremote.ssl",
    "com.sun.management.jmxremote.port", "com.sun.management.jmxremote.rmi.port", "com.sun.management.jmxremote.host",
    "com.sun.management.jmxremote.local.only", "zookeeper.log.dir", "zookeeper.root.logger", "zookeeper.log.file",
    "jute.maxbuffer", "zookeeper.admin.enableServer", "sun.net.inetaddr.ttl", "networkaddress.cache.ttl",
))
_SECRET = re.compile(r"password|passwd|secret|keystore|truststore|jaas|credential|token|private|\.key$", re.I)
_PROPERTY = re.compile(r"^(\s*)([^=:\s]+)(\s*[=:\s]\s*)(.*)$")


def allowed_key(key: str, allow: frozenset[str] = KAFKA_KEYS) -> bool:
    """Whether ``key``'s value may be kept (Kafka's allow-list, ``listener.name.*`` judged by its own key)."""
    if _SECRET.search(key):
        return False
    if key in allow:
        return True
    if key.startswith("listener.name."):
        parts = key.split(".")[3:]
        return any(".".join(parts[i:]) in allow for i in (0, 1) if parts[i:])
    return False


def _zookeeper_key(key: str) -> bool:
    return not _SECRET.search(key) and (key in ZOOKEEPER_KEYS or any(p.fullmatch(key) for p in _ZOOKEEPER_PATTERNS))


def redact_properties(text: str, *, zookeeper: bool = False) -> str:
    """A .properties file with every value of a key off the allow-list replaced; comments emptied; lines kept.
    A continued line (ending in a backslash) carries its key's fate to the lines that continue it."""
    out = []
    redact_next = False
    for line in text.split("\n"):
        stripped = line.strip()
        if redact_next:
            out.append(REDACTED if stripped else line)
            redact_next = stripped.endswith("\\")
            continue
        if not stripped:
            out.append(line)
            continue
        if stripped[0] in "#!":
            out.append(line[: len(line) - len(line.lstrip())] + stripped[0])
            continue
        m = _PROPERTY.match(line)
        if not m:
            out.append(REDACTED)
            continue
        ok = _zookeeper_key(m.group(2)) if zookeeper else allowed_key(m.group(2))
        if ok:
            out.append(line)
            redact_next = False
        else:
            out.append(f"{m.group(1)}{m.group(2)}{m.group(3)}{REDACTED}")
            redact_next = stripped.endswith("\\")
    return "\n".join(out)


# what ends a redacted value in a command line: the next JVM option or ``--override``, or the program's main class.
# ``ps`` prints the arguments joined by spaces, their quotes gone: a value holding a space
# (``-Dvault.token=abc dEf123``, a JAAS configuration) runs on over the following words, so those words are
# redacted with it until one of these begins the next argument. A word of the value that looks like one of these
# ends it early: fail closed means redacting more, never less, so anything else counts as the value's.
_NEXT_ARGUMENT = re.compile(r"-D\S|-X|-cp$|-classpath$|--class-path|-server$|-client$|-javaagent:|-agentlib:|-agentpath:"
                            r"|-verbose|-ea$|-da$|-esa$|-dsa$|-jar$|--override$|--add-|--module|-splash:|-enable|-disable")
MAIN_CLASSES = frozenset(("kafka.Kafka", "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                          "org.apache.zookeeper.server.ZooKeeperServerMain"))


def _ends_value(token: str) -> bool:
    return bool(_NEXT_ARGUMENT.match(token)) or token in MAIN_CLASSES


def _value_tokens(tokens: list[str], i: int, value: str) -> int:
    """How many tokens after ``tokens[i]`` (whose value part is ``value``) still belong to that value: every one
    while a double quote is open or a JAAS configuration has not reached its ``;``, then every one up to the next
    argument (``_ends_value``)."""
    n = 0
    seen = value
    while i + n + 1 < len(tokens):
        nxt = tokens[i + n + 1]
        open_quote = seen.count('"') % 2 == 1
        open_jaas = re.search(r"LoginModule|\brequired\b|\boptional\b|\bsufficient\b|\brequisite\b", seen) and not seen.rstrip().endswith(";")
        if not (open_quote or open_jaas) and _ends_value(nxt):
            break
        seen += " " + nxt
        n += 1
    return n


def redact_command_line(text: str) -> str:
    """Every JVM command line in ``text`` (one process per line, e.g. ``ps -o pid=,etimes=,rss=,args=``) with the values
    of system properties off the allow-list, and of ``--override`` settings off Kafka's, replaced -- whole: the words
    of a value that held a space go with it (``_value_tokens``)."""
    lines = []
    for line in text.split("\n"):
        tokens = line.split(" ")
        out = []
        i = 0
        override = False
        while i < len(tokens):
            tok = tokens[i]
            key = value = None
            if override and "=" in tok:
                key, _, value = tok.partition("=")
                keep, shown = allowed_key(key), tok.split("=", 1)[0]
            elif tok.startswith("-D") and "=" in tok:
                key, _, value = tok[2:].partition("=")
                keep, shown = key in JVM_PROPERTIES, "-D" + key
            elif tok.startswith("-XX:") and _SECRET.search(tok):
                keep, shown, value = False, tok.split("=", 1)[0], tok.partition("=")[2] if "=" in tok else None
            override = tok == "--override"
            if value is None or keep:
                out.append(tok)
                i += 1
                continue
            out.append(f"{shown}={REDACTED}")
            i += 1 + _value_tokens(tokens, i, value)
        lines.append(" ".join(out))
    return "\n".join(lines)


def redact_file(how: str, path: Path, res: R) -> R:
    """The file rewritten with its secrets redacted before it is hashed and recorded (stderr holds the tool's own
    messages -- ``cat: ...: No such file or directory`` -- never the file's content). ``how``: ``command_line``,
    ``properties`` or ``zookeeper_properties``."""
    fn = redact_command_line if how == "command_line" else (lambda t: redact_properties(t, zookeeper=how == "zookeeper_properties"))
    data = Path(path).read_bytes() if Path(path).exists() else b""
    clean = fn(data.decode("utf-8", "replace")).encode("utf-8")
    Path(path).write_bytes(clean)
    res.stdout_bytes = len(clean)
    return res
