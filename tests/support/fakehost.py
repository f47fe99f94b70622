"""Fake host trees for tests: real character-device nodes (mknod, unused
majors 240-243, so that a write through a cgroup-allowed node gives ENXIO
and a denied one EPERM), driver files, and a sysfs PCI tree shaped like a
real server.

The shapes follow the published layouts of docs/vendors.md: class devices
with a ``device`` link to their PCI function only where the driver
registers one (Ascend's davinciN have none), every PCI function under
``/sys/bus/pci/devices`` with its vendor, device and class, udev's
``/dev/dri/by-path`` directory, a BMC's VGA as ``/dev/dri/card0``, other
PCI functions of the same vendor (NICs, chipset), the versioned XRE behind
the ``/usr/local/xpu`` symlink and driver-owned 0660 nodes.  Each builder
says which real host it imitates.  Node numbers differ from the real
drivers' (majors are dynamic there anyway: discovery stats every node).

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
DRI_MAJOR = 242  # stands in for DRM's 226, so that no real GPU driver is ever opened
ACC_MAJOR = 243  # the other vendors' card nodes
CTRL_MINOR = 200  # control nodes share the card major, far from card minors
XRE_VERSION = "5.0.21"
DRIVER_UID = DRIVER_GID = 1000  # HwHiAiUser of an Ascend host


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


def _pci_device(root: Path, chain: List[str], vendor: str, device: str, numa: int,
                cls: str = "0x120000") -> Path:
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
    write(d / "class", cls + "\n")
    return d


def _class_dev(root: Path, pci_dir: Optional[Path], cls: str, name: str, major: int, minor: int) -> None:
    """sysfs class device <pci_dir>/<cls>/<name> with the dev/char link and 'device' link.

    ``pci_dir=None``: a device the driver registered without a parent
    (``device_create(class, NULL, ...)``): it lives under
    ``/sys/devices/virtual/<cls>/`` and has no ``device`` link.
    """
    cdir = (pci_dir / cls / name) if pci_dir is not None else root / "sys/devices/virtual" / cls / name
    cdir.mkdir(parents=True, exist_ok=True)
    write(cdir / "dev", f"{major}:{minor}\n")
    if pci_dir is not None:
        _rel_symlink(cdir / "device", pci_dir)
    _rel_symlink(root / "sys" / "dev" / "char" / f"{major}:{minor}", cdir)


def dev_char(root: Path, path: str, major: int, minor: int) -> None:
    """udev's /dev/char/<major>:<minor> link to a node (runc's systemd driver needs it)."""
    _rel_symlink(root / "dev" / "char" / f"{major}:{minor}", root / path.lstrip("/"))


def dev_char_all(host: "FakeHost") -> None:
    """/dev/char links for every node of *host*, as udev makes them."""
    for p, (major, minor) in host.nodes.items():
        if not (host.root / "dev" / "char" / f"{major}:{minor}").is_symlink():
            dev_char(host.root, p, major, minor)


def pci_function(root: Path, addr: str, vendor: str, device: str, cls: str, numa: int = 0,
                 domain: str = "pci0000:00") -> Path:
    """A PCI function on a root bus (NIC, BMC VGA, chipset): its sysfs dir."""
    return _pci_device(root, [domain, addr], vendor, device, numa, cls)


def drm_card(host: "FakeHost", pci_dir: Path, card: int, render: Optional[int]) -> None:
    """The DRI nodes of one PCI function: /dev/dri/card<card> (and renderD<render>),
    their class devices under <pci_dir>/drm/ and udev's /dev/dri/by-path links."""
    addr = pci_dir.name
    for name, minor, tag in (("card%d" % card, card, "card"),
                             *((("renderD%d" % render, render, "render"),) if render is not None else ())):
        mknod(host.path(f"/dev/dri/{name}"), DRI_MAJOR, minor)
        host.nodes[f"/dev/dri/{name}"] = (DRI_MAJOR, minor)
        _class_dev(host.root, pci_dir, "drm", name, DRI_MAJOR, minor)
        _rel_symlink(host.path(f"/dev/dri/by-path/pci-{addr}-{tag}"), host.path(f"/dev/dri/{name}"))


