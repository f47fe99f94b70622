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
        assert rc == 0 and out, out
        return out

    def refused(self, *argv: str, status: int = npusmi.NOT_SUPPORT) -> List[str]:
        """The lines of a refusal exiting *status*; nothing changed by it."""
        before, nodes = self.state.read_text(), self.nodes()
        rc, out = self.run(*argv)
        assert rc == status, (rc, out)
        assert self.state.read_text() == before and self.nodes() == nodes
        return out

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


CREATE = ("set", "-t", "create-vnpu", "-i", "0", "-c", "0")


def test_create_query_destroy(p310: Host) -> None:
    """vir02 with no -v: the chip's first id, its node made, npucli's success lines (tab, 30-wide name);
    info-vnpu shows it and what is left; destroy removes both."""
    assert p310.ok(*CREATE, "-f", "vir02") == [f"\t{'Status':<30} : OK", f"\t{'Message':<30} : Create vnpu success"]
    assert p310.vnpus() == [(100, "vir02")]
    assert p310.nodes() == {"vdavinci100": (fakehost.NPU_MAJOR, npusmi.MINOR_BASE + 100)}
    info = "\n".join(p310.ok("info", "-t", "info-vnpu", "-i", "0", "-c", "0"))
    assert "Total number of vnpu: 1" in info
    row = next(ln for ln in info.splitlines() if "vir02" in ln)
    assert [c.strip() for c in row.strip("|").split("|")] == ["100", "0", "000000000000", "0", "vir02"], row
    values = info.splitlines()[6].strip("| ").split()
    # AI cores, memory GB, AI CPUs, VPC, VENC, VDEC, JPEGD, JPEGE free/total (DCMI's vir02 row)
    assert values[:8] == ["6/8", "18/24", "5/7", "9/12", "2/3", "9/12", "12/16", "6/8"], info
    out = p310.ok("set", "-t", "destroy-vnpu", "-i", "0", "-c", "0", "-v", "100")
    assert [ln.strip() for ln in out] == [f"{'Status':<30} : OK", f"{'Message':<30} : Destroy vnpu 100 success"]
    assert p310.vnpus() == [] and p310.nodes() == {}


def test_given_id_and_the_chips_range(p310: Host) -> None:
    """-v inside [phy*16+100, phy*16+107]; 4294967295 means none given; an id outside the chip's range or
    taken is the driver's refusal (one line)."""
    p310.ok("set", "-t", "create-vnpu", "-i", "1", "-c", "0", "-f", "vir04", "-v", "118")
    p310.ok("set", "-t", "create-vnpu", "-i", "1", "-c", "0", "-f", "vir01", "-v", "4294967295")
    assert p310.vnpus(1) == [(118, "vir04"), (116, "vir01")]
    assert set(p310.nodes()) == {"vdavinci118", "vdavinci116"}
    for vid in ("118", "99", "108"):
        assert p310.refused(*CREATE, "-f", "vir01", "-v", vid, status=npusmi.INNER_ERR) == ["create vnpu failed."]


@pytest.mark.parametrize("made,refused,line", [
    (["vir04"], "vir04", "Insufficient number of AICPU available, unallocated AICPU number:3."),
    (["vir01"] * 7, "vir01", "Insufficient number of AICPU available, unallocated AICPU number:0."),
    (["vir04", "vir04_3c"], "vir01", "Insufficient number of cores available, unallocated cores number:0.000000."),
    (["vir02"], "vir04_4c_dvpp", "Insufficient number of DVPP available, unallocated DVPP number:"),
    (["vir04_4c_dvpp"], "vir02_1c", "Insufficient number of DVPP available, unallocated DVPP number:"),
])
def test_every_budget_checked_before_creating(p310: Host, made: List[str], refused: str, line: str) -> None:
    """check_create_vnpu_param: AI cores, AI CPUs, media engines, each a one-line shortfall (DVPP adds the
    free counts) and exit 217, nothing made."""
    for t in made:
        p310.ok(*CREATE, "-f", t)
    out = p310.refused(*CREATE, "-f", refused)
    assert out[0] == line, out
    if "DVPP" in line:
        assert len(out) == 2 and out[1].startswith("VPC:") and out[1].endswith("."), out


@pytest.mark.parametrize("combo", [["vir04", "vir04_3c"], ["vir04", "vir02", "vir02_1c"], ["vir01"] * 7,
                                   ["vir04_3c_ndvpp", "vir04_4c_dvpp"], ["vir02"] * 3 + ["vir02_1c"]])
