#!/bin/bash
# A practice broker host: writes server.properties from the environment, pins the SSH keys (the client key from the
# shared keys volume; this host's key published there for the Airflow connections), starts Kafka detached through
# kafka-start (as a person or the runbooks would), then runs sshd in the foreground as the container's process.
set -euo pipefail
: "${BROKER_ID:?}" "${ZOOKEEPER_CONNECT:?}"
host=$(hostname)
cat >/opt/kafka/config/server.properties <<PROPS
broker.id=${BROKER_ID}
listeners=CLIENT://0.0.0.0:9092,REPLICATION://0.0.0.0:9093
advertised.listeners=CLIENT://${host}:9092,REPLICATION://${host}:9093
listener.security.protocol.map=CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT
inter.broker.listener.name=REPLICATION
zookeeper.connect=${ZOOKEEPER_CONNECT}
log.dirs=/var/lib/kafka/data
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
default.replication.factor=3
min.insync.replicas=2
auto.leader.rebalance.enable=false
unclean.leader.election.enable=false
auto.create.topics.enable=false
PROPS
[ -f /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
mkdir -p /keys/hosts
cp /etc/ssh/ssh_host_ed25519_key.pub "/keys/hosts/${host}.pub"
install -d -o kafka -g kafka -m 0700 /home/kafka/.ssh
install -o kafka -g kafka -m 0600 /keys/id_ed25519.pub /home/kafka/.ssh/authorized_keys
cat >/etc/ssh/sshd_config.d/kafka-runbooks.conf <<SSHD
HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
AllowUsers kafka
SSHD
runuser -u kafka -- /opt/kafka-host/bin/kafka-start
exec /usr/sbin/sshd -D -e
