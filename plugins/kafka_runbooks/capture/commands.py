"""Moved to ``host/commands.py`` (issue 28: the host-side primitives in one package beneath detect/ and capture/).

This name stays, as the very same module object, for code written before the move (other branches); new code
imports ``kafka_runbooks.host.commands`` (argv checks: ``kafka_runbooks.host.argv``)."""

import sys

from kafka_runbooks.host import commands as _moved

sys.modules[__name__] = _moved