def test_the_vendors_combinations_fit(p310: Host, combo: List[str]) -> None:
    """MC's recommended mixes (vir04+vir04_3c, vir04+vir02+vir02_1c) and others within every budget."""
    for t in combo:
        p310.ok(*CREATE, "-f", t)
    assert [t for _i, t in p310.vnpus()] == combo


def test_one_line_refusals(p310: Host) -> None:
    """Unknown template (check_vdev_template_param), missing -f, unknown -v on destroy: their lines and
    exit 215; an unknown chip refused."""
    assert p310.refused(*CREATE, "-f", "vir16", status=npusmi.INVALID_PARAMETER) == ["Error parameter of -f"]
    assert p310.refused(*CREATE, status=npusmi.INVALID_PARAMETER) == ["Must input parameter of -f."]
    assert p310.refused("set", "-t", "destroy-vnpu", "-i", "0", "-c", "0", "-v", "105",
                        status=npusmi.INVALID_PARAMETER) == ["Error parameter of -v."]
    p310.refused("set", "-t", "create-vnpu", "-i", "7", "-c", "0", "-f", "vir01", status=npusmi.INVALID_PARAMETER)


def test_vm_mode_refuses_with_exit_0(p310: Host) -> None:
    """In VM vnpu-mode create prints print_vnpu_mode_check_result's line and returns NPU_OK: exit 0,
    no Status line, nothing made."""
    p310.ok("set", "-t", "vnpu-mode", "-d", "1")
    assert p310.refused(*CREATE, "-f", "vir02", status=0) == [
        "The vnpu is not in docker mode, does not support setting create-vnpu."]
    assert p310.vnpus() == []


def test_vir01_pairs_share_a_vgroup(p310: Host) -> None:
    """At most 4 vGroups: two vir01 share one; -g names a group, one in use or out of range is the
    driver's refusal."""
    for _ in range(2):
        p310.ok(*CREATE, "-f", "vir02")
    p310.ok(*CREATE, "-f", "vir01")
    p310.ok(*CREATE, "-f", "vir01", "-g", "2")
    groups = [v["vgroup"] for v in json.loads(p310.state.read_text())["chips"][0]["vnpus"]]
    assert groups == [0, 1, 2, 2]
    assert p310.refused(*CREATE, "-f", "vir01", "-g", "0", status=npusmi.INNER_ERR) == ["create vnpu failed."]
    assert p310.refused(*CREATE, "-f", "vir01", "-g", "4", status=npusmi.INNER_ERR) == ["create vnpu failed."]


def test_memory_is_the_drivers_check(host_root: Path) -> None:
    """A 910B4 reporting 16 GiB: two vir05_1c_8g (DCMI: 7168 MB each) fit, a third passes npucli's checks
    and the driver refuses it; no vGroups there."""
    h = Host(host_root, [{"card": 0, "chip": 0, "name": "910B4", "memory_mib": 16384}])
    h.ok(*CREATE, "-f", "vir05_1c_8g")
    h.ok(*CREATE, "-f", "vir05_1c_8g")
    assert h.refused(*CREATE, "-f", "vir05_1c_8g", status=npusmi.INNER_ERR) == ["create vnpu failed."]
    assert h.refused(*CREATE, "-f", "vir05_1c_8g", "-g", "0", status=npusmi.INNER_ERR) == ["create vnpu failed."]
    row = next(ln for ln in h.ok("info", "-t", "info-vnpu", "-i", "0", "-c", "0") if "vir05_1c_8g" in ln)
    assert row.strip("|").split("|")[1].strip() == "NA"  # no vGroup printed for the training series


