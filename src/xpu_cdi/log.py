"""How the daemons (``xpu-cdi watch``, ``xpu-cdi device-plugin``) report: a
callable taking one line, so that tests and the bench can collect them."""

from __future__ import annotations

from typing import Callable

Log = Callable[[str], None]
