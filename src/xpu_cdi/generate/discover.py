"""Find a profile's cards, control nodes and driver files on a host.

Everything is looked up under three roots so that the same code runs
against a fake host tree in tests: device nodes under ``dev_root``, driver
files under ``driver_root`` and sysfs under ``<sysfs_root>/sys``.  Node
numbers come from hoststat (C) in one batch per profile.

A real ``/dev`` holds more than card nodes: udev's ``by-path/`` directories
and their symlinks, a BMC's ``/dev/dri/card0``, another vendor's render
node under a shared name.  Such matches are skipped one by one, each with a
note, so that one odd entry never costs the host its specs.
"""

from __future__ import annotations

import glob as _glob
import os
import re
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from .. import hoststat
from ..errors import DiscoveryError
from ..model import Card, CardRule, DeviceNode, Discovery, HostView, Mount, Profile
from . import companions as _companions
from ..hostfs import Roots, container_path, has_magic, host_path, node_kind, not_a_node, stat_all

__all__ = ["Roots", "card_matches", "discover", "discover_all", "host_path", "node_kind", "pci_vendor"]

def card_matches(profile: Profile, roots: Roots) -> Iterator[Tuple[int, str, str, CardRule]]:
    """(index, host path, container path, rule) of every path the card rules match, whatever it is."""
    for rule in profile.cards:
        rx = re.compile(rule.index_regex)
        for hostp in sorted(_glob.glob(host_path(roots.dev, rule.glob))):
            rel = container_path(roots.dev, hostp)
            m = rx.match(rel)
            if not m:
                continue
            group = m.group("index") if "index" in rx.groupindex else m.group(1)
            index = int(group) - rule.index_base
            if index >= 0:
                yield index, hostp, rule.container_path.format(index=index) if rule.container_path else rel, rule


def _find_cards(profile: Profile, roots: Roots,
                skipped: List[Tuple[str, str]]) -> List[Tuple[int, str, str, CardRule]]:
    """(index, host path, container path, rule) of every card node, sorted by index.

    Matches that are not device nodes land in *skipped* as (kind, note).
    """
    found: Dict[int, Tuple[int, str, str, CardRule]] = {}
    for index, hostp, cpath, rule in card_matches(profile, roots):
        kind = node_kind(hostp)
        if kind not in ("c", "b"):
            skipped.append((kind, not_a_node(container_path(roots.dev, hostp), kind)))
            continue
        if index in found:
            raise DiscoveryError(f"profile {profile.name!r}: {found[index][1]!r} and {hostp!r} "
                                 f"both claim card index {index}: remove one layout from the profile")
        found[index] = (index, hostp, cpath, rule)
    return [found[i] for i in sorted(found)]


def pci_vendor(sysfs_root: str, pci: str) -> Optional[str]:
    """The PCI vendor id (``0x1d22``) of a device from sysfs, or None when unreadable."""
    try:
        with open(host_path(sysfs_root, f"/sys/bus/pci/devices/{pci}/vendor")) as f:
            return f.read(16).strip().lower()
    except OSError:
        return None


def _foreign(profile: Profile, rule: CardRule, rel: str, pci: Optional[str], roots: Roots) -> str:
    """Why a card node is not this profile's card (a note), or ``""`` when it is."""
    if not profile.pci_vendor:
        return ""
    vendor = pci_vendor(roots.sysfs, pci) if pci else None
    if vendor and vendor != profile.pci_vendor.lower():
        return f"{rel!r} belongs to PCI device {pci} of vendor {vendor}, not {profile.pci_vendor}: skipped"
    if rule.require_pci_vendor and not vendor:
        return (f"{rel!r} has no PCI function of vendor {profile.pci_vendor} in sysfs, and its name is "
                f"generic (other vendors' drivers use it too): skipped")
    return ""


def _control_nodes(profile: Profile, roots: Roots, notes: List[str]) -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    for rule in profile.control_nodes:
        if rule.when and not node_kind(host_path(roots.dev, rule.when)):
            continue
        matches: List[str] = []
        for alt in rule.paths:
            hp = host_path(roots.dev, alt)
            matches = sorted(_glob.glob(hp)) if has_magic(alt) else ([hp] if os.path.lexists(hp) else [])
            if matches:
                break
        what = " or ".join(repr(p) for p in rule.paths)
        if not matches:
            if rule.optional:
                notes.append(f"optional node {what} not present: skipped")
                continue
            raise DiscoveryError(f"profile {profile.name!r}: control node {what} not found under "
                                 f"{roots.dev!r}; every container using a card needs it: "
                                 f"is the driver fully loaded?")
        nodes = []
        for hp in matches:
            kind = node_kind(hp)
            if kind == "l" and not has_magic(alt):
                kind = node_kind(os.path.realpath(hp))  # a named control node may be a udev alias
            if kind in ("c", "b"):
                nodes.append(hp)
            else:
                notes.append(not_a_node(container_path(roots.dev, hp), kind))
        if not nodes and not rule.optional:
            raise DiscoveryError(f"profile {profile.name!r}: control node {what} under {roots.dev!r} is not a "
                                 f"device node: remove the stray entry and reload the driver")
        for hp in nodes:
            cpath = rule.container_path if (rule.container_path and len(nodes) == 1) \
                else container_path(roots.dev, hp)
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


