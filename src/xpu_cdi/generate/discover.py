"""Find a profile's cards, control nodes and driver files on a host.

Everything is looked up under three roots so that the same code runs
against a fake host tree in tests: device nodes under ``dev_root``, driver
files under ``driver_root`` and sysfs under ``<sysfs_root>/sys``.  Node
numbers come from the resolver (C) in one batch per profile.
"""

from __future__ import annotations

import glob as _glob
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .. import resolver
from ..errors import DiscoveryError
from ..model import Card, DeviceNode, HostView, Mount, NodeInfo, Profile

_TYPE_NAMES = {"-": "a regular file", "d": "a directory", "?": "not a device node"}


@dataclass(frozen=True)
class Roots:
    """Where the host's /dev, driver files and /sys are (``/`` on a real host)."""

    dev: str = "/"
    driver: str = "/"
    sysfs: str = "/"


def host_path(root: str, path: str) -> str:
    """*path* (absolute, as on a host) under *root*."""
    return path if root in ("", "/") else os.path.join(root, path.lstrip("/"))


def _container_path(root: str, hostp: str) -> str:
    if root in ("", "/"):
        return hostp
    return "/" + os.path.relpath(hostp, root)


def _has_magic(path: str) -> bool:
    return any(c in path for c in "*?[")


def _resolve(paths: Sequence[str], profile: Profile) -> List[NodeInfo]:
    infos = []
    for path, row in zip(paths, resolver.stat_nodes(paths)):
        err, typ, major, minor, mode, uid, gid = row
        if err:
            raise DiscoveryError(f"profile {profile.name!r}: cannot stat {path!r}: {os.strerror(err)}")
        if typ not in ("c", "b"):
            raise DiscoveryError(f"profile {profile.name!r}: {path!r} is {_TYPE_NAMES.get(typ, typ)}, "
                                 f"not a device node: check the driver or the profile's globs")
        infos.append(NodeInfo(path, typ, major, minor, mode, uid, gid))
    return infos


def _find_cards(profile: Profile, roots: Roots) -> List[Tuple[int, str, str]]:
    """(index, host path, container path) of every card node, sorted by index."""
    found: Dict[int, Tuple[int, str, str]] = {}
    for rule in profile.cards:
        rx = re.compile(rule.index_regex)
        for hostp in sorted(_glob.glob(host_path(roots.dev, rule.glob))):
            rel = _container_path(roots.dev, hostp)
            m = rx.match(rel)
            if not m:
                continue
            group = m.group("index") if "index" in rx.groupindex else m.group(1)
            index = int(group) - rule.index_base
            if index < 0:
                continue
            cpath = rule.container_path.format(index=index) if rule.container_path else rel
            if index in found:
                raise DiscoveryError(f"profile {profile.name!r}: {found[index][1]!r} and {hostp!r} "
                                     f"both claim card index {index}: remove one layout from the profile")
            found[index] = (index, hostp, cpath)
    return [found[i] for i in sorted(found)]


def _pci_vendor(sysfs_root: str, pci: str) -> Optional[str]:
    """The PCI vendor id (``0x1d22``) of a device, or None when unreadable."""
    if sysfs_root in ("", "/"):
        try:  # on a real host ask udev, which also knows hot-plugged devices
            import pyudev

            dev = pyudev.Devices.from_name(pyudev.Context(), "pci", pci)
            value = dev.attributes.get("vendor")
            return value.decode().strip() if value else None
        except Exception:  # noqa: BLE001 - udev is a convenience; sysfs below is the truth
            pass
    try:
        with open(host_path(sysfs_root, f"/sys/bus/pci/devices/{pci}/vendor")) as f:
            return f.read(16).strip()
    except OSError:
        return None