def bmc_vga(host: "FakeHost", vendor: str = "0x1a03", device: str = "0x2000", addr: str = "0000:02:00.0") -> None:
    """A BMC's VGA (ASPEED 0x1a03:2000, or Huawei iBMC 0x19e5:1711): /dev/dri/card0, no render node."""
    pci = pci_function(host.root, addr, vendor, device, "0x030000")
    drm_card(host, pci, 0, None)


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
        write(root / "proc/xpu/version", f"{XRE_VERSION}\n")
    for i in range(cards):
        mknod(host.path(f"/dev/xpu{i}"), XPU_MAJOR, i)
        host.nodes[f"/dev/xpu{i}"] = (XPU_MAJOR, i)
    if ctrl:
        mknod(host.path("/dev/xpuctrl"), XPU_MAJOR, CTRL_MINOR)
        host.nodes["/dev/xpuctrl"] = (XPU_MAJOR, CTRL_MINOR)
    if driver:  # install_rt.sh: /usr/local/xpu-<version>, /usr/local/xpu a symlink to it
        xre = f"/usr/local/xpu-{XRE_VERSION}"
        write(host.path(f"{xre}/lib64/libxpuml.so.1"), "fake libxpuml\n", 0o755)
        write(host.path(f"{xre}/version"), f"version:{XRE_VERSION}\n")
        os.symlink(os.path.basename(xre), host.path("/usr/local/xpu"))
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


def hccn_conf(cards: int, subnet: int = 1, skip: Tuple[int, ...] = ()) -> str:
    """/etc/hccn.conf as ``hccn_tool -i <id> -ip -s address A netmask M`` and ``-gateway -s`` /
    ``-netdetect -s`` leave it on a server (a block of lines per NPU, ``key_<phy id>=value``; the
    layout of Huawei's CANN docs, "rank table" device_ip, and of hixl's own test file): NPU i at
    192.168.<subnet>.<10+i>/24, gateway and netdetect .1; *skip* leaves NPUs unconfigured."""
    out = []
    for i in range(cards):
        if i in skip:
            continue
        out += [f"address_{i}=192.168.{subnet}.{10 + i}", f"netmask_{i}=255.255.255.0",
                f"netdetect_{i}=192.168.{subnet}.1", f"gateway_{i}=192.168.{subnet}.1", f"send_arp_status_{i}=1"]
    return "\n".join(out) + "\n"