def test_chip_map_layouts(host_root: Path) -> None:
    """info -m: print_mapping_info's tab and 30-wide columns, ``Ascend <name>``, an Mcu row per card; the
    910_93 form adds Chip Phy-ID (the bare name); phyid-remap maps a phy id to card and chip."""
    chips = [{"card": 0, "chip": 0, "name": "310P3", "phy_id": 2, "logic_id": 0},
             {"card": 0, "chip": 1, "name": "310P3", "phy_id": 3, "logic_id": 1}]
    h = Host(host_root, chips)
    assert h.ok("info", "-m") == [
        "\t" + " ".join(f"{x:<30}" for x in ("NPU ID", "Chip ID", "Chip Logic ID", "Chip Name")),
        "\t" + " ".join(f"{x:<30}" for x in (0, 0, 0)) + " Ascend 310P3",
        "\t" + " ".join(f"{x:<30}" for x in (0, 1, 1)) + " Ascend 310P3",
        "\t" + " ".join(f"{x:<30}" for x in ("0", "2", "-", "Mcu"))]
    assert [ln.split(":") for ln in h.ok("info", "-t", "phyid-remap", "-p", "3")] == [
        [f"\t{'Chip Physical ID':<30}", "3"], [f"\t{'Chip Logic ID':<30}", "1"], [f"\t{'NPU ID':<30}", "0"],
        [f"\t{'Chip ID':<30}", "1"]]
    assert h.refused("info", "-t", "phyid-remap", "-p", "0", status=npusmi.INVALID_PARAMETER) == []
    # the vNPU ids follow the phy id, not the logic id
    h.ok("set", "-t", "create-vnpu", "-i", "0", "-c", "1", "-f", "vir02")
    assert h.vnpus(1) == [(3 * 16 + 100, "vir02")]
    npusmi.init_state(h.state, chips, fakehost.NPU_MAJOR, phy_column=True)
    out = h.ok("info", "-m")
    assert out[0].split() == ["NPU", "ID", "Chip", "ID", "Chip", "Logic", "ID", "Chip", "Phy-ID", "Chip", "Name"]
    assert out[2] == "\t" + " ".join(f"{x:<30}" for x in (0, 1, 1, 3)) + " 310P3"
    assert out[3] == "\t" + " ".join(f"{x:<30}" for x in ("0", "2", "-", "-", "Mcu"))


def test_destroy_refused_while_held_open(p310: Host) -> None:
    """A process holding the node (an O_PATH fd: the fake node has no driver to open) makes it in use:
    the driver's one-line refusal; info-vnpu says so; closed, the destroy goes through."""
    p310.ok(*CREATE, "-f", "vir02", "-v", "101")
    fd = os.open(p310.root / "dev" / "vdavinci101", os.O_PATH)
    try:
        assert p310.refused("set", "-t", "destroy-vnpu", "-i", "0", "-c", "0", "-v", "101",
                            status=npusmi.INNER_ERR) == ["destroy vnpu 101 failed."]
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
    assert p310.refused("set", "-t", "vnpu-mode", "-d", "2", status=npusmi.INVALID_PARAMETER) == [
        "Error parameter of -d"]


def test_no_state_file(tmp_path: Path) -> None:
    env = {**os.environ, "NPU_SMI_STATE": str(tmp_path / "absent.json")}
    r = subprocess.run([str(TOOL), "info", "-t", "vnpu-mode"], capture_output=True, text=True, env=env)
    assert r.returncode == npusmi.INNER_ERR and "names no state file" in r.stdout


def test_concurrent_creates_serialise(p310: Host) -> None:
    """Ten vir01 creates at once on a chip of 7 AI CPUs: exactly 7 succeed, with distinct ids and a node
    each, the rest refused for AI CPUs; the state is whole and no temporary file is left."""
    env = {**os.environ, "NPU_SMI_STATE": str(p310.state), "NPU_SMI_DEV_ROOT": str(p310.root)}
    procs = [subprocess.Popen([sys.executable, str(TOOL), *CREATE, "-f", "vir01"], stdout=subprocess.PIPE, text=True,
                              env=env) for _ in range(10)]
    codes = [p.wait(timeout=60) for p in procs]
    for p in procs:
        p.stdout.close()  # type: ignore[union-attr]
    assert sorted(codes) == [0] * 7 + [npusmi.NOT_SUPPORT] * 3, codes
    ids = sorted(i for i, _t in p310.vnpus())
    assert ids == list(range(100, 107))
    assert sorted(p310.nodes()) == sorted(f"vdavinci{i}" for i in ids)
    assert not [p for p in p310.root.iterdir() if p.name.endswith(".tmp")]


def test_installed_tool_needs_no_env(p310: Host) -> None:
    """install(): an npu-smi a driver can run with an empty environment and a fixed argv."""
    tool = p310.root / "usr/local/bin/npu-smi"
    npusmi.install(tool, p310.state, p310.root)
    r = subprocess.run([str(tool), *CREATE, "-f", "vir04"], capture_output=True, text=True, env={}, timeout=60)
    assert r.returncode == 0 and "Create vnpu success" in r.stdout, (r.stdout, r.stderr)
    assert p310.vnpus() == [(100, "vir04")] and set(p310.nodes()) == {"vdavinci100"}
