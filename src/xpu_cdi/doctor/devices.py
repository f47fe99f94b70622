"""Driver and device-node checks: cards present, nodes real and registered,
modes that let containers open them, control nodes present."""

from __future__ import annotations

import glob as _glob
import os
from typing import Dict, List, Optional, Tuple

from .. import hoststat
from ..generate import discover as _discover
from ..topology import compress
from .context import Context, ProfileState
from .result import Result, fail, ok, warn

_KINDS = {"-": "a regular file", "d": "a directory", "?": "not a device node"}


REGEN = "then run `xpu-cdi generate` so the spec follows"


def check_driver(ctx: Context) -> List[Result]:
    """driver: card nodes per profile, against the vendor's PCI devices in sysfs."""
    if not ctx.states:
        vendors = sorted({p.pci_vendor for p in ctx.candidates if p.pci_vendor and not p.experimental})
        return [fail("driver", f"no accelerator found: no card nodes (looked for {ctx.looked_for()}) and no "
                               f"accelerator PCI function of vendor {', '.join(vendors)} (by the profiles' "
                               f"device ids and classes) under "
                               f"{_discover.host_path(ctx.opts.roots.sysfs, '/sys/bus/pci/devices')!r}",
                     "check the cards are seated and powered (`lspci -nn`), install the vendor driver and load "
                     "it (`lsmod`, `dmesg`), then run `xpu-cdi generate`")]
    out = []
    for st in ctx.states:
        name, prof = st.profile.name, st.profile
        where = " or ".join(repr(_discover.host_path(ctx.opts.roots.dev, r.glob)) for r in prof.cards)
        drivers = sorted({d for _a, d in st.pci if d})
        pci = f"{len(st.pci)} accelerator PCI function(s) of vendor {prof.pci_vendor}"
        if not st.nodes and not st.pci:
            out.append(fail("driver", f"{name}: no card nodes ({where}) and no accelerator PCI function of "
                                      f"vendor {prof.pci_vendor or '(unknown)'}",
                            f"check the cards are seated (`lspci -nn`), install and load the {prof.description} "
                            f"driver, {REGEN}"))
        elif not st.nodes:
            bound = f"bound to {', '.join(drivers)}" if drivers else "no driver bound"
            modprobe = f"`modprobe {' or '.join(prof.modules)}`" if prof.modules else "`modprobe`"
            out.append(fail("driver", f"{name}: {pci} ({', '.join(a for a, _d in st.pci)}; {bound}) "
                                      f"but no card nodes ({where})",
                            f"the driver is not loaded or did not create the nodes: load it ({modprobe}, "
                            f"`dmesg` says why it failed), {REGEN}"))
        elif len(st.pci) > len(st.nodes):
            out.append(warn("driver", f"{name}: {len(st.nodes)} card node(s) but {pci}: "
                                      f"{len(st.pci) - len(st.nodes)} card(s) have no node",
                            f"check `dmesg` for the missing card(s) and reload the driver, {REGEN}"))
        else:
            extra = f", {pci}" + (f" bound to {', '.join(drivers)}" if drivers else "") if st.pci else ""
            out.append(ok("driver", f"{name}: {len(st.nodes)} card(s) "
                                    f"[{compress([str(i) for i, _h, _c in st.nodes])}] under "
                                    f"{ctx.opts.roots.dev!r}{extra}"))
    return out


def proc_devices(proc_root: str) -> Optional[Dict[int, str]]:
    """Character-device majors -> driver names from ``<proc_root>/proc/devices``; None if unreadable."""
    try:
        with open(_discover.host_path(proc_root, "/proc/devices")) as f:
            text = f.read(65536)
    except OSError:
        return None
    out: Dict[int, str] = {}
    for line in text.split("Block devices:")[0].splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0].isdigit():
            out.setdefault(int(parts[0]), parts[1].strip())
    return out


def _control_paths(st: ProfileState, ctx: Context) -> Tuple[List[str], List[str], List[str]]:
    """(present host paths, missing required rules, missing optional rules) of the control nodes."""
    present: List[str] = []
    missing: List[str] = []
    optional: List[str] = []
    for rule in st.profile.control_nodes:
        if rule.when and not _discover.node_kind(_discover.host_path(ctx.opts.roots.dev, rule.when)):
            continue  # a product's nodes (310B's), not this host's
        found: List[str] = []
        for alt in rule.paths:
            hp = _discover.host_path(ctx.opts.roots.dev, alt)
            found = sorted(_glob.glob(hp)) if any(c in alt for c in "*?[") else \
                ([hp] if os.path.lexists(hp) else [])
            if found:
                break
        what = " or ".join(repr(_discover.host_path(ctx.opts.roots.dev, p)) for p in rule.paths)
        if found:
            present += found
        else:
            (optional if rule.optional else missing).append(what)
    return present, missing, optional