def ascend(root: Path, cards: int = 4, sysfs: bool = True, driver: bool = True,
           manager: bool = True, proc: bool = True, owner: Optional[Tuple[int, int]] = None,
           parent: bool = False, pci_device: str = "0xd802", hccn: bool = False) -> FakeHost:
    """An Atlas 800-style Ascend 910B host: /dev/davinci0..N-1 plus the manager
    nodes and driver tree.

    ``owner``: make the nodes 0660 owned by that (uid, gid), as the driver
    does for its run user (HwHiAiUser).  The NPUs are PCI functions
    0x19e5:d802, but the driver registers davinciN with no parent device:
    ``parent=True`` adds the ``device`` link a real host does not have.
    ``pci_device``: another model's id (``0xd500``: an Atlas 300I Pro's 310P, ``0xd801``: a 910).
    ``hccn``: the NPUs' RoCE addresses in /etc/hccn.conf (:func:`hccn_conf`), as on a training server.
    """
    host = FakeHost(root, "ascend", list(range(cards)))
    if proc:
        proc_devices(root, {NPU_MAJOR: "devdrv-cdev"})
    mode = 0o660 if owner else 0o666
    for i in range(cards):
        mknod(host.path(f"/dev/davinci{i}"), NPU_MAJOR, i, mode)
        host.nodes[f"/dev/davinci{i}"] = (NPU_MAJOR, i)
    ctrl = ["/dev/devmm_svm", "/dev/hisi_hdc"] + (["/dev/davinci_manager"] if manager else [])
    for n, p in enumerate(ctrl):
        mknod(host.path(p), NPU_MAJOR, CTRL_MINOR + n, mode)
        host.nodes[p] = (NPU_MAJOR, CTRL_MINOR + n)
    if owner:
        for p in host.nodes:
            os.chown(host.path(p), *owner)
        write(host.path("/etc/ascend_install.info"),
              "UserName=HwHiAiUser\nUserGroup=HwHiAiUser\nDriver_Install_Path_Param=/usr/local/Ascend\n")
        write(host.path("/etc/passwd"), f"root:x:0:0:root:/root:/bin/sh\n"
                                        f"HwHiAiUser:x:{owner[0]}:{owner[1]}::/home/HwHiAiUser:/bin/sh\n")
        write(host.path("/etc/group"), f"root:x:0:\nHwHiAiUser:x:{owner[1]}:\n")
    if driver:
        base = "/usr/local/Ascend/driver"
        write(host.path(f"{base}/lib64/common/libc_sec.so"), "fake\n", 0o755)
        write(host.path(f"{base}/lib64/driver/libascend_hal.so"), "fake hal\n", 0o755)
        write(host.path(f"{base}/include/dsmi_common_interface.h"), "/* fake */\n")
        write(host.path(f"{base}/version.info"), "Version=24.1.rc2\n")
        write(host.path("/usr/local/dcmi/dcmi_interface_api.h"), "/* fake */\n")
        write(host.path("/usr/local/bin/npu-smi"), "#!/bin/sh\necho fake npu-smi\n", 0o755)
    if hccn:
        write(host.path("/etc/hccn.conf"), hccn_conf(cards))
    if sysfs:
        for i in range(cards):
            card = f"0000:{0xc1 + i:02x}:00.0"
            pci_dir = _pci_device(root, ["pci0000:00", f"0000:00:{0x10 + i:02x}.0", card], "0x19e5", pci_device, 0)
            _class_dev(root, pci_dir if parent else None, "devdrv-class", f"davinci{i}", NPU_MAJOR, i)
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


# --- whole hosts, one per vendor, each imitating a published layout --------------------------

def kunpeng_nics(root: Path) -> None:
    """The Huawei PCI functions of every Kunpeng server that are not NPUs:
    four Hi1822 NIC functions (19e5:1822, class 0x0200), the SAS HBA
    (19e5:a222, 0x0107) and the iBMC VGA (19e5:1711, with its /dev/dri/card0)."""
    for n in range(4):
        pci_function(root, f"0000:{0x81 + n:02x}:00.0", "0x19e5", "0x1822", "0x020000", 1, "pci0000:80")
    pci_function(root, "0000:74:02.0", "0x19e5", "0xa222", "0x010700", 0, "pci0000:74")
    host = FakeHost(root, "ascend", [])
    bmc_vga(host, "0x19e5", "0x1711", "0000:06:00.0")


def kunpeng_npu_server(root: Path, cards: int = 8, dev_char_links: bool = True,
                       pci_device: str = "0xd802") -> FakeHost:
    """An Atlas 800T A2 (Kunpeng 920, 8x 910B): davinciN 0660 owned by
    HwHiAiUser without a sysfs parent, the NPUs as PCI functions 19e5:d802,
    Huawei NICs, SAS HBA and iBMC VGA beside them, udev's /dev/char links,
    the NPUs' RoCE addresses in /etc/hccn.conf.  ``cards=16``: the "A+X"
    module server (two HCCS domains of 8); ``pci_device="0xd801"``: an
    Atlas 800 training server's 910 (two HCCS rings of 4)."""
    host = ascend(root, cards, owner=(DRIVER_UID, DRIVER_GID), pci_device=pci_device, hccn=True)
    kunpeng_nics(root)
    if dev_char_links:
        dev_char_all(host)
    return host


def p800_server(root: Path) -> FakeHost:
    """A Kunlunxin P800 server: 8 cards behind two PCIe switches, the XRE in
    /usr/local/xpu-<ver> behind the /usr/local/xpu symlink, an ASPEED BMC
    (/dev/dri/card0 and udev's by-path dir) and a Kunlunxin storage
    function (1d22:1380, class 0x0180) that is not a card."""
    host = kunlunxin(root, 8)
    bmc_vga(host)
    pci_function(root, "0000:05:00.0", "0x1d22", "0x1380", "0x018000")
    dev_char_all(host)
    return host


