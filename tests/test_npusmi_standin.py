"""The stand-in ``npu-smi`` (tests/support/npusmi.py), run as a program as a driver would run it:
each documented command, each refusal (nothing made or changed by one), the nodes it makes and
removes, and concurrent calls serialised by its lock."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from support import fakehost
from support import npusmi

pytestmark = pytest.mark.privileged  # mknod of the vdavinci nodes

TOOL = Path(npusmi.__file__)


class Host:
    """A fake Ascend host for the stand-in: its dev root and state file."""

    def __init__(self, root: Path, chips: List[Dict]) -> None:
        self.root, self.state = root, root / "npu-smi.json"
        (root / "dev").mkdir(parents=True)
        for c in chips:  # the chips' own nodes, as a real host has them
            fakehost.mknod(root / "dev" / f"davinci{c.get('phy_id', chips.index(c))}", fakehost.NPU_MAJOR,
                           c.get("phy_id", chips.index(c)))
        npusmi.init_state(self.state, chips, fakehost.NPU_MAJOR)

    def run(self, *argv: str) -> Tuple[int, List[str]]:
        env = {**os.environ, "NPU_SMI_STATE": str(self.state), "NPU_SMI_DEV_ROOT": str(self.root)}
        r = subprocess.run([str(TOOL), *argv], capture_output=True, text=True, env=env, timeout=60)
        assert not r.stderr, r.stderr
        return r.returncode, r.stdout.splitlines()

    def ok(self, *argv: str) -> List[str]:
        rc, out = self.run(*argv)
        assert rc == 0 and out and "Status : Error" not in out[0], out
        return out

    def refused(self, *argv: str) -> str:
        """The Message of a refusal; nothing changed by it."""
        before, nodes = self.state.read_text(), self.nodes()
        rc, out = self.run(*argv)
        assert rc == 1 and [ln.split(":")[0].strip() for ln in out] == ["Status", "Message"], out
        assert out[0].split(":", 1)[1].strip() == "Error", out
        assert self.state.read_text() == before and self.nodes() == nodes
        return out[1].split(":", 1)[1].strip()

    def nodes(self) -> Dict[str, Tuple[int, int]]:
        out = {}
        for p in (self.root / "dev").glob("vdavinci*"):
            st = p.lstat()
            assert stat.S_ISCHR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o666, p
            out[p.name] = (os.major(st.st_rdev), os.minor(st.st_rdev))
        return out

    def vnpus(self, chip: int = 0) -> List[Tuple[int, str]]:
        return [(v["id"], v["template"]) for v in json.loads(self.state.read_text())["chips"][chip]["vnpus"]]


@pytest.fixture
def p310(host_root: Path) -> Host:
    """One Atlas 300I Pro style card: a 310P3 chip of 24 GiB, physical id 0, and a second card's chip (phy 1)."""
    return Host(host_root, [{"card": 0, "chip": 0, "name": "310P3", "memory_mib": 24576},
                            {"card": 1, "chip": 0, "name": "310P3", "memory_mib": 24576}])


def test_create_query_destroy(p310: Host) -> None:
    """vir02 with no -v: the chip's first id, its node made; info-vnpu shows it and what is left; destroy
    removes both."""
    out = p310.ok("set", "-t", "create-vnpu", "-i", "0", "-c", "0", "-f", "vir02")
    assert [ln.strip() for ln in out] == ["Status : OK", "Message : Create vnpu success"]
    assert p310.vnpus() == [(100, "vir02")]
    assert p310.nodes() == {"vdavinci100": (fakehost.NPU_MAJOR, npusmi.MINOR_BASE + 100)}
    info = "\n".join(p310.ok("info", "-t", "info-vnpu", "-i", "0", "-c", "0"))
    assert "Total number of vnpu: 1" in info
    row = next(ln for ln in info.splitlines() if "vir02" in ln)
    assert [c.strip() for c in row.strip("|").split("|")] == ["100", "0", "000000000000", "0", "vir02"], row
    values = info.splitlines()[6].strip("| ").split()
    assert values[:3] == ["6/8", "18/24", "5/7"], info  # AI cores, memory GB, AI CPUs free/total
    out = p310.ok("set", "-t", "destroy-vnpu", "-i", "0", "-c", "0", "-v", "100")
    assert [ln.strip() for ln in out] == ["Status : OK", "Message : Destroy vnpu 100 success"]
    assert p310.vnpus() == [] and p310.nodes() == {}


