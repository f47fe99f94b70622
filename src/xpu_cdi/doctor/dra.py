"""The DRA driver's end: registered with kubelet, its slices published and naming only cards a
spec defines, its checkpoint readable, and no kind served by it and the device plugin both.

Read from what the daemons keep on the node: ``xpu-cdi dra-driver``'s status files
(``<run dir>/dra-driver-<pod uid>.json``, one per driver pod: two during a rolling update), the
device plugin's status file, the driver's checkpoint.  No API server and no gRPC: the status
file says whether the API server took the slices (the driver's last write succeeded).
"""

from __future__ import annotations

import glob
import os
from typing import Any, Dict, List, Set, Tuple

from .. import bounded
from ..cdi import registry
from ..generate.discover import host_path
from ..node import status as _status
from ..node import checkpoint as _cp
from .context import Context
from .olddriver import running_pods
from .result import Result, fail, ok, warn

PATTERN = "dra-driver-*.json"
#: kubelet's device manager's record of what device plugins gave each pod (in its --plugin-dir)
KUBELET_CHECKPOINT = "kubelet_internal_checkpoint"


def running(run_dir: str) -> Tuple[List[Dict[str, Any]], List[str]]:
    """The status documents of the drivers running now, and the files left by ones that are not."""
    docs, stale = [], []
    for path in sorted(glob.glob(os.path.join(run_dir, PATTERN))):
        try:
            doc = bounded.read_json(path, 1 << 20)
        except (OSError, ValueError):
            stale.append(path)
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("kinds"), dict):
            stale.append(path)
            continue
        ns = doc.get("pid_namespace") or ""
        if ns and ns != _status.pid_namespace():  # another pid namespace: ask its sockets
            alive = any(_status.listening(str(k.get("dra_socket"))) for k in doc["kinds"].values()
                        if isinstance(k, dict))
        else:
            alive = _status.alive(doc)
        (docs if alive else stale).append(doc if alive else path)
    return docs, stale


def check_dra(ctx: Context) -> List[Result]:
    """dra-registered, dra-slices, dra-checkpoint."""
    run_dir = ctx.opts.dra_run_dir
    docs, stale = running(run_dir)
    if not docs:
        left = f"; left by drivers no longer running: {', '.join(stale)}" if stale else ""
        return [ok("dra-registered", f"xpu-cdi dra-driver is not running (no live {PATTERN} in {run_dir}){left}")]
    reg = registry.load(ctx.opts.spec_dirs)
    out: List[Result] = []
    for doc in docs:
        kinds = doc["kinds"]
        if not kinds:
            out.append(fail("dra-registered", f"xpu-cdi dra-driver (pid {doc.get('pid')}) serves no kind: no CDI "
                                              f"spec in {', '.join(doc.get('spec_dirs') or [])} defines cards, or "
                                              f"every kind was refused (its log says why)",
                            "run `xpu-cdi generate`; choose one way per kind in the node config"))
            continue
        for kind, st in sorted(kinds.items()):
            name = f"{kind} as driver {st.get('driver')}"
            if st.get("registered"):
                out.append(ok("dra-registered", f"{name}: registered with kubelet ({st.get('dra_socket')})"))
            else:
                out.append(fail("dra-registered", f"{name}: not registered with kubelet: "
                                                  f"{st.get('registration_error') or 'kubelet has not called yet'}",
                                "check --registry-dir is kubelet's plugins_registry and kubelet runs"))
            out += _slices(name, kind, st, reg)
            out.append(_checkpoint(name, str(st.get("checkpoint") or ""), str(doc.get("boot_id") or "")))
    return out


def _slices(name: str, kind: str, st: Dict[str, Any], reg: registry.Registry) -> List[Result]:
    devices = st.get("devices") or {}
    undefined = sorted(c for c in devices.values() if c not in reg.devices)
    pool = f"pool {st.get('pool')} (generation {st.get('generation')})"
    if not st.get("published"):
        return [fail("dra-slices", f"{name}: slices not published: {st.get('publish_error') or 'not yet'}",
                     "the driver's service account needs resourceslices create/update (deploy/dra/rbac.yaml), "
                     "and may write only its own node's (the admission policy)")]
    if not devices:
        return [fail("dra-slices", f"{name}: {pool} published with 0 devices",
                     "check the spec (`xpu-cdi list`) and the driver's log")]
    if undefined:
        return [fail("dra-slices", f"{name}: publishes {', '.join(undefined)}, which no spec in "
                                   f"{':'.join(reg.dirs)} defines: claims given them fail as 'unresolvable CDI "
                                   f"devices'", "give doctor, the driver and the runtime the same --spec-dir")]
    text = f"{name}: {pool} publishes {len(devices)} device(s), all defined by a spec"
    sick = st.get("unhealthy") or {}
    if sick:
        return [warn("dra-slices", text + "; tainted unhealthy: " +
                     "; ".join(f"{d} ({why})" for d, why in sorted(sick.items())),
                     "fix what each reason names; the taint goes when the card recovers")]
    return [ok("dra-slices", text + ", none tainted")]


