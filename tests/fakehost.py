"""Fake host trees for tests: real character-device nodes (mknod, unused
majors 240/241, so that a write through a cgroup-allowed node gives ENXIO
and a denied one EPERM), driver files, and a sysfs PCI tree shaped like a
real server.

The 8-card Kunlunxin layout imitates a common P800 server: two NUMA nodes,
each with a root port, a PCIe switch (upstream port + 4 downstream ports)
and four cards behind it.  The 4-NPU Ascend layout puts all cards on root
ports of NUMA node 0 (no switch).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

XPU_MAJOR = 240
NPU_MAJOR = 241
CTRL_MINOR = 200  # control nodes share the card major, far from card minors


@dataclass
class FakeHost:
    """A fake host under ``root``: pass ``root`` as dev, driver and sysfs root."""

    root: Path
    kind: str
    cards: List[int]
    nodes: Dict[str, Tuple[int, int]] = field(default_factory=dict)  # container path -> (major, minor)
    pci: Dict[int, str] = field(default_factory=dict)  # card index -> PCI address
    numa: Dict[int, int] = field(default_factory=dict)
    switch: Dict[int, Optional[str]] = field(default_factory=dict)  # card -> switch upstream port
    root_port: Dict[int, Optional[str]] = field(default_factory=dict)  # card -> PCIe root port

    def path(self, p: str) -> Path:
        return self.root / p.lstrip("/")

    @property
    def cli_roots(self) -> List[str]:
        r = str(self.root)
        return ["--dev-root", r, "--driver-root", r, "--sysfs-root", r]

    def remove_card(self, index: int) -> None:
        """Simulate a card disappearing (node removed)."""
        for p, (_maj, _min) in list(self.nodes.items()):
            if p.endswith(f"{self.card_prefix}{index}"):
                self.path(p).unlink()
                del self.nodes[p]
        self.cards.remove(index)

    @property
    def card_prefix(self) -> str:
        return "/dev/xpu" if self.kind == "kunlunxin" else "/dev/davinci"


def mknod(path: Path, major: int, minor: int, mode: int = 0o666) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mknod(path, stat.S_IFCHR | mode, os.makedev(major, minor))
    os.chmod(path, mode)


def write(path: Path, text: str = "", mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.chmod(path, mode)


def _rel_symlink(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(target, link.parent), link)


def _pci_device(root: Path, chain: List[str], vendor: str, device: str, numa: int) -> Path:
    """Create the sysfs dirs of a PCI device at the end of *chain* (domain first)."""
    d = root / "sys" / "devices" / chain[0]
    for addr in chain[1:]:
        d = d / addr
        d.mkdir(parents=True, exist_ok=True)
        write(d / "numa_node", f"{numa}\n")
        bus = root / "sys" / "bus" / "pci" / "devices" / addr
        if not bus.exists():
            _rel_symlink(bus, d)
    write(d / "vendor", vendor + "\n")
    write(d / "device", device + "\n")
    return d


def _class_dev(root: Path, pci_dir: Path, cls: str, name: str, major: int, minor: int) -> None:
    """sysfs class device <pci_dir>/<cls>/<name> with the dev/char link and 'device' link."""
    cdir = pci_dir / cls / name
    cdir.mkdir(parents=True, exist_ok=True)
    write(cdir / "dev", f"{major}:{minor}\n")
    _rel_symlink(cdir / "device", pci_dir)
    _rel_symlink(root / "sys" / "dev" / "char" / f"{major}:{minor}", cdir)


def proc_devices(root: Path, majors: Dict[int, str]) -> None:
    """<root>/proc/devices listing *majors* (plus the usual char drivers) as the kernel does."""
    rows = {1: "mem", 4: "tty", 5: "/dev/tty", 10: "misc", 136: "pts", **majors}
    text = "Character devices:\n" + "".join(f"{m:3d} {n}\n" for m, n in sorted(rows.items()))
    write(root / "proc" / "devices", text + "\nBlock devices:\n  7 loop\n  8 sd\n")


def kunlunxin(root: Path, cards: int = 8, sysfs: bool = True, driver: bool = True,
              ctrl: bool = True, proc: bool = True) -> FakeHost:
    """A Kunlunxin host: /dev/xpu0..N-1, /dev/xpuctrl, XRE in /usr/local/xpu."""
    host = FakeHost(root, "kunlunxin", list(range(cards)))
    if proc:
        proc_devices(root, {XPU_MAJOR: "xpu"})
    for i in range(cards):
        mknod(host.path(f"/dev/xpu{i}"), XPU_MAJOR, i)
        host.nodes[f"/dev/xpu{i}"] = (XPU_MAJOR, i)
    if ctrl:
        mknod(host.path("/dev/xpuctrl"), XPU_MAJOR, CTRL_MINOR)
        host.nodes["/dev/xpuctrl"] = (XPU_MAJOR, CTRL_MINOR)
    if driver:
        write(host.path("/usr/local/xpu/lib64/libxpuml.so.1"), "fake libxpuml\n", 0o755)
        write(host.path("/usr/local/xpu/version.txt"), "XRE 5.0.21\n")
        write(host.path("/usr/local/bin/xpu-smi"), "#!/bin/sh\necho fake xpu-smi\n", 0o755)
    if sysfs:
        per_switch = max(1, (cards + 1) // 2)
        for i in range(cards):
            group = i // per_switch  # 0 or 1: NUMA node, root port and switch
            domain = "pci0000:00" if group == 0 else "pci0000:80"
            bus0 = 0x00 if group == 0 else 0x80
            root_port = f"0000:{bus0:02x}:01.0"
            upstream = f"0000:{bus0 + 1:02x}:00.0"
            downstream = f"0000:{bus0 + 2:02x}:{i % per_switch:02x}.0"
            card = f"0000:{bus0 + 3 + i % per_switch:02x}:00.0"
            pci_dir = _pci_device(root, [domain, root_port, upstream, downstream, card], "0x1d22", "0x3684", group)
            _class_dev(root, pci_dir, "xpu", f"xpu{i}", XPU_MAJOR, i)
            host.pci[i], host.numa[i], host.switch[i] = card, group, upstream
            host.root_port[i] = root_port
    return host


def ascend(root: Path, cards: int = 4, sysfs: bool = True, driver: bool = True,
           manager: bool = True, proc: bool = True) -> FakeHost:
    """An Ascend 910B host: /dev/davinci0..N-1 plus the manager nodes and driver tree."""
    host = FakeHost(root, "ascend", list(range(cards)))
    if proc:
        proc_devices(root, {NPU_MAJOR: "devdrv-cdev"})
    for i in range(cards):
        mknod(host.path(f"/dev/davinci{i}"), NPU_MAJOR, i)
        host.nodes[f"/dev/davinci{i}"] = (NPU_MAJOR, i)
    ctrl = ["/dev/devmm_svm", "/dev/hisi_hdc"] + (["/dev/davinci_manager"] if manager else [])
    for n, p in enumerate(ctrl):
        mknod(host.path(p), NPU_MAJOR, CTRL_MINOR + n)
        host.nodes[p] = (NPU_MAJOR, CTRL_MINOR + n)
    if driver:
        base = "/usr/local/Ascend/driver"
        write(host.path(f"{base}/lib64/common/libc_sec.so"), "fake\n", 0o755)
        write(host.path(f"{base}/lib64/driver/libascend_hal.so"), "fake hal\n", 0o755)
        write(host.path(f"{base}/include/dsmi_common_interface.h"), "/* fake */\n")
        write(host.path(f"{base}/version.info"), "Version=24.1.rc2\n")
        write(host.path("/usr/local/dcmi/dcmi_interface_api.h"), "/* fake */\n")
        write(host.path("/usr/local/bin/npu-smi"), "#!/bin/sh\necho fake npu-smi\n", 0o755)
    if sysfs:
        for i in range(cards):
            card = f"0000:{0xc1 + i:02x}:00.0"
            pci_dir = _pci_device(root, ["pci0000:00", f"0000:00:{0x10 + i:02x}.0", card], "0x19e5", "0xd802", 0)
            _class_dev(root, pci_dir, "devdrv-class", f"davinci{i}", NPU_MAJOR, i)
            host.pci[i], host.numa[i], host.switch[i] = card, 0, None
            host.root_port[i] = f"0000:00:{0x10 + i:02x}.0"
    return host


def xpu_layout(root: Path, layout: List[Tuple[int, int, Optional[int]]], proc: bool = True) -> FakeHost:
    """A Kunlunxin host with a custom PCIe tree, one ``(numa node, root port, switch)`` per card.

    Cards with equal triples share one switch (upstream port + a downstream
    port each); ``switch=None`` puts the card straight on its root port.
    Every card reports a x16 16.0 GT/s link (see :func:`set_link`).
    """
    host = kunlunxin(root, cards=len(layout), sysfs=False, proc=proc)
    next_bus: Dict[int, int] = {}
    ports: Dict[Tuple[int, int], str] = {}
    switches: Dict[Tuple[int, int, int], Tuple[str, int, List[int]]] = {}
    for i, (numa, rp, sw) in enumerate(layout):
        root_bus = numa * 0x40
        bus = next_bus.setdefault(numa, root_bus + 1)
        root_port = ports.setdefault((numa, rp), f"0000:{root_bus:02x}:{rp + 1:02x}.0")
        chain = [f"pci0000:{root_bus:02x}", root_port]
        if sw is not None:
            if (numa, rp, sw) not in switches:
                switches[(numa, rp, sw)] = (f"0000:{bus:02x}:00.0", bus + 1, [])
                bus += 2
            upstream, down_bus, members = switches[(numa, rp, sw)]
            chain += [upstream, f"0000:{down_bus:02x}:{len(members):02x}.0"]
            members.append(i)
            host.switch[i] = upstream
        else:
            host.switch[i] = None
        card = f"0000:{bus:02x}:00.0"
        next_bus[numa] = bus + 1
        pci_dir = _pci_device(root, chain + [card], "0x1d22", "0x3684", numa)
        _class_dev(root, pci_dir, "xpu", f"xpu{i}", XPU_MAJOR, i)
        host.pci[i], host.numa[i], host.root_port[i] = card, numa, root_port
        set_link(host, i)
    return host


def set_link(host: FakeHost, index: int, width: int = 16, max_width: int = 16,
             speed: str = "16.0 GT/s PCIe", max_speed: str = "16.0 GT/s PCIe") -> None:
    """Write the PCIe link attributes sysfs shows for card *index*."""
    d = host.root / "sys" / "bus" / "pci" / "devices" / host.pci[index]
    for name, value in (("current_link_width", width), ("max_link_width", max_width),
                        ("current_link_speed", speed), ("max_link_speed", max_speed)):
        write(d / name, f"{value}\n")


def remove_tree(root: Path) -> None:
    """Remove a fake host (device nodes included) even if parts are read-only."""
    if root.exists():
        for dirpath, dirnames, _files in os.walk(root):
            for d in dirnames:
                p = os.path.join(dirpath, d)
                if not os.path.islink(p):
                    os.chmod(p, 0o755)
        shutil.rmtree(root, ignore_errors=True)


def nodes_json(host: FakeHost) -> str:
    """The node numbers of a host, for debugging failed tests."""
    return json.dumps(host.nodes, indent=1, sort_keys=True)