def test_given_id_and_the_chips_range(p310: Host) -> None:
    """-v inside [phy*16+100, phy*16+107]; 4294967295 means none given; the other chip's range is its own."""
    p310.ok("set", "-t", "create-vnpu", "-i", "1", "-c", "0", "-f", "vir04", "-v", "118")
    p310.ok("set", "-t", "create-vnpu", "-i", "1", "-c", "0", "-f", "vir01", "-v", "4294967295")
    assert p310.vnpus(1) == [(118, "vir04"), (116, "vir01")]
    assert set(p310.nodes()) == {"vdavinci118", "vdavinci116"}
    assert "out of range [100, 107]" in p310.refused("set", "-t", "create-vnpu", "-i", "0", "-c", "0", "-f",
                                                     "vir01", "-v", "118")


def test_refusals(p310: Host) -> None:
    create = ("set", "-t", "create-vnpu", "-i", "0", "-c", "0")
    assert "not supported on 310P3" in p310.refused(*create, "-f", "vir16")
    assert "device 7 chip 0 does not exist" in p310.refused("set", "-t", "create-vnpu", "-i", "7", "-c", "0",
                                                            "-f", "vir01")
    assert "device 0 chip 1 does not exist" in p310.refused("info", "-t", "info-vnpu", "-i", "0", "-c", "1")
    p310.ok(*create, "-f", "vir04", "-v", "100")
    assert "already used on this server" in p310.refused(*create, "-f", "vir02", "-v", "100")
    assert "out of range" in p310.refused(*create, "-f", "vir02", "-v", "99")
    p310.ok(*create, "-f", "vir04_3c")
    msg = p310.refused(*create, "-f", "vir02")
    assert msg == "Not enough AI cores left on device 0 chip 0: vir02 needs 2, 0 free of 8", msg
    assert "-f (vnpu_config) is required" in p310.refused(*create)
    assert "vnpu 105 does not exist" in p310.refused("set", "-t", "destroy-vnpu", "-i", "0", "-c", "0", "-v", "105")


def test_vir01_pairs_share_a_vgroup(p310: Host) -> None:
    """At most 4 vGroups of at least 2 AI cores: three vir02 and two vir01 fill the chip (the two vir01
    share a group); a third vir01 finds no group; -g names a group."""
    create = ("set", "-t", "create-vnpu", "-i", "0", "-c", "0")
    for _ in range(3):
        p310.ok(*create, "-f", "vir02")
    p310.ok(*create, "-f", "vir01")
    p310.ok(*create, "-f", "vir01", "-g", "3")
    assert "vgroups left" in p310.refused(*create, "-f", "vir01")
    assert "vgroup 0 of device 0 chip 0 is in use" in p310.refused(*create, "-f", "vir01", "-g", "0")
    assert "out of range [0, 3]" in p310.refused("set", "-t", "create-vnpu", "-i", "1", "-c", "0", "-f", "vir01",
                                                 "-g", "4")


def test_memory_runs_out_before_cores(host_root: Path) -> None:
    """A 910B4 reporting 16 GiB: two vir05_1c_8g fit (10 of 20 cores), a third does not; no vgroups there."""
    h = Host(host_root, [{"card": 0, "chip": 0, "name": "910B4", "memory_mib": 16384}])
    create = ("set", "-t", "create-vnpu", "-i", "0", "-c", "0")
    h.ok(*create, "-f", "vir05_1c_8g")
    h.ok(*create, "-f", "vir05_1c_8g")
    assert h.refused(*create, "-f", "vir05_1c_8g").startswith("Not enough memory left on device 0 chip 0")
    assert "vgroup id is not supported on 910B4" in h.refused(*create, "-f", "vir05_1c_8g", "-g", "0")
    row = next(ln for ln in h.ok("info", "-t", "info-vnpu", "-i", "0", "-c", "0") if "vir05_1c_8g" in ln)
    assert row.strip("|").split("|")[1].strip() == "NA"  # no vGroup printed for the training series