def _nodes(st: ProfileState, ctx: Context) -> List[Tuple[str, hoststat.Row]]:
    paths = [h for _i, h, _c in st.nodes] + _control_paths(st, ctx)[0]
    return list(zip(paths, hoststat.stat_nodes(paths)))


def check_nodes(ctx: Context) -> List[Result]:
    """device-nodes: every card and control node is a character device whose major the kernel knows."""
    majors = proc_devices(ctx.opts.proc_root)
    out = []
    for st in ctx.states:
        if not st.nodes:
            continue
        bad, unregistered, used = [], [], {}
        for path, (err, typ, major, _minor, _mode, _uid, _gid) in _nodes(st, ctx):
            if err:
                bad.append(f"{path!r}: {os.strerror(err)}")
            elif typ != "c":
                bad.append(f"{path!r} is {_KINDS.get(typ, 'a block device')}, not a character device")
            elif majors is not None and major not in majors:
                unregistered.append(f"{path!r} (major {major})")
            else:
                used[major] = majors.get(major, "?") if majors is not None else "?"
        name = st.profile.name
        if bad:
            out.append(fail("device-nodes", f"{name}: {'; '.join(bad)}",
                            "remove the bogus entries and reload the driver so it recreates the nodes (a bind "
                            f"mount of a missing path or a copy made them), {REGEN}"))
        if unregistered:
            out.append(fail("device-nodes", f"{name}: no character driver in "
                                            f"{_discover.host_path(ctx.opts.proc_root, '/proc/devices')!r} "
                                            f"owns {', '.join(unregistered)}",
                            "the nodes are left from an earlier driver load (majors are dynamic): reload the "
                            f"driver or recreate the nodes (`udevadm trigger`), {REGEN}"))
        if majors is None:
            out.append(warn("device-nodes", f"{name}: cannot read "
                                            f"{_discover.host_path(ctx.opts.proc_root, '/proc/devices')!r}: "
                                            f"majors not verified", "pass --proc-root where proc is mounted"))
        elif not bad and not unregistered:
            regs = ", ".join(f"{m} ({n})" for m, n in sorted(used.items()))
            out.append(ok("device-nodes", f"{name}: all nodes are character devices; major(s) {regs} "
                                          f"registered in /proc/devices"))
    return out


def check_permissions(ctx: Context) -> List[Result]:
    """device-permissions: root-owned nodes that any container user may open."""
    out = []
    for st in ctx.states:
        closed, owners, narrow = [], [], []
        for path, (err, typ, _maj, _min, mode, uid, gid) in _nodes(st, ctx):
            if err or typ not in ("c", "b"):
                continue  # device-nodes reports these
            if mode & 0o600 != 0o600:
                closed.append(f"{path!r} mode {mode:04o}")
            elif mode & 0o006 != 0o006:
                narrow.append(f"{path!r} mode {mode:04o} gid {gid}")
            if uid != 0:
                owners.append(f"{path!r} uid {uid}")
        name = st.profile.name
        if closed:
            out.append(fail("device-permissions", f"{name}: even the owner cannot open {', '.join(closed)}",
                            "chmod 0666 the nodes (a udev rule MODE=\"0666\" keeps it across reboots), "
                            f"{REGEN} (the spec copies the mode)"))
        if st.profile.driver_owned_nodes and (narrow or owners) and not closed:
            out.append(ok("device-permissions", f"{name}: nodes owned by the driver's run user, by the driver's "
                                                f"design: {_owner_names(ctx, st)}",
                          "run container workloads as that user or give them the group "
                          "(securityContext.runAsUser / supplementalGroups); the specs carry the nodes' owner, "
                          "group and mode, so the container sees them as the host does"))
            continue
        if narrow:
            out.append(warn("device-permissions", f"{name}: {', '.join(narrow)}: containers running as a "
                                                  f"non-root user outside that group get 'permission denied'",
                            "make the nodes 0666 with a udev rule (MODE=\"0666\") and regenerate the spec, or "
                            "give such pods the group (securityContext.supplementalGroups)"))
        if owners:
            out.append(warn("device-permissions", f"{name}: not owned by root: {', '.join(owners)}",
                            "chown root the nodes (or fix the udev rule that sets OWNER): that user can "
                            "change their mode for every container"))
        if st.nodes and not (closed or narrow or owners):
            out.append(ok("device-permissions", f"{name}: all nodes root-owned and readable/writable by "
                                                f"every container user"))
    return out


