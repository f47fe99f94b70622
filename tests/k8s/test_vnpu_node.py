"""Ascend vNPU through DRA partitionable devices on the suite's real cluster: the real API server
(1.37, default gates: DRAPartitionableDevices on) and scheduler allocating partitions against the
chips' counters, the real kubelet calling the driver, containerd starting containers from the
claim-scoped CDI specs the driver writes; four fake 310P chips and the stand-in npu-smi
(tests/support/npusmi.py) installed as the node's tool (<driver root>/usr/local/bin/npu-smi).

What a user would check: the vendor's recommended mixes (vir04 + vir04_3c, vir04 + vir02 +
vir02_1c) on one chip all run, each container sees exactly its own vNPU as /dev/davinci<id>; a
mix npu-smi refuses (two vir04, eight vir01, vir04_4c_dvpp beside a DVPP template) stays
unallocated at scheduling and never reaches the driver; a refusal npu-smi prints with exit 0
reaches the pod's prepare event in its words; a host whose phy ids differ from its logic ids gets
vNPUs on the right chip; with every pod gone the tool holds no vNPU and no claim-scoped spec is
left; a driver killed (SIGKILL) while the tool has made a vNPU and not yet returned leaves no
orphan after its restart, and the pod runs; a chip with a
static vNPU carved is not offered whole by the device plugin or the DRA driver, and the device
plugin offers the vNPU under mind-cluster's name (huawei.com/Ascend310P-2c) to a pod of its own; a selector on
`index` or `template` needs no `"key" in` guard (every device carries every key).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from support import fakehost, npusmi
from support.dpnode import short_dir
from support.dranode import DraDriver, claim_template, pod_claim, unschedulable, with_claim
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.nodekit import NPU, Cards, DevicePlugin
from support.runtimes import ENXIO
from xpu_cdi.node import claimspec

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
DRIVER = "huawei.com"
CLASS = "npu.huawei.com"
VNPU_2C = "huawei.com/Ascend310P-2c"  # a static vir02, as the device plugin names it (mind-cluster's name)
DRA_DEVICES = 4 * 21  # per 310P chip: itself, 7 vir01, 3 vir02, 4 vir02_1c, 1 vir04, 2 vir04_3c(_ndvpp), 1 _dvpp
#: what a vNPU pod prints of the NPU nodes it has, then stays running
SCRIPT = (f"for n in /dev/davinci*; do echo present $n; (echo x > $n) 2>&1; done; echo {nodekit.DONE}; "
          f"exec sleep 2147483647")


class StandIn:
    """The stand-in npu-smi as the node's tool, its state, and the chips it knows (card i, chip 0)."""

    def __init__(self, cards: Cards, work: Path) -> None:
        self.root = cards.host.root
        self.state = work / "npu-smi.json"
        self.tool = Path(cards.host.path("/usr/local/bin/npu-smi"))
        npusmi.init_state(self.state, [{"card": i, "chip": 0, "name": "310P3"} for i in range(4)],
                          fakehost.NPU_MAJOR)
        self.install()

    def install(self, gate: Any = None) -> None:
        self.tool.unlink(missing_ok=True)
        npusmi.install(self.tool, self.state, self.root, gate)

    def vnpus(self) -> Dict[int, str]:
        return {v["id"]: v["template"] for c in json.loads(self.state.read_text())["chips"] for v in c["vnpus"]}

    def run(self, *argv: str) -> None:
        r = subprocess.run([str(self.tool), *argv], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout


@pytest.fixture(scope="module")
def cards(node: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cards]:
    """Four fake 310P chips (an Atlas 300I Pro's PCI id), their static spec in the node's CDI dir."""
    c = Cards(node, tmp_path_factory.mktemp("npu"), profile="ascend", pci_device="0xd500")
    yield c
    c.close()


@pytest.fixture(scope="module", autouse=True)
def standin(cards: Cards, tmp_path_factory: pytest.TempPathFactory) -> StandIn:
    """The node's tool, in place before the driver starts (conftest's ``driver``)."""
    return StandIn(cards, tmp_path_factory.mktemp("npu-smi"))


MADE: List[str] = []  # the module's ResourceClaimTemplates


@pytest.fixture(scope="module", autouse=True)
def claim_templates(node: Cluster) -> Iterator[None]:
    yield
    if MADE:
        node.kubectl("delete", "resourceclaimtemplate", *MADE, "--ignore-not-found")
        MADE.clear()


def npu_template(cluster: Cluster, cel: str) -> str:
    """A ResourceClaimTemplate of one NPU device of deploy/dra's class matching *cel*."""
    MADE.append(claim_template(cluster, {"selectors": [{"cel": {"expression": cel}}]}, request="npu",
                               device_class=CLASS))
    return MADE[-1]


def vnpu_template(cluster: Cluster, template: str, chip: int) -> str:
    attrs = f'device.attributes["{DRIVER}"]'
    return npu_template(cluster, f'{attrs}.template == "{template}" && {attrs}.parentChip == "{chip}"')


def vnpu_pod(cluster: Cluster, pods: List[str], prefix: str, template: str, wait: bool = True) -> str:
    name = nodekit.unique(prefix)
    pods.append(name)
    obj = with_claim(nodekit.pod(name, ["sh", "-c", SCRIPT]), template)
    if not wait:
        cluster.apply(obj)
        return name
    return nodekit.run_pod(cluster, obj)


def check_own_vnpu(out: str, vnpu_id: int) -> None:
    """The container has /dev/davinci<vnpu id> (and the manager node), both usable, no other NPU."""
    present = [ln.split()[1] for ln in out.splitlines() if ln.startswith("present ")]
    assert present == [f"/dev/davinci{vnpu_id}", "/dev/davinci_manager"], out
    assert out.count(ENXIO) == 2, out


def made_for(driver: DraDriver, cluster: Cluster, pod: str) -> int:
    """The vNPU the driver's checkpoint holds for *pod*'s claim."""
    uid = pod_claim(cluster, pod)["metadata"]["uid"]
    (vnpu,) = [d["vnpu"] for d in driver.checkpoint()[uid]["devices"]]
    return int(vnpu["id"])


def no_leftovers(cluster: Cluster, standin: StandIn) -> bool:
    return not standin.vnpus() and not claimspec.listed(str(cluster.cdi_dir), DRIVER)


def test_device_plugin_offers_static_vnpus(node: Cluster, cards: Cards, standin: StandIn,
                                          tmp_path: Path, pods: List[str]) -> None:
    """An admin's vir02 on chip 3 (/dev/vdavinci148, no DRA): the device plugin advertises chips 0-2 as
    huawei.com/npu and the vNPU as huawei.com/Ascend310P-2c (mind-cluster's name), chip 3 under
    neither; a pod asking for `huawei.com/Ascend310P-2c: 1` runs and sees its own /dev/davinci148,
    not chip 3; a pod asking for 4 NPUs stays Pending for want of huawei.com/npu."""
    standin.run("set", "-t", "create-vnpu", "-i", "3", "-c", "0", "-f", "vir02", "-v", "148")
    cards.generate()
    dp = DevicePlugin(node, cards, tmp_path)
    try:
        node.wait_allocatable(NPU, 3, timeout=60)
        node.wait_allocatable(VNPU_2C, 1, timeout=60)
        assert dp.proc is not None
        dp.proc.wait_log(f"{NPU}=3: not offered whole: vNPU(s) 148 carved from it")
        name = nodekit.unique("vnpu-2c")
        pods.append(name)
        check_own_vnpu(nodekit.run_pod(node, nodekit.pod(name, ["sh", "-c", SCRIPT], limits={VNPU_2C: 1})), 148)
        name = nodekit.unique("four")
        pods.append(name)
        node.apply(nodekit.pod(name, ["sleep", "1"], limits={NPU: 4}))
        cond = node.wait(lambda: unschedulable(node, name), 60, "the scheduler's verdict")
        assert f"Insufficient {NPU}" in cond["message"], cond
    finally:
        if pods:  # the vNPU's container gone before the vNPU is destroyed
            nodekit.wait_gone(node, *pods)
            pods.clear()
        dp.stop()
        node.wait_allocatable(NPU, 0, timeout=60)
        node.wait_allocatable(VNPU_2C, 0, timeout=60)
        standin.run("set", "-t", "destroy-vnpu", "-i", "3", "-c", "0", "-v", "148")
        cards.generate()


def test_partitions_published(node: Cluster, driver: DraDriver) -> None:
    """A counter set per chip (every budget npu-smi checks: AI cores, AI CPUs, the five media engines;
    memory in eighths) in a slice of its own; the chips and their partitions in slices of at most 64,
    accepted by the API server as they are."""
    slices = driver.slices()
    sets = {c["name"]: c["counters"] for s in slices for c in s["spec"].get("sharedCounters") or []}
    chip = {k: {"value": v} for k, v in (("aicore", "8"), ("aicpu", "7"), ("jpegd", "16"), ("jpege", "8"),
                                         ("memory-parts", "8"), ("vdec", "12"), ("venc", "3"), ("vpc", "12"))}
    assert sets == {f"chip-{i}": chip for i in range(4)}, sets
    devices = driver.devices()
    assert len(devices) == DRA_DEVICES and all(len(s["spec"].get("devices") or []) <= 64 for s in slices)
    assert devices["0-vir04-0"]["attributes"]["template"] == {"string": "vir04"}
    assert devices["0-vir04-0"]["consumesCounters"] == [{"counterSet": "chip-0", "counters": {
        k: {"value": v} for k, v in (("aicore", "4"), ("aicpu", "4"), ("jpegd", "8"), ("jpege", "4"),
                                     ("memory-parts", "4"), ("vdec", "6"), ("venc", "2"), ("vpc", "6"))}}]


def test_selectors_need_no_guard(node: Cluster, driver: DraDriver, pods: List[str]) -> None:
    """Every device carries the same attribute keys: the real scheduler evaluates a selector on
    `index` (which partitions carry as their chip's) and `type` against all 84 devices without
    "no such key", and gives chip 2 whole; the template selectors of the other tests test no key either."""
    attrs = f'device.attributes["{DRIVER}"]'
    keys = {frozenset(d["attributes"]) for d in driver.devices().values()}
    assert len(keys) == 1 and {"type", "index", "template", "parentChip"} <= next(iter(keys)), keys
    name = nodekit.unique("index2")
    pods.append(name)
    out = nodekit.run_pod(node, with_claim(nodekit.pod(name, ["sh", "-c", SCRIPT]),
                                           npu_template(node, f'{attrs}.index == 2 && {attrs}.type == "chip"')))
    (result,) = pod_claim(node, name)["status"]["allocation"]["devices"]["results"]
    assert result["device"] == "2" and "present /dev/davinci2\n" in out, (result, out)
    nodekit.wait_gone(node, name)


def test_vendors_mixes_share_a_chip(node: Cluster, driver: DraDriver, standin: StandIn,
                                    pods: List[str]) -> None:
    """The vendor's recommended mixes (mind-cluster's guide): vir04 + vir04_3c on chip 0 and vir04 + vir02 +
    vir02_1c on chip 1 all run, each container with its own vNPU; a vir01 on chip 0 (its AI cores and
    AI CPUs taken) stays Pending with the scheduler's reason until the vir04_3c pod is gone, then runs;
    with every pod gone the tool holds no vNPU and no claim-scoped spec is left."""
    mixes = [("vir04", 0), ("vir04_3c", 0), ("vir04", 1), ("vir02", 1), ("vir02_1c", 1)]
    outs = [vnpu_pod(node, pods, t.replace("_", "-"), vnpu_template(node, t, chip)) for t, chip in mixes]
    ids = [made_for(driver, node, p) for p in pods]
    for out, i in zip(outs, ids):
        check_own_vnpu(out, i)
    assert standin.vnpus() == {i: t for i, (t, _c) in zip(ids, mixes)}
    assert set(ids[:2]) <= set(range(100, 108)) and set(ids[2:]) <= set(range(116, 124)), ids
    assert sorted(claimspec.listed(str(node.cdi_dir), DRIVER)) == sorted(
        pod_claim(node, p)["metadata"]["uid"] for p in pods)
    late = vnpu_pod(node, pods, "vir01", vnpu_template(node, "vir01", 0), wait=False)
    cond = node.wait(lambda: unschedulable(node, late), 60, "the vir01 pod's verdict")
    assert "cannot allocate all claims" in cond["message"], cond
    assert len(standin.vnpus()) == 5
    nodekit.wait_gone(node, pods[1])
    node.wait_pod_phase(late, "Running", 120)
    out = node.wait(lambda: (lambda o: o if nodekit.DONE in o else None)(node.logs(late)), 60, "its output")
    check_own_vnpu(out, made_for(driver, node, late))
    assert sorted(t for i, t in standin.vnpus().items() if i < 108) == ["vir01", "vir04"]
    nodekit.wait_gone(node, *pods)
    node.wait(lambda: no_leftovers(node, standin), 60, "no vNPU and no claim-scoped spec left")
    assert not driver.checkpoint()


def held(cluster: Cluster, driver: DraDriver, pod: str) -> None:
    """*pod* stays unallocated at scheduling and never reaches prepare: the scheduler's reason (it names
    no counter: kube-scheduler 1.37 logs "Insufficient counters" only at -v=7), no allocation, nothing
    in the driver's checkpoint or log for its claim."""
    cond = cluster.wait(lambda: unschedulable(cluster, pod), 60, f"{pod}'s verdict")
    assert "cannot allocate all claims" in cond["message"], cond
    claim = pod_claim(cluster, pod)
    assert not claim.get("status", {}).get("allocation"), claim
    assert claim["metadata"]["uid"] not in driver.checkpoint() and claim["metadata"]["name"] not in driver.text()


def test_refused_mixes_stay_unallocated(node: Cluster, driver: DraDriver, standin: StandIn,
                                        pods: List[str]) -> None:
    """What npu-smi refuses, the scheduler does not allocate: a second vir04 beside a vir04 (8 AI CPUs of
    7) on chip 2; an eighth vir01 beside seven on chip 3 (AI CPUs); a vir02_1c beside vir04_4c_dvpp
    (every media engine taken) on chip 2 once the vir04 is gone.  The tool is never asked."""
    vnpu_pod(node, pods, "vir04", vnpu_template(node, "vir04", 2))
    held(node, driver, vnpu_pod(node, pods, "vir04b", vnpu_template(node, "vir04", 2), wait=False))
    attrs = f'device.attributes["{DRIVER}"]'
    MADE.append(claim_template(node, {"count": 7, "selectors": [{"cel": {"expression": (
        f'{attrs}.template == "vir01" && {attrs}.parentChip == "3"')}}]}, request="npu", device_class=CLASS))
    out = vnpu_pod(node, pods, "seven", MADE[-1])
    assert out.count("present /dev/davinci1") == 7, out  # /dev/davinci148 .. 154
    held(node, driver, vnpu_pod(node, pods, "eighth", vnpu_template(node, "vir01", 3), wait=False))
    nodekit.wait_gone(node, *pods)
    pods.clear()
    vnpu_pod(node, pods, "dvpp", vnpu_template(node, "vir04_4c_dvpp", 2))
    held(node, driver, vnpu_pod(node, pods, "media", vnpu_template(node, "vir02_1c", 2), wait=False))
    assert list(standin.vnpus().values()) == ["vir04_4c_dvpp"]
    nodekit.wait_gone(node, *pods)
    node.wait(lambda: no_leftovers(node, standin), 60, "no vNPU and no claim-scoped spec left")


def prepare_event(cluster: Cluster, pod: str) -> str:
    """The message of kubelet's FailedPrepareDynamicResources event on *pod*, once there is one."""
    items = cluster.get("events", "--field-selector",
                        f"involvedObject.name={pod},reason=FailedPrepareDynamicResources")["items"]
    return items[0]["message"] if items else ""


def test_refusal_with_exit_0_reaches_the_event(node: Cluster, driver: DraDriver, standin: StandIn,
                                               pods: List[str]) -> None:
    """In VM vnpu-mode npu-smi refuses with one line and exit 0: the pod's prepare event carries that
    line; with the mode back kubelet's retry runs the pod."""
    standin.run("set", "-t", "vnpu-mode", "-d", "1")
    try:
        name = vnpu_pod(node, pods, "vmmode", vnpu_template(node, "vir02", 1), wait=False)
        msg = node.wait(lambda: prepare_event(node, name), 120, "the prepare event")
        assert "The vnpu is not in docker mode, does not support setting create-vnpu. (exit status 0)" in msg, msg
        assert not standin.vnpus()
    finally:
        standin.run("set", "-t", "vnpu-mode", "-d", "0")
    node.wait_pod_phase(name, "Running", 180)
    nodekit.wait_gone(node, name)
    node.wait(lambda: no_leftovers(node, standin), 60, "no vNPU and no claim-scoped spec left")


def test_phy_ids_apart_from_logic_ids(node: Cluster, driver: DraDriver, standin: StandIn,
                                      pods: List[str]) -> None:
    """A host whose cards and logic ids run backwards from the phy ids (/dev/davinciN): a vir02 on chip 1
    (/dev/davinci1) is made on the card the tool gives phy id 1, with an id of phy 1's range."""
    def chips(reverse: bool) -> List[Dict[str, Any]]:
        return [{"card": 3 - i if reverse else i, "chip": 0, "name": "310P3", "phy_id": i,
                 "logic_id": 3 - i if reverse else i} for i in range(4)]

    npusmi.init_state(standin.state, chips(True), fakehost.NPU_MAJOR)
    try:
        driver.restart()
        out = vnpu_pod(node, pods, "phy1", vnpu_template(node, "vir02", 1))
        vnpu_id = made_for(driver, node, pods[-1])
        check_own_vnpu(out, vnpu_id)
        assert vnpu_id in range(116, 124), vnpu_id
        on = {c["card"]: [v["id"] for v in c["vnpus"]] for c in json.loads(standin.state.read_text())["chips"]}
        assert on == {3: [], 2: [vnpu_id], 1: [], 0: []}, on
    finally:  # the vNPU destroyed on the host it was made on, before that host changes back
        nodekit.wait_gone(node, *pods)
        node.wait(lambda: no_leftovers(node, standin), 60, "no vNPU and no claim-scoped spec left")
        npusmi.init_state(standin.state, chips(False), fakehost.NPU_MAJOR)
        driver.restart()


def test_kill_between_create_and_spec(node: Cluster, driver: DraDriver, standin: StandIn,
                                      pods: List[str]) -> None:
    """The tool has made the vNPU and is held (a FIFO) before it returns: SIGKILL of the driver then
    leaves the vNPU and the pending intent; the restarted driver destroys it, kubelet prepares the
    claim again, the pod runs with a vNPU, the only one the tool holds."""
    gate = Path(short_dir()) / "gate"
    os.mkfifo(gate)
    standin.install(gate)
    try:
        name = vnpu_pod(node, pods, "killed", vnpu_template(node, "vir02", 1), wait=False)
        first = node.wait(lambda: list(standin.vnpus()), 120, "the vNPU made, the tool held")
        pending = [c for c in driver.checkpoint().values() if c.get("pending")]
        assert len(pending) == 1 and pending[0]["devices"][0]["vnpu"]["id"] == first[0], pending
        assert driver.proc is not None
        driver.proc.proc.kill()
        driver.proc.proc.wait()
        assert not claimspec.listed(str(node.cdi_dir), DRIVER)
    finally:
        standin.install()
        try:  # the held tool goes on and exits (no reader: it never got there)
            os.close(os.open(gate, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        shutil.rmtree(gate.parent)
    driver.start()
    driver.wait_served()
    node.wait_pod_phase(name, "Running", 180)
    out = node.wait(lambda: (lambda o: o if nodekit.DONE in o else None)(node.logs(name)), 60, "its output")
    now = made_for(driver, node, name)
    check_own_vnpu(out, now)
    assert standin.vnpus() == {now: "vir02"}, standin.vnpus()
    assert f"was being prepared when the driver stopped: released (vNPU {first[0]} destroyed)" in driver.text()
    nodekit.wait_gone(node, name)
    node.wait(lambda: no_leftovers(node, standin), 60, "no vNPU and no claim-scoped spec left")


def test_static_vnpu_chip_not_offered_whole(node: Cluster, cards: Cards, driver: DraDriver, standin: StandIn,
                                            pods: List[str]) -> None:
    """An admin's vir04 on chip 3: the driver publishes the vNPU as a device of its own and neither
    chip 3 nor its partitions; a claim for chip 3 whole stays Pending with the scheduler's reason."""
    standin.run("set", "-t", "create-vnpu", "-i", "3", "-c", "0", "-f", "vir04", "-v", "148")
    try:
        cards.generate()
        node.wait(lambda: "148" in driver.devices() and "3" not in driver.devices(), 60, "chip 3 withdrawn")
        assert not [n for n in driver.devices() if n.startswith("3-")]
        attrs = f'device.attributes["{DRIVER}"]'
        tmpl = npu_template(node, f'{attrs}.type == "chip" && {attrs}.index == 3')
        name = vnpu_pod(node, pods, "whole3", tmpl, wait=False)
        cond = node.wait(lambda: unschedulable(node, name), 60, "the scheduler's verdict")
        assert "cannot allocate all claims" in cond["message"], cond
        nodekit.wait_gone(node, name)
    finally:
        standin.run("set", "-t", "destroy-vnpu", "-i", "3", "-c", "0", "-v", "148")
        cards.generate()
    node.wait(lambda: "3" in driver.devices() and "148" not in driver.devices(), 60, "chip 3 offered again")
