#!/usr/bin/env bash
# Installs what the demo and the tests need, idempotently: Debian packages, then the project venv.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
stamp="$venv/.kafka-runbooks-installed"

# Debian packages, and why: zookeeper, openssh-server, a JDK (Kafka's JVMs, jstack/jmap, Spark), iproute2, net-tools,
# procps, lsof: the lab's practice cluster and what the runbooks run on its hosts; ripgrep: the analysis' prefilter;
# postgresql, redis-server: the deployed suite's Airflow database and Celery broker; chromium: the browser tests.
# On a machine with systemd, Debian starts postgresql and redis-server as services when it installs them (the tests
# start their own instances on loopback; `sudo systemctl disable --now postgresql redis-server` stops Debian's).
apt_packages=(zookeeper openssh-server openjdk-17-jdk-headless iproute2 net-tools procps lsof ripgrep postgresql redis-server chromium)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# a JDK already on PATH (jstack/jmap/javac) is enough; do not force Debian's over it
if command -v javac >/dev/null && command -v jstack >/dev/null && command -v jmap >/dev/null; then
  missing=("${missing[@]/openjdk-17-jdk-headless}")
fi
missing=(${missing[@]+"${missing[@]}"})
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${missing[*]} (why: scripts/bootstrap.sh; postgresql and redis-server" \
       "start as services where systemd runs)" >&2
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
# the product (editable, with its extras test: pytest, pytest-timeout, hypothesis, playwright, PyYAML; deploy: the Celery
# executor, Redis and asyncpg of the deployed suite) and the lab (lab/, its own distribution), at the exact versions
# of constraints/ci.txt: what the repository's CI runs (the package itself only asks for ranges)
constraints="$repo/constraints/ci.txt"
if [ ! -f "$stamp" ] || [ "$repo/pyproject.toml" -nt "$stamp" ] || [ "$repo/lab/pyproject.toml" -nt "$stamp" ] \
   || [ "$constraints" -nt "$stamp" ]; then
  echo "bootstrap: installing into $venv: kafka-runbooks[test,deploy] and kafka-runbooks-lab (editable), pinned by" \
       "constraints/ci.txt (first time ~3 min)" >&2
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q -c "$constraints" -e "$repo[test,deploy]" -e "$repo/lab"
  touch "$stamp"
fi

# docker-compose 1.29.2 in a virtualenv of its own (var/compose-venv): the tests validate docker-compose.yml with it
"$repo/scripts/compose-venv.sh" >/dev/null

# Apache Kafka 2.3.0 for the lab: KAFKA_HOME, else ../shared/kafka/kafka_2.12-2.3.0, else var/kafka/, else the
# Apache archive (SHA-512 checked). One implementation, shared with the lab: lab/kafka_lab/kafka_home.py.
if ! kafka_home=$("$venv/bin/python" "$repo/lab/kafka_lab/kafka_home.py" --repo "$repo"); then
  echo "bootstrap: no Apache Kafka 2.3.0 for the lab (see the message above)" >&2
  exit 1
fi
echo "bootstrap: Kafka 2.3.0 at $kafka_home" >&2