def _control_nodes(profile: Profile, roots: Roots, notes: List[str]) -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    for rule in profile.control_nodes:
        matches: List[str] = []
        for alt in rule.paths:
            hp = host_path(roots.dev, alt)
            matches = sorted(_glob.glob(hp)) if _has_magic(alt) else ([hp] if os.path.lexists(hp) else [])
            if matches:
                break
        if not matches:
            what = " or ".join(repr(p) for p in rule.paths)
            if rule.optional:
                notes.append(f"optional node {what} not present: skipped")
                continue
            raise DiscoveryError(f"profile {profile.name!r}: control node {what} not found under "
                                 f"{roots.dev!r}; every container using a card needs it: "
                                 f"is the driver fully loaded?")
        for hp in matches:
            cpath = rule.container_path if (rule.container_path and len(matches) == 1) \
                else _container_path(roots.dev, hp)
            out.append((hp, cpath))
    return out


def _mounts(profile: Profile, roots: Roots, notes: List[str]) -> List[Mount]:
    mounts = []
    for rule in profile.mounts:
        hp = host_path(roots.driver, rule.path)
        if not os.path.exists(hp):
            if rule.required:
                raise DiscoveryError(f"profile {profile.name!r}: required driver path {hp!r} is missing: "
                                     f"install the driver's user-space package")
            notes.append(f"driver path {hp!r} not present: not mounted")
            continue
        mounts.append(Mount(hp, rule.container_path or rule.path))
    return mounts


def discover(profile: Profile, roots: Roots = Roots(), auto: bool = False) -> Optional[HostView]:
    """Find what *profile* needs on the host.

    Args:
        profile: the vendor profile.
        roots: where /dev, driver files and /sys are.
        auto: ``--profile auto``: a profile whose cards are absent, or whose
            cards belong to another PCI vendor, yields ``None`` instead of an error.

    Returns:
        A :class:`HostView`, or ``None`` in auto mode when the profile does not apply.

    Raises:
        DiscoveryError: no cards (unless auto), a non-device match, a missing
            control node or required mount, or two nodes with one index.
    """
    cards_found = _find_cards(profile, roots)
    if not cards_found:
        if auto:
            return None
        where = ", ".join(repr(host_path(roots.dev, r.glob)) for r in profile.cards)
        raise DiscoveryError(f"profile {profile.name!r}: no cards found (looked for {where}): "
                             f"is the driver installed and loaded?")
    infos = _resolve([h for _, h, _ in cards_found], profile)
    cards = []
    for (index, _hp, cpath), info in zip(cards_found, infos):
        pci, numa = resolver.pci_of(roots.sysfs, info.major, info.minor) if info.type == "c" else (None, None)
        if auto and pci and profile.pci_vendor:
            vendor = _pci_vendor(roots.sysfs, pci)
            if vendor and vendor.lower() != profile.pci_vendor:
                return None  # another vendor's node matched a generic glob (/dev/dri/renderD*)
        cards.append(Card(index=index, nodes=(DeviceNode(cpath, info),), pci=pci, numa_node=numa))
    notes: List[str] = []
    control = _control_nodes(profile, roots, notes)
    shared = tuple(DeviceNode(cpath, info)
                   for (_h, cpath), info in zip(control, _resolve([h for h, _ in control], profile)))
    mounts = _mounts(profile, roots, notes)
    libdirs = tuple(d for d in profile.library_dirs if os.path.isdir(host_path(roots.driver, d)))
    return HostView(profile=profile, cards=tuple(cards), shared_nodes=shared, mounts=tuple(mounts),
                    library_dirs=libdirs, notes=tuple(notes))


def discover_all(profiles: Sequence[Profile], roots: Roots = Roots(), auto: bool = True) -> List[HostView]:
    """Discover every profile; in auto mode, keep those whose cards are present.

    Raises:
        DiscoveryError: nothing found at all, naming where it looked.
    """
    views = []
    for prof in profiles:
        view = discover(prof, roots, auto=auto)
        if view is not None:
            views.append(view)
    if not views:
        looked = ", ".join(sorted({host_path(roots.dev, r.glob) for p in profiles for r in p.cards}))
        raise DiscoveryError(f"no accelerator cards found under {roots.dev!r} (looked for {looked}): "
                             f"is the driver installed and loaded? (`xpu-cdi doctor` checks the chain)")
    return views
