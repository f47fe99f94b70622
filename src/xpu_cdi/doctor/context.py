"""What every check needs: the options, and what is on the host per profile.

Discovery here is forgiving: where ``generate`` stops at the first problem,
the doctor wants to see all of them, so card nodes and PCI devices are
listed without stat'ing, and the full discovery is tried once per profile
with its error kept for the checks that need it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..cdi import registry
from ..errors import DiscoveryError
from ..generate import discover as _discover
from ..generate import profile as _profile
from ..hostfs import listdir_sorted, read_head
from ..model import HostView, Profile
from ..runtime import containerd, crio, docker, ocihooks

Version = Tuple[int, ...]
DEFAULT_HOOKS_DIRS = ocihooks.READ_HOOKS_DIRS
RUNTIMES = ("containerd", "crio", "docker", "podman")


@dataclass(frozen=True)
class Options:
    """The doctor's command-line options."""

    roots: _discover.Roots = _discover.Roots()
    proc_root: str = "/"
    profiles: Tuple[str, ...] = ()
    profiles_dir: Tuple[str, ...] = _profile.DEFAULT_PROFILE_DIRS
    spec_dirs: Tuple[str, ...] = registry.DEFAULT_DIRS
    containerd_config: str = containerd.DEFAULT_CONFIG
    crio_config: str = crio.DEFAULT_CONFIG
    docker_config: str = docker.DEFAULT_CONFIG
    runtimeclasses: Tuple[str, ...] = ()
    hooks_dirs: Tuple[str, ...] = DEFAULT_HOOKS_DIRS
    runtime_name: str = "xpu"
    # runtime -> release; None: ask the binaries on PATH (``<runtime> --version``)
    versions: Optional[Dict[str, Optional[Version]]] = None
    plugin_dir: str = "/var/lib/kubelet/device-plugins"  # kubelet's; doctor/plugin.py
    plugin_status_file: str = "/run/xpu-cdi/device-plugin.json"  # what `xpu-cdi device-plugin` writes
    node_config: str = "/etc/xpu-cdi/config.yaml"  # nodeconfig.DEFAULT_PATH
    exporter_status_file: str = "/run/xpu-cdi/exporter.json"  # what `xpu-cdi exporter` writes
    dra_run_dir: str = "/run/xpu-cdi"  # where `xpu-cdi dra-driver` writes dra-driver-<pod uid>.json
    pod_resources_socket: str = "/var/lib/kubelet/pod-resources/kubelet.sock"  # who holds the cards: consumers


@dataclass
class ProfileState:
    """What the host has for one profile."""

    profile: Profile
    nodes: List[Tuple[int, str, str]]  # (index, host path, container path) of each card node
    pci: List[Tuple[str, Optional[str]]]  # (address, bound driver) of the profile's accelerator functions
    view: Optional[HostView] = None
    error: str = ""  # why full discovery failed


@dataclass
class Context:
    """Options plus the host facts shared by several checks."""

    opts: Options
    states: List[ProfileState]
    candidates: List[Profile]  # every profile considered (for "looked for ..." messages)
    versions: Dict[str, Optional[Version]] = field(default_factory=dict)  # installed runtimes
    cache: Dict[str, Any] = field(default_factory=dict)  # facts several checks read (spec files, configs)

    def looked_for(self) -> str:
        """The card globs of every candidate profile, under the dev root."""
        return ", ".join(sorted({_discover.host_path(self.opts.roots.dev, r.glob)
                                 for p in self.candidates for r in p.cards}))


def card_nodes(profile: Profile, roots: _discover.Roots) -> List[Tuple[int, str, str]]:
    """``(index, host path, container path)`` of every card node of *profile*, by index."""
    found: Dict[int, Tuple[int, str, str]] = {}
    for index, hostp, cpath, _rule in _discover.card_matches(profile, roots):
        found.setdefault(index, (index, hostp, cpath))  # doctor reports duplicates and odd entries itself
    return [found[i] for i in sorted(found)]


def pci_devices(sysfs_root: str) -> List[Tuple[str, str, str, str, Optional[str]]]:
    """``(address, vendor id, device id, class, bound driver)`` of every non-bridge PCI device in sysfs."""
    base = _discover.host_path(sysfs_root, "/sys/bus/pci/devices")
    out = []
    for name in listdir_sorted(base):
        d = os.path.join(base, name)
        vendor = read_head(os.path.join(d, "vendor"), 64).lower()
        pci_class = read_head(os.path.join(d, "class"), 64).lower() if vendor else ""
        if not vendor or pci_class.startswith("0x0604"):
            continue  # bridges carry no cards
        link = os.path.join(d, "driver")
        driver = os.path.basename(os.readlink(link)) if os.path.islink(link) else None
        out.append((name, vendor, read_head(os.path.join(d, "device"), 64).lower(), pci_class, driver))
    return out


def is_accelerator(profile: Profile, vendor: str, device: str, cls: str) -> bool:
    """A PCI function is one of *profile*'s cards by its device id or class, never by vendor alone:
    Huawei's 0x19e5 also makes the NICs, iBMC and SAS controller of every Kunpeng server."""
    if not profile.pci_vendor or vendor != profile.pci_vendor.lower():
        return False
    return device in {d.lower() for d in profile.pci_devices} or \
        any(cls.startswith(c.lower()) for c in profile.pci_classes)


def gather(opts: Options) -> Context:
    """Select the profiles and look at the host once for all checks.

    In auto mode (no ``--profile``) a profile is kept when its card nodes or
    its accelerator PCI functions are present, so "cards in the slots but no
    driver" is still diagnosed.

    Raises:
        ProfileError: an unknown ``--profile`` or a broken profile file.
    """
    explicit = bool(opts.profiles) and list(opts.profiles) != ["auto"]
    candidates = _profile.select(list(opts.profiles) if explicit else None, opts.profiles_dir)
    pci = pci_devices(opts.roots.sysfs)
    states = []
    for prof in candidates:
        nodes = card_nodes(prof, opts.roots)
        mine = [(a, drv) for a, v, dev, cls, drv in pci if is_accelerator(prof, v, dev, cls)]
        if not explicit and not nodes and not mine:
            continue
        if not explicit and not nodes and prof.experimental:
            continue  # PCI ids of experimental profiles are unconfirmed: nodes must speak for them
        state = ProfileState(prof, nodes, mine)
        if nodes:
            try:
                state.view = _discover.discover(prof, opts.roots, auto=not explicit)
            except DiscoveryError as err:
                state.error = str(err)
            if state.view is None and not state.error and not mine:
                continue  # auto: the nodes belong to another vendor's PCI device (/dev/dri/*)
            if state.view is not None:  # another vendor's nodes under a shared name are not ours to check
                own = {c.nodes[0].host.path for c in state.view.cards}
                state.nodes = [n for n in nodes if n[1] in own or _discover.node_kind(n[1]) not in ("c", "b")]
        states.append(state)
    return Context(opts, states, candidates)
