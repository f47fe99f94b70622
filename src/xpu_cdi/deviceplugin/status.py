"""The status file the daemon keeps (``/run/xpu-cdi/device-plugin.json``), read back.

Written by :mod:`.daemon` whenever something changes (atomic replace);
read by ``xpu-cdi device-plugin --probe`` (the DaemonSet's readiness probe:
ready means registered) and by ``doctor``.  Neither reader needs gRPC.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Tuple

from ..atomic import pid_alive

DEFAULT_STATUS_FILE = "/run/xpu-cdi/device-plugin.json"


def read(path: str) -> Tuple[Optional[Dict[str, Any]], str]:
    """``(status, "")``, or ``(None, why)`` when there is none or it is unreadable."""
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read(1 << 20))
    except FileNotFoundError:
        return None, f"no status file {path} (the device plugin is not running, or uses another --status-file)"
    except (OSError, ValueError) as err:
        return None, f"status file {path} is unreadable: {err}"
    if not isinstance(doc, dict) or not isinstance(doc.get("kinds"), dict):
        return None, f"status file {path} is not a device-plugin status"
    return doc, ""


def alive(doc: Dict[str, Any]) -> bool:
    """The process that wrote *doc* still runs (a SIGKILLed plugin leaves its file behind)."""
    pid = doc.get("pid")
    return isinstance(pid, int) and pid > 0 and pid_alive(pid)


def probe(path: str) -> Tuple[bool, str]:
    """Readiness: the plugin runs and every kind it serves is registered with kubelet and has its socket."""
    doc, why = read(path)
    if doc is None:
        return False, why
    if not alive(doc):
        return False, f"status file {path} was left by pid {doc.get('pid')}, which is not running"
    kinds = doc["kinds"]
    if not kinds:
        return False, "no CDI spec defines cards yet: nothing to advertise (run `xpu-cdi generate`)"
    bad = [f"{k}: not registered{' (' + v.get('error') + ')' if v.get('error') else ''}"
           for k, v in sorted(kinds.items()) if not v.get("registered")]
    bad += [f"{k}: socket {v.get('socket')} is missing" for k, v in sorted(kinds.items())
            if v.get("registered") and not os.path.exists(str(v.get("socket")))]
    if bad:
        return False, "; ".join(bad)
    return True, "; ".join(f"{k}: registered as {v.get('resource')} with {len(v.get('devices') or [])} device(s)"
                           for k, v in sorted(kinds.items()))