def atlas200i_soc(root: Path) -> FakeHost:
    """An Atlas 200I A2 / 310B SoC board: one davinci0, davinci_manager_docker
    (mounted as davinci_manager), the SoC's media and system nodes, no
    devmm_svm or hisi_hdc, npu-smi in /usr/local/sbin."""
    host = FakeHost(root, "ascend", [0])
    proc_devices(root, {NPU_MAJOR: "devdrv-cdev"})
    mknod(host.path("/dev/davinci0"), NPU_MAJOR, 0)
    host.nodes["/dev/davinci0"] = (NPU_MAJOR, 0)
    extra = ["davinci_manager_docker", "svm0", "ts_aisle", "upgrade", "sys", "vdec", "vpc", "pngd", "venc",
             "log_drv", "event_sched"]
    for n, name in enumerate(extra):
        mknod(host.path(f"/dev/{name}"), NPU_MAJOR, CTRL_MINOR + n)
        host.nodes[f"/dev/{name}"] = (NPU_MAJOR, CTRL_MINOR + n)
    write(host.path("/usr/local/Ascend/driver/lib64/driver/libascend_hal.so"), "fake hal\n", 0o755)
    write(host.path("/usr/local/sbin/npu-smi"), "#!/bin/sh\n", 0o755)
    return host


CAMBRICON_PER_CARD = ("cambricon_ipcm{i}", "commu{i}", "cambr-msgq:{i}", "cambr-rpc:{i}", "cmsg_ctrl{i}")


def cambricon_host(root: Path, cards: int = 4, ctl: bool = False) -> FakeHost:
    """An MLU370 server: cambricon_dev<N> with the five per-card nodes of the
    vendor plugin, cambricon_ctl only when ``ctl``, cnmon, and the host's own
    neuware (which must never be mounted over the image's)."""
    host = FakeHost(root, "cambricon", list(range(cards)))
    for i in range(cards):
        names = ["cambricon_dev{i}", *CAMBRICON_PER_CARD]
        for k, name in enumerate(names):
            p = "/dev/" + name.format(i=i)
            mknod(host.path(p), ACC_MAJOR, i * 8 + k)
            host.nodes[p] = (ACC_MAJOR, i * 8 + k)
    if ctl:
        mknod(host.path("/dev/cambricon_ctl"), ACC_MAJOR, 250)
        host.nodes["/dev/cambricon_ctl"] = (ACC_MAJOR, 250)
    write(host.path("/usr/bin/cnmon"), "#!/bin/sh\n", 0o755)
    write(host.path("/usr/local/neuware/lib64/libcnrt.so"), "fake\n", 0o755)
    return host


def gaudi_host(root: Path, cards: int = 2, intel_npu: bool = True) -> FakeHost:
    """A Gaudi 2 server with an accel-era driver: /dev/accel/accel<N> and its
    accel_controlD<N> per card (PCI 1da3:1020), plus an Intel NPU
    (8086:7d1d) that registered /dev/accel/accel0 first: not a Gaudi card."""
    host = FakeHost(root, "gaudi", [])
    first = 0
    if intel_npu:
        npu = pci_function(root, "0000:00:0b.0", "0x8086", "0x7d1d", "0x120000")
        mknod(host.path("/dev/accel/accel0"), ACC_MAJOR, 0)
        host.nodes["/dev/accel/accel0"] = (ACC_MAJOR, 0)
        _class_dev(root, npu, "accel", "accel0", ACC_MAJOR, 0)
        first = 1
    for n in range(cards):
        i = first + n
        pci = pci_function(root, f"0000:{0x33 + n:02x}:00.0", "0x1da3", "0x1020", "0x120000")
        for name, minor in ((f"accel{i}", i), (f"accel_controlD{i}", 64 + i)):
            mknod(host.path(f"/dev/accel/{name}"), ACC_MAJOR, minor)
            host.nodes[f"/dev/accel/{name}"] = (ACC_MAJOR, minor)
            _class_dev(root, pci, "accel", name, ACC_MAJOR, minor)
        host.cards.append(i)
    return host