def _no_cards(profile: Profile, roots: Roots, notes: Sequence[str]) -> DiscoveryError:
    where = ", ".join(repr(host_path(roots.dev, r.glob)) for r in profile.cards)
    skipped = f"; skipped: {'; '.join(notes)}" if notes else ""
    return DiscoveryError(f"profile {profile.name!r}: no cards found (looked for {where}){skipped}: "
                          f"is the driver installed and loaded?")


def discover(profile: Profile, roots: Roots = Roots(), auto: bool = False) -> Optional[HostView]:
    """Find what *profile* needs on the host.

    Args:
        profile: the vendor profile.
        roots: where /dev, driver files and /sys are.
        auto: ``--profile auto``: a profile whose cards are absent, or all
            belong to another PCI vendor, yields ``None`` instead of an error.

    Returns:
        A :class:`HostView`, or ``None`` in auto mode when the profile does not apply.

    Raises:
        DiscoveryError: no cards (unless auto), only non-device matches, a
            missing control node, required companion or mount, or two nodes
            with one index.
    """
    skipped: List[Tuple[str, str]] = []
    found = _find_cards(profile, roots, skipped)
    notes = [n for _k, n in skipped]
    infos = stat_all([h for _i, h, _c, _r in found], profile)
    cards: List[Card] = []
    pci_of: Dict[int, Tuple[Optional[str], Optional[int]]] = {}
    for (index, _hp, cpath, rule), info in zip(found, infos):
        pci, numa = hoststat.pci_of(roots.sysfs, info.major, info.minor) if info.type == "c" else (None, None)
        why = _foreign(profile, rule, container_path(roots.dev, info.path), pci, roots)
        if why:
            skipped.append(("foreign", why))
            notes.append(why)
            continue
        pci_of[index] = (pci, numa)
        cards.append(Card(index=index, nodes=(DeviceNode(cpath, info),), pci=pci, numa_node=numa))
    if not cards:
        if auto and all(k == "foreign" for k, _n in skipped):
            return None  # nothing here is this profile's (or only another vendor's nodes)
        raise _no_cards(profile, roots, notes)
    rules = {i: r for i, _h, _c, r in found}
    cards = _companions.attach(profile, cards, rules, roots, notes)
    control = _control_nodes(profile, roots, notes)
    shared = tuple(DeviceNode(cpath, info)
                   for (_h, cpath), info in zip(control, stat_all([h for h, _ in control], profile)))
    mounts = _mounts(profile, roots, notes)
    libdirs = tuple(d for d in profile.library_dirs if os.path.isdir(host_path(roots.driver, d)))
    return HostView(profile=profile, cards=tuple(cards), shared_nodes=shared, mounts=tuple(mounts),
                    library_dirs=libdirs, notes=tuple(notes))


def discover_all(profiles: Sequence[Profile], roots: Roots = Roots(), auto: bool = True) -> Discovery:
    """Discover every profile; in auto mode, keep those whose cards are present.

    In auto mode a profile that fails is reported in :attr:`Discovery.failures`
    (one line each, with the fix) and skipped: the others still get specs.
    Outside auto mode the first failure is raised.

    Raises:
        DiscoveryError: nothing found and nothing failed, naming where it
            looked; or any failure outside auto mode.
    """
    views, failures = [], []
    for prof in profiles:
        try:
            view = discover(prof, roots, auto=auto)
        except DiscoveryError as err:
            if not auto:
                raise
            failures.append((prof.name, str(err)))
            continue
        if view is not None:
            views.append(view)
    if not views and not failures:
        looked = ", ".join(sorted({host_path(roots.dev, r.glob) for p in profiles for r in p.cards}))
        raise DiscoveryError(f"no accelerator cards found under {roots.dev!r} (looked for {looked}): "
                             f"is the driver installed and loaded? (`xpu-cdi doctor` checks the chain)")
    return Discovery(tuple(views), tuple(failures))