def _checkpoint(name: str, path: str, boot: str) -> Result:
    try:
        claims, written_on = _cp.read(path)
    except FileNotFoundError:
        return ok("dra-checkpoint", f"{name}: no checkpoint yet ({path}): no claim prepared")
    except OSError as err:
        return fail("dra-checkpoint", f"{name}: checkpoint {path} is unreadable: {err.strerror}",
                    "the driver runs as root with kubelet's plugins directory mounted read-write")
    except ValueError as err:
        return warn("dra-checkpoint", f"{name}: checkpoint {path} is corrupt ({' '.join(str(err).split())}): the "
                                      f"driver started empty and took the claims in use back from the API",
                    "nothing to do unless it recurs (then check the disk)")
    if boot and written_on != boot:
        return warn("dra-checkpoint", f"{name}: checkpoint {path} is from boot {written_on or '?'}, the driver's "
                                      f"is {boot}", "restart the driver: it discards a checkpoint of another boot")
    return ok("dra-checkpoint", f"{name}: checkpoint readable, {len(claims)} claim(s) prepared")


def check_one_way(ctx: Context) -> List[Result]:
    """one-way: no kind served by both the device plugin and the DRA driver."""
    docs, _stale = running(ctx.opts.dra_run_dir)
    dra = {kind for doc in docs for kind in doc["kinds"]}
    plugin_doc, _why = _status.read(ctx.opts.plugin_status_file)
    plugin = set(plugin_doc["kinds"]) if plugin_doc is not None and _status.alive(plugin_doc) else set()
    both = sorted(dra & plugin)
    if both:
        return [fail("one-way", f"{', '.join(both)} served by the device plugin and the DRA driver both: the "
                                f"scheduler can give one card to two pods",
                     "choose one per kind in the node config (kubernetes-allocation) and restart both daemons "
                     "with the same run dir (/run/xpu-cdi), where each refuses a kind the other serves")]
    held = plugin_held(ctx, dra)
    if held:
        return [warn("one-way", f"{', '.join(sorted(dra))} served by DRA, but pods still run with cards the device "
                                f"plugin gave them (kubelet's {KUBELET_CHECKPOINT}): {'; '.join(held)}: the DRA "
                                f"driver publishes those cards as free, so a claim can get one of them too",
                     "delete those pods (their controllers place them again); switch a node's way only with no "
                     "card pods on it (docs/dra.md, \"Device plugin or DRA, per node\")")]
    if not dra and not plugin:
        return [ok("one-way", "neither the device plugin nor the DRA driver runs")]
    return [ok("one-way", "each kind served one way: " + ", ".join(
        [f"{k} by the device plugin" for k in sorted(plugin)] + [f"{k} by DRA" for k in sorted(dra)]))]


def plugin_held(ctx: Context, dra: Set[str]) -> List[str]:
    """``pod <uid>: <resource> <ids>`` for each running pod to which kubelet's checkpoint says a device
    plugin gave cards of a vendor whose kinds DRA serves now (a node switched without draining);
    nothing when there is no /proc to tell running pods by, or no checkpoint."""
    proc = host_path(ctx.opts.proc_root, "/proc")
    vendors = {kind.partition("/")[0] for kind in dra}
    if not vendors or not os.path.isdir(os.path.join(proc, "self")):
        return []
    try:
        doc = bounded.read_json(os.path.join(ctx.opts.plugin_dir, KUBELET_CHECKPOINT), 1 << 24)
        entries = doc["Data"]["PodDeviceEntries"] or []
    except (OSError, ValueError, KeyError, TypeError):
        return []  # kubelet's file: absent where no plugin ever served, its checks are kubelet's
    pods = running_pods(proc)
    out = []
    for e in entries:
        if not isinstance(e, dict) or e.get("PodUID") not in pods or \
                str(e.get("ResourceName", "")).partition("/")[0] not in vendors:
            continue
        ids = e.get("DeviceIDs") or {}
        flat = [i for v in ids.values() for i in v] if isinstance(ids, dict) else list(ids)  # per NUMA node
        out.append(f"pod {e['PodUID']}: {e['ResourceName']} {','.join(sorted(map(str, flat)))}")
    return sorted(set(out))
