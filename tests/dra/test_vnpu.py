"""Ascend vNPU through the DRA driver, against the stand-in npu-smi (tests/support/npusmi.py) on a
fake 310P host: the counters and partitions published, a claim's vNPU made with its claim-scoped
spec and destroyed with it, refusals leaving nothing, the intent undone after a crash, a chip with
a static vNPU carved offered neither whole nor in templates."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest
from click.testing import CliRunner

from support import fakehost, npusmi
from support.fakeapi import FakeKube
from xpu_cdi import log
from xpu_cdi.cli import main
from xpu_cdi.cdi import registry
from xpu_cdi.dra import config
from xpu_cdi.node import checkpoint, claimspec
from xpu_cdi.node.prepared import PreparedClaim, PreparedClaims, PreparedDevice, VNpu

pytestmark = pytest.mark.privileged  # mknod
DRIVER = "huawei.com"
KIND = "huawei.com/npu"
LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class NpuNode:
    """Four 310P chips (one per card), their static spec, the stand-in npu-smi as the node's tool."""

    def __init__(self, root: Path, sockets: Path, static_vnpus: Dict[int, str] = {},
                 chips: Optional[List[Dict[str, Any]]] = None, phy_column: bool = False) -> None:
        self.root = root
        self.host = fakehost.ascend(root, cards=4, pci_device="0xd500")
        self.state = root / "npu-smi.json"
        npusmi.init_state(self.state, chips or [{"card": i, "chip": 0, "name": "310P3"} for i in range(4)],
                          fakehost.NPU_MAJOR, phy_column)
        self.tool = root / "usr/local/bin/npu-smi"  # the default: the data's tool in the driver root
        self.tool.unlink()
        npusmi.install(self.tool, self.state, root)
        for phy, template in static_vnpus.items():  # an admin's, before the spec is written
            self.npu_smi("set", "-t", "create-vnpu", "-i", str(phy), "-c", "0", "-f", template)
        self.spec_dir = root / "cdi"
        res = CliRunner().invoke(main, ["generate", "--profile", "ascend", *self.host.cli_roots,
                                        "--spec-dir", str(self.spec_dir)])
        assert res.exit_code == 0, res.output
        (root / "boot_id").write_text("boot-1\n")
        self.logs: List[str] = []
        r = str(root)
        self.settings = config.Settings(
            node_name="n1", registry_dir=str(sockets / "reg"), plugins_dir=str(sockets / "plugins"),
            run_dir=str(sockets / "run"), pod_uid="pod1", spec_dirs=(str(self.spec_dir),), dev_root=r,
            driver_root=r, sysfs_root=r, node_config=str(root / "config.yaml"),
            boot_id_file=str(root / "boot_id"), health_interval=0.1, profiles=("ascend",))

    def npu_smi(self, *argv: str) -> List[str]:
        r = subprocess.run([str(self.tool), *argv], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout
        return r.stdout.splitlines()

    def vnpus(self) -> Dict[int, str]:
        """vNPU id -> template, as the stand-in holds them."""
        return {v["id"]: v["template"] for c in json.loads(self.state.read_text())["chips"] for v in c["vnpus"]}

    def daemon(self, kube: FakeKube) -> Any:
        from xpu_cdi.dra.daemon import Daemon
        from xpu_cdi.generate import profile as _profile

        d = Daemon(self.settings, log=log.into(self.logs), kube=kube)
        d.profiles = [_profile.load_all()["ascend"]]
        d.ours = {p.kind: p.name for p in d.profiles}
        d.step()
        assert KIND in d.drivers, self.logs
        return d

    def claim_specs(self) -> Dict[str, str]:
        return claimspec.listed(str(self.spec_dir), DRIVER)


@pytest.fixture
def sockets() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def npu(host_root: Path, sockets: Path) -> NpuNode:
    return NpuNode(host_root, sockets)


def result(device: str, request: str = "npu") -> Dict[str, str]:
    return {"request": request, "driver": DRIVER, "pool": "n1", "device": device}


def prepare(d: Any, *claims: tuple) -> Dict[str, Any]:
    return d.drivers[KIND].prepare(claims)


def published(kube: FakeKube) -> Dict[str, Any]:
    devices = {dev["name"]: dev for s in kube.slices.values() for dev in s["spec"].get("devices") or []}
    sets = {c["name"]: c["counters"] for s in kube.slices.values() for c in s["spec"].get("sharedCounters") or []}
    return {"devices": devices, "sets": sets}


def test_counters_and_partitions_published(npu: NpuNode) -> None:
    """Per chip a counter set of every budget npu-smi checks (AI cores, AI CPUs, the media engines) and
    its memory (8 parts: the 310P templates take eighths), the chip consuming all of it, a device per
    template instance that fits (7 vir01, 3 vir02 ..., 1 vir04), each naming its template and chip;
    counters in a slice of their own, at most 64 devices a slice (the API's limits)."""
    kube = FakeKube()
    d = npu.daemon(kube)
    try:
        got = published(kube)
        chip = {k: {"value": v} for k, v in (("aicore", "8"), ("aicpu", "7"), ("jpegd", "16"), ("jpege", "8"),
                                                 ("memory-parts", "8"), ("vdec", "12"), ("venc", "3"), ("vpc", "12"))}
        assert got["sets"] == {f"chip-{i}": chip for i in range(4)}
        devs = got["devices"]
        assert len(devs) == 4 * 21 and all(LABEL.match(n) for n in devs)
        assert devs["2"]["consumesCounters"] == [{"counterSet": "chip-2", "counters": chip}]
        assert devs["2"]["attributes"]["index"] == {"int": 2}
        keys = {frozenset(dev["attributes"]) for dev in devs.values()}  # a selector never meets a missing key
        assert len(keys) == 1 and {"type", "index", "uuid", "template", "parentChip"} <= next(iter(keys)), keys
        assert {k: devs["2"]["attributes"][k] for k in ("type", "template", "parentChip")} == {
            "type": {"string": "chip"}, "template": {"string": ""}, "parentChip": {"string": ""}}
        per = {}
        for n, dev in devs.items():
            if dev["attributes"]["template"]["string"]:
                chip = n.split("-")[0]
                assert dev["attributes"]["parentChip"] == {"string": chip} and dev["attributes"]["type"] == {
                    "string": "vnpu"}
                assert dev["attributes"]["index"] == {"int": int(chip)} and dev["attributes"]["uuid"] == {"string": ""}
                per.setdefault(dev["attributes"]["template"]["string"], []).append(n)
        assert {t: len(v) for t, v in per.items()} == {"vir01": 28, "vir02": 12, "vir02_1c": 16, "vir04": 4,
                                                      "vir04_3c": 8, "vir04_3c_ndvpp": 8, "vir04_4c_dvpp": 4}
        assert devs["1-vir04-3c-ndvpp-1"]["consumesCounters"] == [{"counterSet": "chip-1", "counters": {
            "aicore": {"value": "4"}, "aicpu": {"value": "3"}, "memory-parts": {"value": "4"}}}]  # no media: none
        assert devs["0-vir01-6"]["attributes"]["model"] == {"string": "Ascend310P"}
        for s in kube.slices.values():
            assert not (s["spec"].get("devices") and s["spec"].get("sharedCounters")), s["metadata"]["name"]
            assert len(s["spec"].get("devices") or []) <= 64 and len(s["spec"].get("sharedCounters") or []) <= 8
            assert s["spec"]["pool"]["resourceSliceCount"] == len(kube.slices) == 3
        st = d.drivers[KIND].status()  # what doctor compares with the specs: the cards, by CDI name
        assert st["devices"] == {str(i): f"{KIND}={i}" for i in range(4)} and st["partitions"] == 80, st
    finally:
        d.close()


def test_prepare_makes_the_vnpu_and_its_spec_unprepare_destroys(npu: NpuNode) -> None:
    """vir02 and vir04 on chip 0: each claim gets a vNPU (ids from the chip's range), its own
    spec naming /dev/vdavinci<id> as /dev/davinci<id> with the static spec's control nodes and
    mounts; a second call answers the same without running the tool; unprepare destroys it."""
    kube = FakeKube()
    kube.add_claim("ns", "a", "uid-a", [result("0-vir02-0")])
    kube.add_claim("ns", "b", "uid-b", [result("0-vir04-0")])
    static = {p: p.read_bytes() for p in npu.spec_dir.iterdir()}
    d = npu.daemon(kube)
    try:
        got = prepare(d, ("ns", "a", "uid-a"), ("ns", "b", "uid-b"))
        assert [e for _devs, e in got.values()] == ["", ""], got
        assert npu.vnpus() == {100: "vir02", 101: "vir04"}
        (a,), (b,) = got["uid-a"][0], got["uid-b"][0]
        assert a.cdi == ["k8s.huawei.com/claim=uid-a-vnpu-100"] and a.device == "0-vir02-0"
        assert b.cdi == ["k8s.huawei.com/claim=uid-b-vnpu-101"]
        reg = registry.load([str(npu.spec_dir)])
        nodes = reg.devices[a.cdi[0]].edits["deviceNodes"]
        assert [(n["path"], n["hostPath"], n["major"], n["minor"]) for n in nodes] == \
            [("/dev/davinci100", str(npu.root / "dev/vdavinci100"), fakehost.NPU_MAJOR, 1100)]
        common = reg.devices[a.cdi[0]].spec["containerEdits"]
        assert {n["path"] for n in common["deviceNodes"]} >= {"/dev/davinci_manager", "/dev/devmm_svm",
                                                               "/dev/hisi_hdc"}
        assert any(m["containerPath"] == "/usr/local/dcmi" for m in common["mounts"])
        assert sorted(npu.claim_specs()) == ["uid-a", "uid-b"]
        assert {p: p.read_bytes() for p in npu.spec_dir.iterdir() if p in static} == static
        before = npu.state.read_text()
        assert prepare(d, ("ns", "a", "uid-a"))["uid-a"] == got["uid-a"] and npu.state.read_text() == before
        cp = json.loads(Path(d.drivers[KIND].cp_path).read_text())["claims"]
        assert cp["uid-a"]["devices"][0]["vnpu"] == {"card": 0, "chip": 0, "template": "vir02", "id": 100}
        assert "pending" not in cp["uid-a"]
        assert d.drivers[KIND].unprepare([("ns", "a", "uid-a")]) == {"uid-a": ""}
        assert npu.vnpus() == {101: "vir04"} and not (npu.root / "dev/vdavinci100").exists()
        assert sorted(npu.claim_specs()) == ["uid-b"]
        d.drivers[KIND].unprepare([("ns", "b", "uid-b")])
        assert npu.vnpus() == {} and npu.claim_specs() == {}
        assert any("claim ns/a unprepared (vNPU 100 destroyed)" in line for line in npu.logs), npu.logs
    finally:
        d.close()


def test_tool_refusal_leaves_nothing(npu: NpuNode) -> None:
    """The tool refuses (chip 3's AI cores taken by vNPUs the driver did not make): the claim gets the
    tool's line, and no checkpoint entry, spec or vNPU of it is left."""
    npu.npu_smi("set", "-t", "create-vnpu", "-i", "3", "-c", "0", "-f", "vir04", "-v", "148")
    npu.npu_smi("set", "-t", "create-vnpu", "-i", "3", "-c", "0", "-f", "vir04_3c", "-v", "149")
    kube = FakeKube()
    kube.add_claim("ns", "a", "uid-a", [result("3-vir02-0")])
    d = npu.daemon(kube)
    try:
        (devices, error), = prepare(d, ("ns", "a", "uid-a")).values()
        assert devices == [] and error.endswith(
            ": Insufficient number of cores available, unallocated cores number:0.000000. (exit status 217)"), error
        assert npu.vnpus() == {148: "vir04", 149: "vir04_3c"} and npu.claim_specs() == {}
        assert "uid-a" not in json.loads(Path(d.drivers[KIND].cp_path).read_text())["claims"]
    finally:
        d.close()


def test_crash_between_create_and_spec_is_undone_at_start(npu: NpuNode, host_root: Path) -> None:
    """What a kill -9 after the tool's create leaves (the intent saved as pending, the vNPU made, no
    spec), a claim deleted while the driver was down (its vNPU and spec), and a spec of no claim:
    start-up destroys and removes them all; the half-made claim is then prepared afresh."""
    kube = FakeKube()
    kube.add_claim("ns", "a", "uid-a", [result("1-vir02-0")])
    kube.add_claim("ns", "gone", "uid-g", [result("2-vir04-0")])
    d = npu.daemon(kube)
    path = d.drivers[KIND].cp_path
    assert prepare(d, ("ns", "gone", "uid-g"))["uid-g"][1] == ""
    d.close()
    del kube.claims[("ns", "gone")]
    npu.npu_smi("set", "-t", "create-vnpu", "-i", "1", "-c", "0", "-f", "vir02", "-v", "116")
    cp, _note, _bad = checkpoint.load(path, "boot-1")
    cp.claims["uid-a"] = PreparedClaim("ns", "a", [PreparedDevice(["npu"], "n1", "1-vir02-0", [],
                                                                  vnpu=VNpu(1, 0, "vir02", 116))], pending=True)
    checkpoint.save(path, cp)
    claimspec.write(str(npu.spec_dir), DRIVER, "uid-stray", [("vnpu-999", {"env": ["A=1"]})], {})
    assert npu.vnpus() == {116: "vir02", 132: "vir04"}
    d = npu.daemon(kube)
    try:
        assert npu.vnpus() == {} and npu.claim_specs() == {}, npu.logs
        text = "\n".join(npu.logs)
        assert "claim ns/a (uid-a) was being prepared when the driver stopped: released (vNPU 116 destroyed)" in text
        assert "claim ns/gone (uid-g) is gone from the API: released (vNPU 132 destroyed)" in text
        (devices, error), = prepare(d, ("ns", "a", "uid-a")).values()
        assert error == "" and devices[0].cdi == ["k8s.huawei.com/claim=uid-a-vnpu-116"]
        assert npu.vnpus() == {116: "vir02"}
    finally:
        d.drivers[KIND].unprepare([("ns", "a", "uid-a")])
        d.close()


def test_static_vnpu_chip_offered_neither_whole_nor_partitioned(host_root: Path, sockets: Path) -> None:
    """An admin's vir04 on chip 1 (/dev/vdavinci116): published as a device of its own; chip 1 is not
    offered whole, nor its templates; a claim naming chip 1 (allocated before) is refused."""
    npu = NpuNode(host_root, sockets, static_vnpus={1: "vir04"})
    kube = FakeKube()
    d = npu.daemon(kube)
    kube.add_claim("ns", "whole", "uid-w", [result("1")])
    try:
        devs = published(kube)["devices"]
        assert "116" in devs and "1" not in devs and not [n for n in devs if n.startswith("1-")]
        assert "consumesCounters" not in devs["116"]
        assert {k: devs["116"]["attributes"][k] for k in ("type", "index", "template", "parentChip")} == {
            "type": {"string": "vnpu"}, "index": {"int": 1}, "template": {"string": ""},
            "parentChip": {"string": "1"}}  # its chip's, as a partition says; the tool's template is not read
        assert {frozenset(dev["attributes"]) for dev in devs.values()} == {frozenset(devs["0"]["attributes"])}
        assert {"0", "2", "3", "0-vir04-0"} <= set(devs)
        assert set(published(kube)["sets"]) == {"chip-0", "chip-2", "chip-3"}
        (devices, error), = prepare(d, ("ns", "whole", "uid-w")).values()
        assert devices == [] and "device 1 is not on this node any more" in error, error
        assert any("huawei.com/npu=1: not offered whole: vNPU(s) 116 carved from it" in x for x in npu.logs)
    finally:
        d.close()


def test_settings_default_tool_is_the_data_s(npu: NpuNode) -> None:
    """No --vnpu-tool: the partition data's tool in <driver root>/usr/local/bin; a tool that names no
    chip (or is missing) publishes the chips whole, no partitions, one line."""
    npu.tool.write_text("#!/bin/sh\necho fake npu-smi\n")
    kube = FakeKube()
    d = npu.daemon(kube)
    try:
        devs = published(kube)["devices"]
        assert sorted(devs) == ["0", "1", "2", "3"] and not published(kube)["sets"]
    finally:
        d.close()
    npu.settings = dataclasses.replace(npu.settings, vnpu_tool=str(npu.root / "nonexistent"))
    d = npu.daemon(FakeKube())
    try:
        assert any("no partitions published" in x and "is not there" in x for x in npu.logs), npu.logs
    finally:
        d.close()


def test_own_vnpu_in_a_regenerated_spec_is_no_static_one(npu: NpuNode) -> None:
    """`xpu-cdi watch` regenerates the static spec while a claim's vNPU exists (/dev/vdavinci100 is a
    card to it): the driver does not publish it as a card nor withhold chip 0 for it."""
    kube = FakeKube()
    d = npu.daemon(kube)
    kube.add_claim("ns", "a", "uid-a", [result("0-vir02-0")])
    try:
        assert prepare(d, ("ns", "a", "uid-a"))["uid-a"][1] == ""
        res = CliRunner().invoke(main, ["generate", "--profile", "ascend", *npu.host.cli_roots,
                                        "--spec-dir", str(npu.spec_dir)])
        assert res.exit_code == 0, res.output
        assert "huawei.com/npu=100" in registry.load([str(npu.spec_dir)]).devices
        d.step()
        devs = published(kube)["devices"]
        assert "100" not in devs and "0" in devs and "0-vir02-0" in devs, sorted(devs)
        assert not any("not offered whole" in x for x in npu.logs), npu.logs
    finally:
        d.drivers[KIND].unprepare([("ns", "a", "uid-a")])
        d.close()


def test_910b_memory_counter_in_mib_as_the_api_writes_it() -> None:
    """A 910B3 (20 AI cores, 64 GiB; templates in MiB): the memory counter is a quantity, written as
    the API server writes it back (64Gi, not 65536Mi); 4 vir05_1c_16g and 2 vir10_3c_32g fit; a chip
    the tool does not name, or names as no model of the data, stays whole."""
    from xpu_cdi import partitions
    from xpu_cdi.dra import partitioned
    from xpu_cdi.dra.slices import DeviceInfo

    parts = partitions.builtin("ascend")
    chips = {"0": DeviceInfo("0", f"{KIND}=0", index=0), "1": DeviceInfo("1", f"{KIND}=1", index=1),
             "2": DeviceInfo("2", f"{KIND}=2", index=2)}
    tool = {0: partitioned.ToolChip(3, 0, 0, "910B3"), 1: partitioned.ToolChip(4, 0, 1, "910C9")}
    got = partitioned.expand(chips, tool, parts)
    assert got["0"].counters == ("chip-0", (("aicore", "20"), ("aicpu", "7"), ("memory", "64Gi")))
    assert got["1"] == chips["1"] and got["2"] == chips["2"]
    made = [n for n in got if n.startswith("0-")]
    assert made == [f"0-vir05-1c-16g-{i}" for i in range(4)] + [f"0-vir10-3c-32g-{i}" for i in range(2)]
    assert got["0-vir10-3c-32g-1"].consumes == ("chip-0", (("aicore", "10"), ("aicpu", "3"), ("memory", "32Gi")))
    assert got["0-vir10-3c-32g-1"].tool_ids == (3, 0, 100, 116)


def test_vnpus_of_an_earlier_boot_destroyed(npu: NpuNode) -> None:
    """After a reboot the vendor makes the vNPUs of before again (vnpu-cfg-recover): the checkpoint
    of that boot is discarded, and the vNPUs it names are destroyed at start, one line each."""
    kube = FakeKube()
    d = npu.daemon(kube)
    path = d.drivers[KIND].cp_path
    d.close()
    npu.npu_smi("set", "-t", "create-vnpu", "-i", "2", "-c", "0", "-f", "vir04", "-v", "132")
    cp = PreparedClaims("boot-0", {"uid-a": PreparedClaim("ns", "a", [
        PreparedDevice(["npu"], "n1", "2-vir04-0", ["k8s.huawei.com/claim=uid-a-vnpu-132"],
                       vnpu=VNpu(2, 0, "vir04", 132))])})
    checkpoint.save(path, cp)
    d = npu.daemon(kube)
    try:
        assert npu.vnpus() == {}
        assert any("vNPU 132 of claim ns/a, made on an earlier boot: destroyed" in x for x in npu.logs), npu.logs
        assert "2" in published(kube)["devices"]
    finally:
        d.close()


def test_refusal_with_exit_0_is_a_refusal(npu: NpuNode) -> None:
    """In VM vnpu-mode npu-smi prints one line and exits 0 (no Status): the claim gets that line, nothing
    is left of it."""
    npu.npu_smi("set", "-t", "vnpu-mode", "-d", "1")
    kube = FakeKube()
    kube.add_claim("ns", "a", "uid-a", [result("0-vir02-0")])
    d = npu.daemon(kube)
    try:
        (devices, error), = prepare(d, ("ns", "a", "uid-a")).values()
        said = "The vnpu is not in docker mode, does not support setting create-vnpu. (exit status 0)"
        assert devices == [] and error.endswith(f"-f vir02 -v 100: {said}"), error
        assert npu.vnpus() == {} and npu.claim_specs() == {}
        assert "uid-a" not in json.loads(Path(d.drivers[KIND].cp_path).read_text())["claims"]
    finally:
        d.close()


@pytest.mark.parametrize("phy_column", [False, True])
def test_phy_ids_apart_from_logic_ids(host_root: Path, sockets: Path, phy_column: bool) -> None:
    """A host whose logic ids run backwards from the phy ids (the N of /dev/davinciN): each chip's
    partitions carry the card and chip the tool gives that phy id (info -m's Chip Phy-ID column, else
    phyid-remap), and the vNPU id range of that phy id; the vNPU is made on the right chip."""
    chips = [{"card": 3 - i, "chip": 0, "name": "310P3", "phy_id": i, "logic_id": 3 - i} for i in range(4)]
    npu = NpuNode(host_root, sockets, chips=chips, phy_column=phy_column)
    kube = FakeKube()
    kube.add_claim("ns", "a", "uid-a", [result("1-vir02-0")])
    d = npu.daemon(kube)
    try:
        assert d.drivers[KIND].devices["1-vir02-0"].tool_ids == (2, 0, 116, 124)
        (devices, error), = prepare(d, ("ns", "a", "uid-a")).values()
        assert error == "" and devices[0].vnpu == VNpu(2, 0, "vir02", 116)
        by_card = {c["card"]: [v["id"] for v in c["vnpus"]] for c in json.loads(npu.state.read_text())["chips"]}
        assert by_card == {3: [], 2: [116], 1: [], 0: []}
    finally:
        d.drivers[KIND].unprepare([("ns", "a", "uid-a")])
        d.close()
