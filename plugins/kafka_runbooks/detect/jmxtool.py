"""Moved to ``host/jmxtool.py`` (issue 28: the host-side primitives in one package beneath detect/ and capture/).

This name stays, as the very same module object, for code written before the move (other branches); new code
imports ``kafka_runbooks.host.jmxtool``."""

import sys

from kafka_runbooks.host import jmxtool as _moved

sys.modules[__name__] = _moved
