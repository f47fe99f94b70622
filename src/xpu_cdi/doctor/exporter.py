"""``exporter``, ``exporter-source``: whether ``xpu-cdi exporter`` runs here and each of its sources answers.

Read from the status file the exporter rewrites after every pass and, between
passes (it runs them when scraped), every interval (no Prometheus library, no
gRPC needed).  Its pid means something only in its own pid namespace (the
exporter may run in a pod): from another one the file's age says whether its
loop still turns; from the same one the pid is checked and ``/healthz`` asked too.
"""

from __future__ import annotations

import time
import urllib.request
from typing import Any, Dict, List

from .. import bounded
from ..atomic import pid_alive
from ..node.status import pid_namespace
from .context import Context
from .result import Result, ok, warn

POD_RESOURCES = "pod-resources"


def _read(path: str) -> "tuple[Dict[str, Any] | None, str]":
    try:
        doc = bounded.read_json(path, 1 << 20)
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError) as err:
        return None, f"status file {path} is unreadable: {err}"
    if not isinstance(doc, dict) or not isinstance(doc.get("sources"), dict):
        return None, f"status file {path} is not an exporter status"
    return doc, ""


def _healthz(listen: str) -> str:
    """'' when the exporter answers on *listen*, else why not."""
    host, _sep, port = listen.rpartition(":")
    host = host.strip("[]")
    host = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return "" if r.status == 200 else f"{url} says {r.status}"
    except OSError as err:
        return f"{url}: {getattr(err, 'reason', err)}"


def _fix(source: str) -> str:
    if source == POD_RESOURCES:
        return ("run the exporter on a Kubernetes node with <kubelet root>/pod-resources mounted "
                "(deploy/exporter.yaml), or pass --pod-resources-socket; without it cards show no allocation")
    return ("run the tool by hand as the profile's `metrics:` entry names it; correct the entry (argv, timeout, "
            "regex or columns) in an override profile in /etc/xpu-cdi/profiles.d/ (docs/monitoring.md)")


def check_exporter(ctx: Context) -> List[Result]:
    path = ctx.opts.exporter_status_file
    doc, why = _read(path)
    if doc is None:
        if why:
            return [warn("exporter", why, "restart the exporter: it rewrites the file after every refresh")]
        return [ok("exporter", f"xpu-cdi exporter is not running here (no status file {path})",
                   "deploy/exporter.yaml runs it on every accelerator node (or pass --exporter-status-file)")]
    interval = float(doc.get("interval") or 10)
    age = time.time() - float(doc.get("updated") or 0)
    same_ns = (doc.get("pid_namespace") or "") in ("", pid_namespace())
    pid = doc.get("pid")
    if same_ns and not (isinstance(pid, int) and pid_alive(pid)):
        return [warn("exporter", f"status file {path} was left by pid {pid}, which is not running",
                     "start `xpu-cdi exporter` again (or remove the stale file)")]
    if age > 3 * interval + 60:
        return [warn("exporter", f"the exporter has not updated its status for {age:.0f}s (interval {interval:g}s; "
                                 f"status file {path})", "read its log; a pass waits at most for its slowest tool's "
                                                         "timeout")]
    last = time.time() - float(doc.get("refreshed") or doc.get("updated") or 0)
    out = [ok("exporter", f"xpu-cdi exporter runs (listens on {doc.get('listen')}, {doc.get('cards')} card(s), "
                          f"last pass {max(last, 0):.0f}s ago)")]
    if same_ns:
        problem = _healthz(str(doc.get("listen") or ""))
        if problem:
            out = [warn("exporter", f"xpu-cdi exporter runs but does not answer: {problem}",
                        "check --listen and that nothing filters the port")]
    for source, st in sorted(doc["sources"].items()):
        if isinstance(st, dict) and st.get("up"):
            out.append(ok("exporter-source", f"{source}: answers"))
        else:
            reason = st.get("why") if isinstance(st, dict) else "unknown"
            out.append(warn("exporter-source", f"{source}: down: {reason}", _fix(source)))
    return out
