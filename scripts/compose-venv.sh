#!/usr/bin/env bash
# A virtualenv of its own under var/ with the Python docker-compose 1.29.2, which validates docker-compose.yml
# (`docker-compose config`) without a Docker engine. PyYAML 5.4.1 (docker-compose 1.x needs < 6) builds only with
# Cython < 3, hence the build without isolation. Idempotent; prints the docker-compose path.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/var/compose-venv"
req="$repo/scripts/compose-requirements.txt"
stamp="$venv/.installed"
python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3
if [ ! -f "$stamp" ] || [ "$req" -nt "$stamp" ]; then
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q "cython==0.29.37" "wheel==0.48.0" >&2
  "$venv/bin/pip" install -q --no-build-isolation "pyyaml==5.4.1" >&2
  "$venv/bin/pip" install -q -r "$req" >&2
  touch "$stamp"
fi
echo "$venv/bin/docker-compose"
