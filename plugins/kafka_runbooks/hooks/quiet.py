"""SSH and ZooKeeper connection chatter (paramiko's "Connected (version ...)", "Authentication (publickey)
successful!", kazoo's "Connecting to ...", "Zookeeper connection established") at DEBUG instead of INFO, so a task
log says what the product did; their warnings and errors stay as they are. Installed when a hook module is imported."""

from __future__ import annotations

import logging

NOISY_LOGGERS = ("paramiko", "paramiko.transport", "kazoo", "kazoo.client", "kazoo.protocol.connection")


class _ToDebug(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.INFO:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


_FILTER = _ToDebug()


def quiet_connection_noise() -> None:
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
