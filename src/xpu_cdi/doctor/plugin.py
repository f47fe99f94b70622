"""The Kubernetes end of the chain: kubelet, the device plugin, what it advertises, the env setting.

The field reports' "the node shows 0 cards" has one chain: kubelet runs
(``kubelet.sock``), a device plugin serves (its socket) and is registered,
and what it advertises is defined by a CDI spec (kubelet checks nothing;
a name no spec defines fails later, in the pod, as "unresolvable CDI
devices").  Registration and the advertised IDs come from the status file
``xpu-cdi device-plugin`` keeps; other vendors' plugins are seen by their
sockets only.

``env-selection``: a node whose hook and wrapper accept selection variables
from unprivileged containers, while a device plugin hands out the cards,
gives any pod that sets ``CXPU_VISIBLE_DEVICES=all`` cards the scheduler
never gave it.
"""

from __future__ import annotations

import os
import stat
from typing import List

from .. import nodeconfig
from ..cdi import registry
from ..node import status as _status
from ..errors import ConfigError
from .context import Context
from .result import Result, fail, ok, warn

KUBELET_SOCKET = "kubelet.sock"


def _sockets(plugin_dir: str) -> List[str]:
    """Names of the sockets in kubelet's directory other than kubelet's own."""
    try:
        names = sorted(os.listdir(plugin_dir))
    except OSError:
        return []
    out = []
    for n in names:
        try:
            if n != KUBELET_SOCKET and stat.S_ISSOCK(os.lstat(os.path.join(plugin_dir, n)).st_mode):
                out.append(n)
        except OSError:
            continue
    return out


def kubernetes_node(ctx: Context) -> bool:
    return os.path.isdir(ctx.opts.plugin_dir)


def check_plugin(ctx: Context) -> List[Result]:
    """plugin-kubelet, plugin-registered, plugin-socket, plugin-devices."""
    pdir = ctx.opts.plugin_dir
    if not kubernetes_node(ctx):
        return [ok("plugin-kubelet", f"no kubelet device-plugin directory {pdir!r}: not a Kubernetes node "
                                     f"(or pass --plugin-dir)")]
    out: List[Result] = []
    kubelet = os.path.join(pdir, KUBELET_SOCKET)
    try:
        is_sock = stat.S_ISSOCK(os.lstat(kubelet).st_mode)
    except OSError:
        is_sock = False
    if is_sock:
        out.append(ok("plugin-kubelet", f"{kubelet} is present (kubelet runs its device manager)"))
    else:
        out.append(fail("plugin-kubelet", f"{kubelet} is missing: no device plugin can register, the node "
                                          f"shows 0 cards", "start kubelet (its device-plugin directory is "
                                                            "/var/lib/kubelet/device-plugins whatever its --root-dir; "
                                                            "where that is mounted elsewhere, pass --plugin-dir here "
                                                            "and to the plugin)"))
    doc, why = _status.read(ctx.opts.plugin_status_file)
    others = [s for s in _sockets(pdir) if not s.startswith("xpu-cdi-")]
    if doc is None or not _status.alive(doc):
        where = f"{why}" if doc is None else f"status file {ctx.opts.plugin_status_file!r} is left by pid " \
                                             f"{doc.get('pid')}, which is not running"
        if others:
            out.append(ok("plugin-registered", f"xpu-cdi device-plugin is not running ({where}); other device "
                                               f"plugin socket(s): {', '.join(others)}"))
        elif ctx.states:
            out.append(fail("plugin-registered", f"no device plugin runs ({where}): the cards are not advertised "
                                                 f"and the node shows 0 of them",
                            "run `xpu-cdi device-plugin` (deploy/daemonset.yaml runs it on every accelerator node)"))
        return out
    kinds = doc.get("kinds") or {}
    if not kinds:
        out.append(fail("plugin-registered", "xpu-cdi device-plugin runs but serves no kind: no CDI spec in "
                                             f"{', '.join(doc.get('spec_dirs') or [])} defines cards",
                        "run `xpu-cdi generate` (or let `xpu-cdi watch` do it); the plugin picks the spec up"))
        return out
    reg = registry.load(ctx.opts.spec_dirs)
    for unit, st in sorted(kinds.items()):
        kind = str(st.get("kind") or unit)  # a unit of resource-naming: model is keyed by its resource
        name = f"{kind} as {st.get('resource')}"
        if st.get("registered"):
            out.append(ok("plugin-registered", f"{name}: registered with kubelet"))
        else:
            err = st.get("error") or "no attempt has succeeded yet"
            out.append(fail("plugin-registered", f"{name}: not registered: kubelet said: {err}",
                            "read the plugin's log; 'already registered'/'taken' means another plugin "
                            "owns the resource name: give ours another with --resource-name"))
        sock = str(st.get("socket") or "")
        if _status.listening(sock):
            out.append(ok("plugin-socket", f"{name}: {sock} answers"))
        elif os.path.exists(sock):
            out.append(fail("plugin-socket", f"{name}: {sock} exists but nothing listens on it (the plugin "
                                             f"stopped without cleaning up?)",
                            "restart the plugin (it replaces a stale socket of its own)"))
        else:
            out.append(fail("plugin-socket", f"{name}: its socket {sock!r} is missing (kubelet removed it "
                                             f"and the plugin has not served again)",
                            "restart the plugin; check that --plugin-dir is kubelet's directory"))
        advertised = [str(d) for d in st.get("devices") or []]
        undefined = [d for d in advertised if f"{kind}={d}" not in reg.devices]
        if not advertised:
            out.append(fail("plugin-devices", f"{name}: advertises 0 devices",
                            "check the spec (`xpu-cdi list`) and the plugin's log"))
        elif undefined:
            out.append(fail("plugin-devices", f"{name}: advertises {', '.join(undefined)}, which no spec in "
                                              f"{':'.join(ctx.opts.spec_dirs)} defines: pods given them fail "
                                              f"with 'unresolvable CDI devices'",
                            "give doctor and the plugin the same --spec-dir, and the runtime too"))
        else:
            sick = st.get("unhealthy") or {}
            text = f"{name}: advertises {len(advertised)} device(s), all defined by a spec"
            if st.get("replicas"):
                text += f", each as {st['replicas']} time-slicing replicas (no isolation between them)"
            if sick:
                out.append(warn("plugin-devices", text + "; Unhealthy: " +
                                "; ".join(f"{d} ({why})" for d, why in sorted(sick.items())),
                                "fix what each reason names; the card is Healthy again on its own"))
            else:
                out.append(ok("plugin-devices", text + ", all Healthy"))
    return out