def test_destroy_refused_while_held_open(p310: Host) -> None:
    """A process holding the node (an O_PATH fd: the fake node has no driver to open) makes it in use;
    info-vnpu says so; closed, the destroy goes through."""
    p310.ok("set", "-t", "create-vnpu", "-i", "0", "-c", "0", "-f", "vir02", "-v", "101")
    fd = os.open(p310.root / "dev" / "vdavinci101", os.O_PATH)
    try:
        assert "is in use" in p310.refused("set", "-t", "destroy-vnpu", "-i", "0", "-c", "0", "-v", "101")
        row = next(ln for ln in p310.ok("info", "-t", "info-vnpu", "-i", "0", "-c", "0") if "vir02" in ln)
        assert row.strip("|").split("|")[3].strip() == "1", row
    finally:
        os.close(fd)
    p310.ok("set", "-t", "destroy-vnpu", "-i", "0", "-c", "0", "-v", "101")
    assert p310.nodes() == {}


def test_modes(p310: Host) -> None:
    assert [ln.strip() for ln in p310.ok("info", "-t", "vnpu-mode")] == ["vnpu-mode              : docker"]
    p310.ok("set", "-t", "vnpu-mode", "-d", "1")
    assert p310.ok("info", "-t", "vnpu-mode")[0].endswith(": VM")
    p310.ok("set", "-t", "vnpu-cfg-recover", "-d", "0")
    assert p310.ok("info", "-t", "vnpu-cfg-recover") == ["VNPU config recover mode : Disable"]
    assert "must be 0 or 1" in p310.refused("set", "-t", "vnpu-mode", "-d", "2")


def test_no_state_file(tmp_path: Path) -> None:
    env = {**os.environ, "NPU_SMI_STATE": str(tmp_path / "absent.json")}
    r = subprocess.run([str(TOOL), "info", "-t", "vnpu-mode"], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "names no state file" in r.stdout


def test_concurrent_creates_serialise(p310: Host) -> None:
    """Ten vir01 creates at once on a chip of 8 ids: exactly 8 succeed, with distinct ids and a node each;
    the state is whole and no temporary file is left."""
    env = {**os.environ, "NPU_SMI_STATE": str(p310.state), "NPU_SMI_DEV_ROOT": str(p310.root)}
    procs = [subprocess.Popen([sys.executable, str(TOOL), "set", "-t", "create-vnpu", "-i", "0", "-c", "0", "-f",
                               "vir01"], stdout=subprocess.PIPE, text=True, env=env) for _ in range(10)]
    codes = [p.wait(timeout=60) for p in procs]
    for p in procs:
        p.stdout.close()  # type: ignore[union-attr]
    assert sorted(codes) == [0] * 8 + [1] * 2, codes
    ids = sorted(i for i, _t in p310.vnpus())
    assert ids == list(range(100, 108))
    assert sorted(p310.nodes()) == sorted(f"vdavinci{i}" for i in ids)
    assert not [p for p in p310.root.iterdir() if p.name.endswith(".tmp")]


def test_installed_tool_needs_no_env(p310: Host) -> None:
    """install(): an npu-smi a driver can run with an empty environment and a fixed argv."""
    tool = p310.root / "usr/local/bin/npu-smi"
    npusmi.install(tool, p310.state, p310.root)
    r = subprocess.run([str(tool), "set", "-t", "create-vnpu", "-i", "0", "-c", "0", "-f", "vir04"],
                       capture_output=True, text=True, env={}, timeout=60)
    assert r.returncode == 0 and "Create vnpu success" in r.stdout, (r.stdout, r.stderr)
    assert p310.vnpus() == [(100, "vir04")] and set(p310.nodes()) == {"vdavinci100"}