def gaudi_legacy_host(root: Path, cards: int = 2) -> FakeHost:
    """A Gaudi host on a pre-accel habanalabs driver: /dev/hl<N> + /dev/hl_controlD<N>."""
    host = FakeHost(root, "gaudi", list(range(cards)))
    for i in range(cards):
        for name, minor in ((f"hl{i}", 2 * i), (f"hl_controlD{i}", 2 * i + 1)):
            mknod(host.path(f"/dev/{name}"), ACC_MAJOR, minor)
            host.nodes[f"/dev/{name}"] = (ACC_MAJOR, minor)
    return host


def dri_gpu_host(root: Path, kind: str, vendor: str, cards: int = 2, card_node: Optional[str] = None,
                 shared: Tuple[str, ...] = (), cls: str = "0x038000", chipset: int = 0) -> FakeHost:
    """A DRI-style accelerator server: an ASPEED BMC takes /dev/dri/card0, so
    card N's DRI nodes are card<N+1> and renderD<128+N>, all under the card's
    PCI function; udev's /dev/dri/by-path is there; ``card_node``
    (``/dev/mtgpu.{i}``) is a vendor node per card with that PCI parent;
    ``chipset`` adds non-accelerator PCI functions of the same vendor."""
    host = FakeHost(root, kind, list(range(cards)))
    bmc_vga(host)
    for i in range(cards):
        pci = pci_function(root, f"0000:{0x41 + i:02x}:00.0", vendor, "0x55b7", cls)
        drm_card(host, pci, i + 1, 128 + i)
        if card_node:
            p = card_node.format(i=i)
            mknod(host.path(p), ACC_MAJOR, i)
            host.nodes[p] = (ACC_MAJOR, i)
            _class_dev(root, pci, kind, os.path.basename(p), ACC_MAJOR, i)
    for n, p in enumerate(shared):
        mknod(host.path(p), ACC_MAJOR, 200 + n)
        host.nodes[p] = (ACC_MAJOR, 200 + n)
    for n in range(chipset):
        pci_function(root, f"0000:00:{0x18 + n:02x}.{n % 8}", vendor, f"0x{0x1450 + n:04x}", "0x060000")
    return host


def hygon_host(root: Path, cards: int = 2) -> FakeHost:
    """A Hygon DCU server (Hygon CPU): the DCUs' card/render pairs, /dev/kfd
    and /dev/mkfd, the HYHAL in /opt/hyhal, an ASPEED BMC, and the CPU's own
    chipset functions of vendor 0x1d94."""
    host = dri_gpu_host(root, "hygon", "0x1d94", cards, shared=("/dev/kfd", "/dev/mkfd"), chipset=6)
    write(host.path("/opt/hyhal/lib/libhsa-runtime64.so"), "fake\n", 0o755)
    return host


def mthreads_host(root: Path, cards: int = 2) -> FakeHost:
    """A Moore Threads S4000 server: /dev/mtgpu.<N> per card and its DRI
    pair under the same PCI function, an ASPEED BMC, mthreads-gmi."""
    host = dri_gpu_host(root, "mthreads", "0x1ed5", cards, card_node="/dev/mtgpu.{i}", cls="0x030200")
    write(host.path("/usr/bin/mthreads-gmi"), "#!/bin/sh\n", 0o755)
    return host


def iluvatar_host(root: Path, boards: int = 1) -> FakeHost:
    """A BI-V150 server on driver >= 4.4: two /dev/iluvatar<N> per board, /dev/itrctl, CoreX SDK."""
    host = FakeHost(root, "iluvatar", list(range(2 * boards)))
    for i in range(2 * boards):
        mknod(host.path(f"/dev/iluvatar{i}"), ACC_MAJOR, i)
        host.nodes[f"/dev/iluvatar{i}"] = (ACC_MAJOR, i)
    mknod(host.path("/dev/itrctl"), ACC_MAJOR, 200)
    host.nodes["/dev/itrctl"] = (ACC_MAJOR, 200)
    write(host.path("/usr/local/corex/lib64/libcuda.so"), "fake\n", 0o755)
    return host



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
