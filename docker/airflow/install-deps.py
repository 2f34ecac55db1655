"""Installs the project's pinned runtime dependencies (pyproject.toml) into the Airflow image, with Airflow's own
version held where the image has it; the test-only pins (pytest, hypothesis) are left out."""

from __future__ import annotations

import subprocess
import sys
import tomllib

TEST_ONLY = ("pytest", "pytest-timeout", "hypothesis")


def runtime_requirements(pyproject: str) -> list[str]:
    with open(pyproject, "rb") as fh:
        deps = tomllib.load(fh)["project"]["dependencies"]
    return [d for d in deps if d.split("==")[0].split("[")[0].strip() not in TEST_ONLY]


if __name__ == "__main__":
    reqs = runtime_requirements(sys.argv[1])
    sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "--no-cache-dir", *reqs]))
