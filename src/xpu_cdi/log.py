"""How the daemons (``device-plugin``, ``dra-driver``, ``exporter``, ``watch``) report.

A :data:`Log` is a callable taking one line and a level (``log("...", WARNING)``),
so that tests and the bench can collect the lines (:func:`into`).  On a node the
lines go to stderr through the standard :mod:`logging` module
(:func:`to_stderr`), one a line, with a level and a timestamp, in one of two
formats (docs/operations.md, "Logs"):

* ``text``, klog's shape: ``I1204 18:20:01.123456 1234 xpu-cdi device-plugin] <message>``
  (level letter D/I/W/E, month and day, local time to the microsecond, pid, logger);
* ``json``, one object a line: ``{"ts": "2026-12-04T18:20:01.123456Z", "level": "info",
  "logger": "xpu-cdi device-plugin", "msg": "<message>"}`` (UTC).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import List, Protocol

DEBUG, INFO, WARNING, ERROR = logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR
LEVELS = {"debug": DEBUG, "info": INFO, "warning": WARNING, "error": ERROR}
FORMATS = ("text", "json")
_LETTERS = {DEBUG: "D", INFO: "I", WARNING: "W", ERROR: "E", logging.CRITICAL: "F"}


class Log(Protocol):
    def __call__(self, message: str, level: int = INFO) -> None: ...


class KlogFormatter(logging.Formatter):
    """``I1204 18:20:01.123456 1234 <logger>] <message>``: klog's header, the logger for its file:line."""

    def format(self, record: logging.LogRecord) -> str:
        t = time.localtime(record.created)
        micros = int((record.created % 1) * 1_000_000)
        return (f"{_LETTERS.get(record.levelno, 'I')}{time.strftime('%m%d %H:%M:%S', t)}.{micros:06d} "
                f"{record.process} {record.name}] {record.getMessage()}")


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``msg``."""

    def format(self, record: logging.LogRecord) -> str:
        micros = int((record.created % 1) * 1_000_000)
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{micros:06d}Z"
        return json.dumps({"ts": ts, "level": record.levelname.lower(), "logger": record.name,
                           "msg": record.getMessage()}, ensure_ascii=False)


def formatter(fmt: str) -> logging.Formatter:
    """The formatter of *fmt* (one of :data:`FORMATS`)."""
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(FORMATS)}")
    return JsonFormatter() if fmt == "json" else KlogFormatter()


def to_stderr(name: str, level: str = "info", fmt: str = "text") -> Log:
    """A Log writing to stderr through the logger *name* (``xpu-cdi device-plugin``), lines below
    *level* (a key of :data:`LEVELS`) dropped, each flushed (what a daemon's journal shows)."""
    logger = logging.getLogger(name)
    logger.propagate = False
    logger.setLevel(LEVELS[level])
    for old in list(logger.handlers):  # built again (a test's second daemon): one handler, the new format
        logger.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(fmt))
    logger.addHandler(handler)

    def log(message: str, level: int = INFO) -> None:
        logger.log(level, message)
    return log


def into(lines: List[str]) -> Log:
    """A Log appending each message (without its level) to *lines*: what tests collect."""
    def log(message: str, level: int = INFO) -> None:
        lines.append(message)
    return log
