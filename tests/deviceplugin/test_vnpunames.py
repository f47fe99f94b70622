"""Static vNPUs under mind-cluster's resource names (xpu_cdi.deviceplugin.vnpunames): the names, and
the templates learned from the stand-in npu-smi (tests/support/npusmi.py, written from the vendor's
source) on a fake host."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import List

import pytest

from support import fakehost, npusmi
from xpu_cdi import partitions
from xpu_cdi.deviceplugin import naming, vnpunames
from xpu_cdi.node.vnpu import Tool
from xpu_cdi.node.inventory import KindSet, SpecCard

PARTS = partitions.builtin("ascend")
KIND = "huawei.com/npu"


def test_names_follow_mind_cluster() -> None:
    """mind-cluster GetVNPUTypeByTemplate: Ascend310P for 310P, Ascend910 for the whole 910 family."""
    assert vnpunames.resource_name("huawei.com", "310P", "vir02") == "huawei.com/Ascend310P-2c"
    assert vnpunames.resource_name("huawei.com", "310P", "vir04_3c") == "huawei.com/Ascend310P-4c.3cpu"
    assert vnpunames.resource_name("huawei.com", "310P", "vir04_3c_ndvpp") == "huawei.com/Ascend310P-4c.3cpu.ndvpp"
    assert vnpunames.resource_name("huawei.com", "310P", "vir04_4c_dvpp") == "huawei.com/Ascend310P-4c.4cpu.dvpp"
    assert vnpunames.resource_name("huawei.com", "910B3", "vir05_1c_16g") == "huawei.com/Ascend910-5c.1cpu.16g"
    assert vnpunames.resource_name("huawei.com", "910", "vir16") == "huawei.com/Ascend910-16c"
    assert vnpunames.resource_name("huawei.com", "310P", "vir99") is None
    assert vnpunames.resource_name("huawei.com", "310B", "vir02") is None


def test_every_shipped_template_has_a_name() -> None:
    """Each template of the partition data (what the DRA driver makes) has mind-cluster's name."""
    assert PARTS is not None
    unnamed = [(c.model, t) for c in PARTS.chips for t in c.templates
               if vnpunames.resource_name("huawei.com", c.model, t) is None]
    assert unnamed == []


class Host:
    """A fake 310P host with the stand-in npu-smi at <root>/usr/local/bin/npu-smi."""

    def __init__(self, root: Path, chips: int = 2) -> None:
        self.root = root
        (root / "dev").mkdir(parents=True, exist_ok=True)
        self.state = root / "npu-smi.json"
        npusmi.init_state(self.state, [{"card": i, "chip": 0, "name": "310P3"} for i in range(chips)],
                          fakehost.NPU_MAJOR)
        self.path = root / "usr/local/bin/npu-smi"
        npusmi.install(self.path, self.state, root)
        self.calls = 0

    def create(self, card: int, template: str, vnpu_id: int) -> None:
        r = subprocess.run([str(self.path), "set", "-t", "create-vnpu", "-i", str(card), "-c", "0", "-f", template,
                            "-v", str(vnpu_id)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout

    def tool(self, name: str) -> Tool:
        assert name == "npu-smi"
        self.calls += 1
        return Tool(str(self.root / "usr/local/bin" / name), str(self.root), timeout=60)


def kindset(ids: List[int]) -> KindSet:
    return KindSet(KIND, "ascend", {str(i): SpecCard(str(i), KIND, (), index=i) for i in ids})


@pytest.mark.privileged  # the stand-in mknods /dev/vdavinci<id>
def test_templates_learned_from_the_tool(host_root: Path) -> None:
    """vir02 and vir04_3c on chip 0, vir02_1c on chip 1 (ids 116+: phy 1's range): each named by its
    template; the tool is asked once, not again while the same vNPUs are there."""
    host = Host(host_root)
    host.create(0, "vir02", 100)
    host.create(0, "vir04_3c", 101)
    host.create(1, "vir02_1c", 116)
    namer = vnpunames.Namer(host.tool)
    ks = kindset([1, 100, 101, 116])
    got, lines = namer.names(ks, PARTS)
    assert got == {"100": "huawei.com/Ascend310P-2c", "101": "huawei.com/Ascend310P-4c.3cpu",
                   "116": "huawei.com/Ascend310P-2c.1cpu"}, lines
    assert lines == []
    calls = host.calls
    assert namer.names(ks, PARTS) == (got, [])
    assert host.calls == calls
    units = naming.split({KIND: ks}, naming.KIND, lambda _n: None, str(host_root), {KIND: got})
    assert {u: list(k.cards) for u, k in units.items()} == {
        KIND: ["1"], "huawei.com/Ascend310P-2c": ["100"], "huawei.com/Ascend310P-4c.3cpu": ["101"],
        "huawei.com/Ascend310P-2c.1cpu": ["116"]}


@pytest.mark.privileged
def test_unknown_template_is_not_offered(host_root: Path) -> None:
    """A vNPU node the tool does not list (made by hand, or by another tool) is left unnamed, saying why;
    with no tool at all, every vNPU is, with the tool's own error."""
    host = Host(host_root)
    host.create(0, "vir02", 100)
    fakehost.mknod(host_root / "dev/vdavinci102", fakehost.NPU_MAJOR, 1102)
    got, lines = vnpunames.Namer(host.tool).names(kindset([100, 102]), PARTS)
    assert got == {"100": "huawei.com/Ascend310P-2c"}
    assert lines == [f"{KIND}=102: vNPU 102 not offered: npu-smi info -t info-vnpu does not list it"]
    host.path.unlink()
    got, lines = vnpunames.Namer(host.tool).names(kindset([100]), PARTS)
    assert got == {}
    assert len(lines) == 1 and lines[0].startswith(f"{KIND}=100: vNPU 100 not offered: its template is unknown: ")
    assert "is not there" in lines[0], lines
