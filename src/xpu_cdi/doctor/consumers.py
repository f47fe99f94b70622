"""consumers: who uses a kind's cards on this node now -- what a driver upgrade would pull the cards from.

Two sources (issue 43, item 4):

* kubelet's PodResources ``List``: the pods with a request for the kind's resource (device
  plugin) or a DRA claim resolved to one of its cards (CDI name ``<kind>=...``);
* every process holding one of the kind's device nodes open (``/proc/<pid>/fd``): a card node
  (``/dev/davinci3``, ``/dev/xpu0``) or a node of the same family beside it (``davinci_manager``,
  ``xpuctrl``).  The links are read with ``readlink``, never followed or opened: a process can
  name anything in its fds, and ``/proc`` is read as it is (a process that ends meanwhile is
  skipped).  A process is named with its pod's UID where kubelet's cgroup path has one; one
  outside any pod (a host daemon, a monitoring agent: gpu-operator#2570) holds the cards
  without a request or claim, and Kubernetes will not drain it.

Always ``ok``: a list for an admin, not a fault (the ``found`` text names every consumer).
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Set, Tuple

from .. import bounded
from ..errors import PodResourcesError
from .context import Context
from .olddriver import _holder, _read
from .result import Result, ok

CHECK = "consumers"
_FAMILY = re.compile(r"^([A-Za-z_]+?)_?\d+$")


def node_paths(card_nodes: List[str]) -> Set[str]:
    """The card nodes and, beside each, the nodes of its family (``davinci3`` -> ``davinci_manager``)."""
    out = set(card_nodes)
    for path in card_nodes:
        d, base = os.path.split(path)
        m = _FAMILY.match(base)
        if not m:
            continue
        try:
            names = os.listdir(d)
        except OSError:
            continue
        out.update(os.path.join(d, n) for n in names if n.startswith(m.group(1)))
    return out


def holders(proc: str, paths: Set[str]) -> Dict[str, Tuple[str, Set[str]]]:
    """pid -> (its holder: ``pod <uid>`` or ``process <pid>``, the *paths* it holds open)."""
    out: Dict[str, Tuple[str, Set[str]]] = {}
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return out
    for pid in sorted(pids, key=int):
        fd_dir = os.path.join(proc, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:  # ended, or not ours to read
            continue
        held = set()
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target in paths:
                held.add(target)
        if held:
            out[pid] = (_holder(proc, pid), held)
    return out


def pods(socket: str, kind: str, resources: Set[str]) -> Tuple[List[str], str]:
    """``namespace/name`` of each pod holding a card of *kind* (its *resources* or a DRA claim), and
    why kubelet could not be asked ("" when it answered)."""
    if not os.path.exists(socket):
        return [], f"kubelet's PodResources socket {socket} is absent (not a Kubernetes node?)"
    try:
        from ..node.podresources import Client
    except ImportError as err:  # grpcio missing
        return [], f"PodResources not read ({err})"
    client = Client(socket)
    try:
        listing = client.fetch()
    except PodResourcesError as err:
        return [], str(err)
    finally:
        client.close()
    found = {f"{h.namespace}/{h.pod}" for h, resource, ids in listing.devices if resource in resources and ids}
    found |= {f"{h.namespace}/{h.pod}" for h, name in listing.cdi_devices if name.startswith(kind + "=")}
    return sorted(found), ""


def plugin_resources(status_file: str, kind: str) -> Set[str]:
    """The resource names our device plugin advertises *kind*'s cards under (its status file), if it runs."""
    try:
        doc = bounded.read_json(status_file, 1 << 20)
    except (OSError, ValueError):
        return set()
    kinds = doc.get("kinds") if isinstance(doc, dict) else None
    return {str(u.get("resource")) for u in (kinds or {}).values()
            if isinstance(u, dict) and u.get("kind") == kind and u.get("resource")}


def check_consumers(ctx: Context) -> List[Result]:
    out = []
    for state in ctx.states:
        kind = state.profile.kind
        nodes = [host for _i, host, _c in state.nodes]
        if not nodes:
            continue
        procs = holders(os.path.join(ctx.opts.proc_root, "proc"), node_paths(nodes))
        resources = {kind} | plugin_resources(ctx.opts.plugin_status_file, kind)
        held_by, why = pods(ctx.opts.pod_resources_socket, kind, resources)
        outside = [f"{pid} ({_read(os.path.join(ctx.opts.proc_root, 'proc', pid, 'comm')).strip() or '?'}: "
                   f"{', '.join(sorted(os.path.basename(p) for p in held))})"
                   for pid, (holder, held) in procs.items() if holder.startswith("process ")]
        in_pods = sorted({holder for holder, _held in procs.values() if holder.startswith("pod ")})
        parts = [f"pods with a request or claim: {', '.join(held_by) if held_by else 'none'}"
                 + (f" ({why})" if why else "")]
        parts.append(f"processes in pods holding its nodes: {', '.join(in_pods) if in_pods else 'none'}")
        parts.append("processes outside any pod holding its nodes (no request or claim): "
                     + (", ".join(outside) if outside else "none"))
        busy = held_by or procs
        out.append(ok(CHECK, f"{kind}: " + "; ".join(parts),
                      "before a driver upgrade: drain the pods (kubectl drain, or evict them) and stop those "
                      "processes; `lsof` names them too" if busy else ""))
    return out
