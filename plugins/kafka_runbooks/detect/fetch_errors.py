"""Peers' failed replica fetches from a broker's ``server.log``: the analysis' one implementation
(:func:`kafka_runbooks.analyze.parsers.kafka_log.fetch_errors`), named here for the detectors."""

from __future__ import annotations

from kafka_runbooks.analyze.parsers.kafka_log import (  # noqa: F401 (re-exported)
    CAUSE_CLIENT_SHUTDOWN, CAUSE_CONNECTION_FAILED, CAUSE_DISCONNECTED, CAUSE_TIMEOUT, CAUSE_UNKNOWN,
    UNREACHABLE_CAUSES, FetchError, fetch_errors)
