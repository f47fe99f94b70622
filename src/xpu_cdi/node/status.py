"""The node daemons' status files, read back: whether their writer still runs, and the
device plugin's (``/run/xpu-cdi/device-plugin.json``) readiness.

Written by each daemon's loop whenever something changes (atomic replace,
:meth:`xpu_cdi.node.loop.Loop.publish_status`); read by ``xpu-cdi device-plugin
--probe`` (the DaemonSet's readiness probe: ready means registered) and by
``doctor``.  Neither reader needs gRPC.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Dict, Optional, Tuple

from .. import bounded
from ..atomic import pid_alive

DEFAULT_STATUS_FILE = "/run/xpu-cdi/device-plugin.json"


def read(path: str) -> Tuple[Optional[Dict[str, Any]], str]:
    """``(status, "")``, or ``(None, why)`` when there is none or it is unreadable."""
    try:
        doc = bounded.read_json(path, 1 << 20)
    except FileNotFoundError:
        return None, f"no status file {path} (the device plugin is not running, or uses another --status-file)"
    except (OSError, ValueError) as err:
        return None, f"status file {path} is unreadable: {err}"
    if not isinstance(doc, dict) or not isinstance(doc.get("kinds"), dict):
        return None, f"status file {path} is not a device-plugin status"
    return doc, ""


def pid_namespace() -> str:
    """This process's pid namespace (``pid:[4026531836]``), or ``""``."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def listening(path: str) -> bool:
    """Something accepts connections on the unix socket *path*."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(0.5)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def alive(doc: Dict[str, Any]) -> bool:
    """The process that wrote *doc* still runs (a SIGKILLed plugin leaves its file behind).

    Its pid means something only in its own pid namespace: read from another
    one (doctor on the host, the plugin in a pod), the plugin's sockets answer
    instead.
    """
    pid = doc.get("pid")
    ns = doc.get("pid_namespace") or ""
    if ns and ns != pid_namespace():
        sockets = [str(k.get("socket")) for k in (doc.get("kinds") or {}).values() if isinstance(k, dict)]
        return any(listening(p) for p in sockets) if sockets else True  # nothing to ask: take the file's word
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
    bad += [f"{k}: nothing listens on its socket {v.get('socket')}" for k, v in sorted(kinds.items())
            if v.get("registered") and not listening(str(v.get("socket")))]
    if bad:
        return False, "; ".join(bad)
    return True, "; ".join(f"{k}: registered as {v.get('resource')} with {len(v.get('devices') or [])} device(s)"
                           for k, v in sorted(kinds.items()))