def _id_names(path: str) -> Dict[int, str]:
    """uid or gid -> name from a passwd/group file (under the driver root; the host's own on a real host)."""
    out: Dict[int, str] = {}
    try:
        with open(path) as f:
            for line in f.read(1 << 20).splitlines():
                parts = line.split(":")
                if len(parts) > 2 and parts[2].isdigit():
                    out.setdefault(int(parts[2]), parts[0])
    except OSError:
        pass
    return out


def _owner_names(ctx: Context, st: ProfileState) -> str:
    """``a container user needs uid 1000 (HwHiAiUser) or group 1000 (HwHiAiUser)`` for the profile's nodes."""
    users = _id_names(_discover.host_path(ctx.opts.roots.driver, "/etc/passwd"))
    groups = _id_names(_discover.host_path(ctx.opts.roots.driver, "/etc/group"))
    pairs = sorted({(uid, gid, mode) for _p, (err, typ, _a, _b, mode, uid, gid) in _nodes(st, ctx)
                    if not err and typ in ("c", "b")})
    parts = [f"mode {mode:04o}: a container user needs uid {uid} ({users.get(uid, '?')}) or group {gid} "
             f"({groups.get(gid, '?')})" for uid, gid, mode in pairs if mode & 0o006 != 0o006]
    return "; ".join(dict.fromkeys(parts)) or "every container user may open them"


def check_dev_char(ctx: Context) -> List[Result]:
    """dev-char: /dev/char/<major>:<minor> points at every card and control node.

    runc's systemd cgroup driver turns device rules into paths through these
    links; without them a ``systemctl daemon-reload`` or a driver reload
    silently takes device access away from running containers.
    """
    out = []
    base = _discover.host_path(ctx.opts.roots.dev, "/dev/char")
    for st in ctx.states:
        if not st.nodes:
            continue
        missing = []
        for path, (err, typ, major, minor, _m, _u, _g) in _nodes(st, ctx):
            if err or typ != "c":
                continue
            link = os.path.join(base, f"{major}:{minor}")
            if not os.path.exists(link) or os.path.realpath(link) != os.path.realpath(path):
                missing.append(f"{major}:{minor} ({_shown(ctx, path)})")
        name = st.profile.name
        if missing:
            out.append(warn("dev-char", f"{name}: no /dev/char link for {', '.join(missing)}: with runc's systemd "
                                        f"cgroup driver, containers lose these devices after a daemon-reload or a "
                                        f"driver reload",
                            "run `xpu-cdi system create-dev-char-symlinks` (the refresh service and the package's "
                            "udev rule keep them after a driver reload)"))
        else:
            out.append(ok("dev-char", f"{name}: /dev/char links present for every card and control node"))
    return out


def _shown(ctx: Context, path: str) -> str:
    root = ctx.opts.roots.dev
    return path if root in ("", "/") else "/" + os.path.relpath(path, root)


def check_control(ctx: Context) -> List[Result]:
    """control-nodes: the nodes every container of a profile needs."""
    out = []
    for st in ctx.states:
        if not st.nodes or not st.profile.control_nodes:
            continue
        present, missing, optional = _control_paths(st, ctx)
        name = st.profile.name
        if missing:
            out.append(fail("control-nodes", f"{name}: {', '.join(missing)} missing: every container using a "
                                             f"card needs it, or the vendor library sees 0 cards",
                            f"reload the driver so it creates the control node(s), {REGEN}"))
        else:
            skipped = f"; optional not present: {', '.join(optional)}" if optional else ""
            shown = [p if ctx.opts.roots.dev in ("", "/") else "/" + os.path.relpath(p, ctx.opts.roots.dev)
                     for p in present]
            out.append(ok("control-nodes", f"{name}: {', '.join(shown) or 'none needed'}{skipped}"))
    return out
