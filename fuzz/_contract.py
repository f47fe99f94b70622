"""What every atheris harness checks: a parser of outside input returns, or
raises one of our errors with a non-empty one-line message.  Anything else
propagates, and atheris reports it as a crash with the input that caused it;
libFuzzer's ``-timeout`` catches hangs."""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any, Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from xpu_cdi.errors import XpuCdiError  # noqa: E402


def ours(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or the XpuCdiError it raised after checking its message."""
    try:
        return fn(*args)
    except XpuCdiError as err:
        msg = str(err)
        if not msg.strip() or "\n" in msg or "\r" in msg:
            raise AssertionError(f"{type(err).__name__} message is empty or spans lines: {msg!r}") from err
        return err


# one scratch dir per harness process, on tmpfs when there is one: harnesses
# that read files write each input there
SCRATCH = os.environ.get("XPU_CDI_FUZZ_SCRATCH") or tempfile.mkdtemp(
    prefix="xpu-cdi-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
os.makedirs(SCRATCH, exist_ok=True)


def put(name: str, data: bytes) -> str:
    """Write *data* as SCRATCH/<name> (replacing it) and return the path."""
    path = os.path.join(SCRATCH, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def clear() -> None:
    """Empty SCRATCH."""
    for name in os.listdir(SCRATCH):
        os.unlink(os.path.join(SCRATCH, name))
