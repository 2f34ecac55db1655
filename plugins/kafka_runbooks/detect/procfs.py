"""Moved to ``host/procfs.py`` (issue 28: the host-side primitives in one package beneath detect/ and capture/).

This name stays, as the very same module object, for code written before the move (other branches); new code
imports ``kafka_runbooks.host.procfs``."""

import sys

from kafka_runbooks.host import procfs as _moved

sys.modules[__name__] = _moved
