"""A serve function for node/fresh.py's tests: what the new interpreter holds, as JSON."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Tuple

from xpu_cdi import errors


@dataclass(frozen=True)
class Settings:
    name: str
    dirs: Tuple[str, ...]


def serve(out: str, settings: Settings, fail: str = "", code: int = 0) -> int:
    """Write the process's state to *out*; raise *fail* (an xpu_cdi.errors class name) if given."""
    try:
        import freshprobe_cwd  # noqa: F401 - a module in the working directory: must not be found
        cwd_module = True
    except ImportError:
        cwd_module = False
    with open(f"/proc/{os.getpid()}/comm") as f:
        comm = f.read().strip()
    with open(out, "w") as f:
        json.dump({"pid": os.getpid(), "modules": sorted(sys.modules), "settings": [settings.name, list(settings.dirs)],
                   "argv": sys.argv, "comm": comm, "cwd_module": cwd_module, "no_user_site": sys.flags.no_user_site,
                   "xoptions": sys._xoptions, "fds": _open_files()}, f)
    if fail:
        raise getattr(errors, fail)(f"the probe was asked to fail with {fail}")
    return code


def _open_files() -> list:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # listdir's own descriptor, closed by now
            pass
    return out
