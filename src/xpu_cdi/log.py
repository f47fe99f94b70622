"""How the daemons (``xpu-cdi watch``, ``xpu-cdi device-plugin``) report: a
callable taking one line, so that tests and the bench can collect them."""

from __future__ import annotations

import sys
from typing import Callable

Log = Callable[[str], None]


def to_stderr(prefix: str) -> Log:
    """A Log writing ``<prefix>: <line>`` to stderr, flushed (what a daemon's journal shows)."""
    def log(message: str) -> None:
        print(f"{prefix}: {message}", file=sys.stderr, flush=True)
    return log
