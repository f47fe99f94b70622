"""Ascend vNPU through DRA partitionable devices on the suite's real cluster: the real API server
(1.37, default gates: DRAPartitionableDevices on) and scheduler allocating partitions against the
chips' counters, the real kubelet calling the driver, containerd starting containers from the
claim-scoped CDI specs the driver writes; four fake 310P chips and the stand-in npu-smi
(tests/support/npusmi.py) installed as the node's tool (<driver root>/usr/local/bin/npu-smi).

What a user would check: two claims (vir02, vir04) on one chip both run, each container sees
exactly its own vNPU as /dev/davinci<id>; a third that would exceed the chip's AI cores stays
Pending with the scheduler's reason, and runs once one pod is gone; with every pod gone the tool
holds no vNPU and no claim-scoped spec is left; a driver killed (SIGKILL) while the tool has made
a vNPU and not yet returned leaves no orphan after its restart, and the pod runs; a chip with a
static vNPU carved is not offered whole by the device plugin or the DRA driver; a selector on
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
from xpu_cdi.dra import claimspec

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
DRIVER = "huawei.com"
CLASS = "npu.huawei.com"
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


def test_device_plugin_withholds_a_carved_chip(node: Cluster, cards: Cards, standin: StandIn,
                                               tmp_path: Path, pods: List[str]) -> None:
    """An admin's vir04 on chip 3 (/dev/vdavinci148): the device plugin advertises chips 0-2 and the
    vNPU, not chip 3 (4, not 5); a pod asking for 5 stays Pending for want of huawei.com/npu."""
    standin.run("set", "-t", "create-vnpu", "-i", "3", "-c", "0", "-f", "vir04", "-v", "148")
    cards.generate()
    dp = DevicePlugin(node, cards, tmp_path)
    try:
        node.wait_allocatable(NPU, 4, timeout=60)
        assert dp.proc is not None
        dp.proc.wait_log(f"{NPU}=3: not offered whole: vNPU(s) 148 carved from it")
        name = nodekit.unique("five")
        pods.append(name)
        node.apply(nodekit.pod(name, ["sleep", "1"], limits={NPU: 5}))
        cond = node.wait(lambda: unschedulable(node, name), 60, "the scheduler's verdict")
        assert f"Insufficient {NPU}" in cond["message"], cond
    finally:
        dp.stop()
        node.wait_allocatable(NPU, 0, timeout=60)
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
    `index` (which partitions carry as their chip's) and `type` against all 100 devices without
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


def test_vir02_and_vir04_share_a_chip(node: Cluster, driver: DraDriver, standin: StandIn,
                                      pods: List[str]) -> None:
    """vir02 and vir04 on chip 0 both run, each container with its own vNPU; a second vir04 on chip 0
    (AI cores 2 + 4 + 4 > 8) stays Pending with the scheduler's reason until the vir02 pod is gone;
    with every pod gone the tool holds no vNPU and no claim-scoped spec is left."""
    outs = [vnpu_pod(node, pods, "vir02", vnpu_template(node, "vir02", 0)),
            vnpu_pod(node, pods, "vir04", vnpu_template(node, "vir04", 0))]
    ids = [made_for(driver, node, p) for p in pods]
    for out, i in zip(outs, ids):
        check_own_vnpu(out, i)
    assert standin.vnpus() == {ids[0]: "vir02", ids[1]: "vir04"} and set(ids) <= set(range(100, 108))
    assert sorted(claimspec.listed(str(node.cdi_dir), DRIVER)) == sorted(
        pod_claim(node, p)["metadata"]["uid"] for p in pods)
    third = vnpu_pod(node, pods, "third", vnpu_template(node, "vir04", 0), wait=False)
    cond = node.wait(lambda: unschedulable(node, third), 60, "the third pod's verdict")
    assert "cannot allocate all claims" in cond["message"], cond
    assert len(standin.vnpus()) == 2
    nodekit.wait_gone(node, pods[0])
    node.wait_pod_phase(third, "Running", 120)
    out = node.wait(lambda: (lambda o: o if nodekit.DONE in o else None)(node.logs(third)), 60, "its output")
    check_own_vnpu(out, made_for(driver, node, third))
    assert sorted(standin.vnpus().values()) == ["vir04", "vir04"]
    nodekit.wait_gone(node, *pods[1:])
    node.wait(lambda: no_leftovers(node, standin), 60, "no vNPU and no claim-scoped spec left")
    assert not driver.checkpoint()


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