def check_env_selection(ctx: Context) -> List[Result]:
    """env-selection: env selection from unprivileged containers is off where a device plugin runs."""
    try:
        cfg = nodeconfig.read(ctx.opts.node_config)
    except ConfigError as err:
        return [fail("env-selection", str(err), "fix the file: the hook and the wrapper refuse every container "
                                                "until it parses")]
    out: List[Result] = []
    if cfg.unknown:
        out.append(warn("env-selection", f"{cfg.path!r}: unknown setting(s) {', '.join(cfg.unknown)}",
                        f"known: {', '.join(nodeconfig.DEFAULTS)}"))
    plugins = _sockets(ctx.opts.plugin_dir) if kubernetes_node(ctx) else []
    where = f"{cfg.path!r}" if cfg.exists else f"{cfg.path!r} is absent, so the default"
    if not cfg.accept_env_selection_when_unprivileged:
        out.append(ok("env-selection", f"{nodeconfig.ACCEPT_ENV}: false in {cfg.path!r}: only CDI devices, "
                                       f"cdi.k8s.io/ annotations and privileged containers select cards"))
    elif plugins:
        out.append(fail("env-selection", f"a device plugin runs ({', '.join(plugins)}) but {where} accepts "
                                         f"selection variables from unprivileged containers: any pod setting "
                                         f"CXPU_VISIBLE_DEVICES=all or ASCEND_VISIBLE_DEVICES=0-7 gets cards the "
                                         f"scheduler never gave it",
                        f"write `{nodeconfig.ACCEPT_ENV}: false` to {cfg.path} (device plugins that pass "
                        f"env only, such as Ascend's, then need the cdi-annotations route)"))
    else:
        out.append(ok("env-selection", f"{nodeconfig.ACCEPT_ENV}: true ({where}); no device plugin runs here",
                      f"on Kubernetes nodes set it to false in {cfg.path}"))
    return out
