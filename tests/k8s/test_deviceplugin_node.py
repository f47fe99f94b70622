"""`xpu-cdi device-plugin` on a real node: run on the machine against the real kubelet (the
pinned release, and the older kubelet builds.py pins against the same control plane), cards
from the fake host, pods placed by the real scheduler and started by containerd 2.x.

Each test checks what a user would: the node's capacity and allocatable, what a pod's container
sees of the cards kubelet gave it (ENXIO on exactly those, the others absent, the driver tree
read-only), kubelet's own record of the assignment (PodResources), and that restarts of kubelet
and of the plugin hand out no card twice.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest
import yaml

from support import HANG, fakehost
from support import matrix
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.nodekit import XPU, Cards, DevicePlugin, PodResources

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
REPO = Path(__file__).resolve().parent.parent.parent
RUNTIME_LABEL = "xpu-cdi.io/runtime-xpu"
KUBELETS = ("kubernetes", "kubelet-compat")  # the session's kubelet and the older one (conftest.py)


@pytest.fixture(scope="module")
def podres(node: Cluster) -> Iterator[PodResources]:
    pr = PodResources(node)
    yield pr
    pr.close()


def new_pod(node: Cluster, pods: List[str], prefix: str, limits: Dict[str, int], **kw) -> str:  # type: ignore[no-untyped-def]
    name = nodekit.unique(prefix)
    pods.append(name)
    return nodekit.run_card_pod(node, name, limits, **kw)


def assigned(podres: PodResources, pod: str) -> List[int]:
    return [int(i) for i in podres.devices(pod, XPU)]


def test_capacity_and_allocatable(node: Cluster, plugin: DevicePlugin, podres: PodResources) -> None:
    """status.capacity and status.allocatable show the 8 cards; kubelet's PodResources agrees."""
    assert node.capacity(XPU) == 8 and node.allocatable(XPU) == 8
    assert podres.allocatable(XPU) == [str(i) for i in range(8)]


def test_pod_gets_its_two_cards(node: Cluster, plugin: DevicePlugin, podres: PodResources,
                                pods: List[str]) -> None:
    """limits 2: scheduled, running, exactly the 2 cards kubelet assigned (as PodResources List names
    them) usable, the others absent, the driver read-only: containerd's CDI from cdi_devices."""
    out = new_pod(node, pods, "two", {XPU: 2})
    got = assigned(podres, pods[0])
    assert len(got) == 2, got
    matrix.check_cards(out, got)
    config = cri_config(node, pods[0])  # both forms, as the default strategies send them
    assert cdi_names(config) == names(got) and annotated(config) == names(got), config


def test_nine_on_eight_stays_pending(node: Cluster, plugin: DevicePlugin, pods: List[str]) -> None:
    """9 cards asked on an 8-card node: Pending, with the scheduler's reason."""
    name = nodekit.unique("nine")
    pods.append(name)
    node.apply(nodekit.card_pod(name, {XPU: 9}))

    def unschedulable() -> Dict:
        conds = {c["type"]: c for c in node.pod(name)["status"].get("conditions", [])}
        c = conds.get("PodScheduled", {})
        return c if c.get("reason") == "Unschedulable" else {}

    cond = node.wait(unschedulable, 60, "the scheduler's verdict")
    assert f"Insufficient {XPU}" in cond["message"], cond
    assert node.pod(name)["status"]["phase"] == "Pending"


def cri_config(node: Cluster, pod: str) -> Dict:
    """The CRI ContainerConfig kubelet sent containerd for *pod*'s container (annotations,
    ``CDI_devices``, envs), as containerd's CRI keeps it with the container."""
    for cid in node.ctr("containers", "ls", "-q").stdout.split():
        info = json.loads(node.ctr("containers", "info", cid).stdout)
        labels = info.get("Labels", {})
        if labels.get("io.kubernetes.pod.name") == pod and labels.get("io.kubernetes.container.name") == "c":
            ext = info["Extensions"]["io.cri-containerd.container.metadata"]["value"]
            return json.loads(base64.b64decode(ext))["Metadata"]["Config"]
    raise AssertionError(f"no container of pod {pod}")


def cdi_annotations(config: Dict) -> Dict[str, str]:
    return {k: v for k, v in (config.get("annotations") or {}).items() if k.startswith("cdi.k8s.io/")}


def annotated(config: Dict) -> List[str]:
    """The CDI names of the cdi.k8s.io/ annotations (one per container from our plugin)."""
    values = list(cdi_annotations(config).values())
    assert len(values) <= 1, values
    return sorted(values[0].split(",")) if values else []


def cdi_names(config: Dict) -> List[str]:
    return sorted(d["name"] for d in config.get("CDI_devices") or [])


def names(cards: List[int]) -> List[str]:
    return [f"{XPU}={i}" for i in cards]


@pytest.fixture
def strategy(request: pytest.FixtureRequest, node: Cluster, plugin: DevicePlugin) -> Iterator[str]:
    """The plugin restarted with ``--device-list-strategy <param>``, the default one back afterwards."""
    extra = plugin.extra
    plugin.extra = [*extra, "--device-list-strategy", request.param]
    plugin.restart()
    try:
        yield request.param
    finally:
        plugin.extra = extra
        plugin.restart()


@pytest.mark.parametrize("strategy", ["cdi-annotations"], indirect=True)
def test_annotation_route(node: Cluster, strategy: str, podres: PodResources, pods: List[str]) -> None:
    """The plugin names the cards only in the cdi.k8s.io/ annotation: kubelet hands it to the
    container, containerd's CDI reads it."""
    out = new_pod(node, pods, "ann", {XPU: 2})
    got = assigned(podres, pods[0])
    matrix.check_cards(out, got)
    config = cri_config(node, pods[0])
    assert not cdi_names(config) and annotated(config) == names(got), config


@pytest.fixture
def runtime_class(node: Cluster) -> Iterator[str]:
    """deploy/runtimeclass.yaml applied for real, the node labelled as the file says (both undone after:
    the label would stay in the later modules' view of the node's xpu-cdi.io/ labels)."""
    node.kubectl("label", "node", node.node_name, f"{RUNTIME_LABEL}=true", "--overwrite")
    node.kubectl("apply", "--server-side", "-f", "-", input=(REPO / "deploy/runtimeclass.yaml").read_text())
    try:
        yield "xpu"
    finally:  # cluster-scoped: the chart's tests install their own
        node.kubectl("delete", "runtimeclass", "xpu", "--ignore-not-found", "--wait=true", check=False)
        node.kubectl("label", "node", node.node_name, f"{RUNTIME_LABEL}-", check=False)


@pytest.mark.parametrize("strategy", ["envvar"], indirect=True)
def test_envvar_through_runtimeclass_xpu(node: Cluster, strategy: str, runtime_class: str,
                                         podres: PodResources, pods: List[str]) -> None:
    """The plugin answers with CXPU_VISIBLE_DEVICES only: through RuntimeClass xpu (the wrapper as
    containerd's handler) the container gets exactly those cards; and where the node config says
    `accept-env-selection-when-unprivileged: false` (what deploy/ writes) the same pod gets none."""
    out = new_pod(node, pods, "env", {XPU: 2}, runtime_class=runtime_class)
    got = assigned(podres, pods[0])
    matrix.check_cards(out, got)
    config = cri_config(node, pods[0])
    assert not cdi_names(config) and not cdi_annotations(config), config
    env = {e["key"]: e["value"] for e in config.get("envs") or []}
    assert env[matrix.selection_env()] == ",".join(map(str, got)), env
    node.write_node_file("/etc/xpu-cdi/config.yaml",
                         yaml.safe_load((REPO / "deploy/node-config.yaml").read_text())["data"]["config.yaml"])
    try:
        out = new_pod(node, pods, "env-refused", {XPU: 2}, runtime_class=runtime_class)
        matrix.check_cards(out, [])
    finally:
        node.remove_node_file("/etc/xpu-cdi/config.yaml")


def test_card_removed_and_back(node: Cluster, plugin: DevicePlugin, cards: Cards) -> None:
    """A card's node removed: allocatable 7 (the kubelet told, capacity kept); made again: 8.  How fast
    is the bench's to say (a wall-clock limit here failed under load, not for a slow plugin)."""
    path = cards.host.path("/dev/xpu5")
    path.unlink()
    try:
        node.wait_allocatable(XPU, 7, timeout=HANG)
        assert node.capacity(XPU) == 8
    finally:
        fakehost.mknod(path, fakehost.XPU_MAJOR, 5)
    node.wait_allocatable(XPU, 8, timeout=HANG)
    assert node.capacity(XPU) == 8


def test_kubelet_restart(node: Cluster, plugin: DevicePlugin, podres: PodResources, pods: List[str]) -> None:
    """kubelet stopped and started: the plugin registers again, allocatable is 8 again, the running
    pod is untouched (same container, not restarted, same cards), a new pod gets other cards."""
    new_pod(node, pods, "before", {XPU: 2})
    before = node.pod(pods[0])
    held = assigned(podres, pods[0])
    registrations = plugin.registrations()
    node.restart_kubelet()
    plugin.wait_served(registrations + 1)
    after = node.pod(pods[0])
    assert after["status"]["phase"] == "Running"
    (c0,), (c1,) = before["status"]["containerStatuses"], after["status"]["containerStatuses"]
    assert c1["containerID"] == c0["containerID"] and c1["restartCount"] == 0 and "running" in c1["state"]
    # the new kubelet lists the pod's devices (from its checkpoint) once it has the pod from the API server again
    node.wait(lambda: assigned(podres, pods[0]) == held, 30, f"PodResources naming {held} again")
    out = new_pod(node, pods, "after", {XPU: 2})
    fresh = assigned(podres, pods[1])
    matrix.check_cards(out, fresh)
    assert not set(fresh) & set(held), (held, fresh)


#: what kubelet logs (at every verbosity) for each Register it is sent, whatever it answers
REGISTER_REQUEST = 'Got registration request from device plugin with resource" resourceName="{}"'


def kubelet_sock(node: Cluster) -> Optional[Tuple[int, int]]:
    """kubelet.sock's inode and ctime: a new kubelet's device manager creates it anew."""
    try:
        st = (node.plugin_dir / "kubelet.sock").stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_ctime_ns


def test_kubelet_restarts_one_registration_each(node: Cluster, plugin: DevicePlugin) -> None:
    """kubelet restarted 10 times: 7 one at a time, then 3 back to back, the next one 0.1 s and 1 s
    after the new kubelet.sock (a crash loop: the plugin is registering when kubelet goes again).
    After each: allocatable 8 again (kubelet's PodResources and the node's status).  Each kubelet
    was asked to register at most once (its own log, split per instance), each that served until
    the next restart exactly once, the plugin's count of registrations agrees, and nothing comes
    after: no restart handled twice, no storm (issue 22: ~115 a second, without end)."""
    request = REGISTER_REQUEST.format(XPU)
    starts: List[int] = []  # where each kubelet's log starts in the appended log

    def start(wait_ready: bool) -> None:
        starts.append(len(node.kubelet_log()))
        node.start_kubelet(wait_ready=wait_ready)

    def per_kubelet() -> List[int]:
        log = node.kubelet_log()
        return [log[a:b].count(request) for a, b in zip(starts, [*starts[1:], len(log)])]

    def quiet(since: int) -> None:
        assert plugin.registrations() == since, plugin.text()[-3000:]

    plugin_before = plugin.registrations()
    for _ in range(7):
        count = plugin.registrations()
        node.stop_kubelet()
        start(wait_ready=True)
        plugin.wait_served(count + 1)
        quiet(count + 1)  # wait_served waited for kubelet and the node status meanwhile
    assert per_kubelet() == [1] * 7, per_kubelet()

    count = plugin.registrations()
    first = len(starts)
    gaps = []
    for gap in (0.1, 1.0, None):
        old = kubelet_sock(node)
        node.stop_kubelet()
        start(wait_ready=gap is None)
        if gap is not None:
            node.wait(lambda: kubelet_sock(node) not in (None, old), 60, "the new kubelet.sock", interval=0.01)
            t0 = time.monotonic()
            time.sleep(gap)
            gaps.append(time.monotonic() - t0)
    plugin.wait_served(count + 1)
    time.sleep(3)  # a storm registers ~100 times a second; a restart handled twice, within a second
    got = per_kubelet()
    assert all(n <= 1 for n in got[first:]) and got[-1] == 1, (got, gaps)
    added = plugin.registrations() - count
    assert 1 <= added <= sum(got[first:]), (added, got, plugin.text()[-3000:])
    assert plugin.registrations() - plugin_before == 7 + added
    assert node.allocatable(XPU) == 8 and "already connected" not in plugin.text()


def moved_and_back(plugin: DevicePlugin, path: Path) -> None:
    """*path* renamed away and back while the plugin is stopped (SIGSTOP), so that it finds both
    inotify events at once, with *path* there again, as it finds an event that came late."""
    assert plugin.proc is not None
    pid = plugin.proc.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        aside = path.with_name(path.name + ".aside")
        path.rename(aside)
        aside.rename(path)
    finally:
        os.kill(pid, signal.SIGCONT)


def test_same_kubelet_not_registered_twice(node: Cluster, plugin: DevicePlugin) -> None:
    """kubelet.sock seen "created" again while the same kubelet runs (here: moved away and back, as
    a floor check and a late inotify event both report one restart): the plugin does not register
    a second time.  kubelet 1.37 refuses a Register for a connected endpoint and, refusing it,
    forgets the connected one: every later registration of that socket is refused ("device plugin
    already connected") and a plugin restart leaves the node with no working plugin."""
    sock = node.plugin_dir / "kubelet.sock"
    before = plugin.registrations()
    moved_and_back(plugin, sock)
    time.sleep(2)  # the plugin's loop has seen the move (inotify) and run its floor check meanwhile
    assert plugin.registrations() == before and "already connected" not in plugin.text(), plugin.text()
    plugin.restart()  # registers with the kubelet it never confused


def test_stale_socket_event_ignored(node: Cluster, plugin: DevicePlugin) -> None:
    """Our socket reported gone while it is there (moved away and back: what a deletion the floor
    check has already answered looks like when inotify reports it late): the plugin neither
    serves again nor registers again.  Serving again removes the socket, which reported itself
    as deleted, and so on: a storm of re-registrations with the same kubelet, each a chance of
    kubelet's "already connected" (test_same_kubelet_not_registered_twice)."""
    (sock,) = [p for p in node.plugin_dir.iterdir() if p.name.startswith("xpu-cdi-") and p.is_socket()]
    before, text = plugin.registrations(), plugin.text()
    moved_and_back(plugin, sock)
    time.sleep(2)
    after = plugin.text()[len(text):]
    assert plugin.registrations() == before and "serving again" not in after, after
    assert node.allocatable(XPU) == 8


def test_plugin_restart_no_double_allocation(node: Cluster, plugin: DevicePlugin, podres: PodResources,
                                            pods: List[str]) -> None:
    """The plugin restarted while two pods hold 4 cards: the next pod gets the 4 others, and a
    fifth card is not to be had (Pending)."""
    new_pod(node, pods, "a", {XPU: 2})
    new_pod(node, pods, "b", {XPU: 2})
    held = assigned(podres, pods[0]) + assigned(podres, pods[1])
    plugin.restart()
    out = new_pod(node, pods, "c", {XPU: 4})
    fresh = assigned(podres, pods[2])
    matrix.check_cards(out, fresh)
    assert sorted(held + fresh) == list(range(8)), (held, fresh)
    name = nodekit.unique("d")
    pods.append(name)
    node.apply(nodekit.card_pod(name, {XPU: 1}))
    node.wait(lambda: any(c.get("reason") == "Unschedulable" for c in
                          node.pod(name)["status"].get("conditions", [])), 60, "pod d unschedulable")


def test_preferred_allocation_one_switch(node: Cluster, plugin: DevicePlugin, cards: Cards,
                                         podres: PodResources, pods: List[str]) -> None:
    """Two PCIe switches of 4 cards: with 2 cards taken, a 4-card pod gets the 4 of the untouched
    switch (GetPreferredAllocation), not the first 4 free."""
    new_pod(node, pods, "two", {XPU: 2})
    taken = assigned(podres, pods[0])
    out = new_pod(node, pods, "four", {XPU: 4})
    four = assigned(podres, pods[1])
    matrix.check_cards(out, four)
    switches = {cards.host.switch[i] for i in four}
    assert len(switches) == 1, {i: cards.host.switch[i] for i in four}
    assert not switches & {cards.host.switch[i] for i in taken}, (taken, four)


def test_resource_per_model(node: Cluster, tmp_path: Path, pods: List[str]) -> None:
    """resource-naming: model on a 310P host: kubelet's allocatable is huawei.com/Ascend310P (4) as
    mind-cluster's plugin names it, none under huawei.com/npu, and a pod asking for two of them
    gets exactly the two kubelet assigned."""
    resource = "huawei.com/Ascend310P"
    npu = Cards(node, tmp_path / "npu", profile="ascend", pci_device="0xd500")
    dp = DevicePlugin(node, npu, tmp_path, "--resource-naming", "model")
    try:
        dp.wait_served(resource=resource)  # kubelet's allocatable: huawei.com/Ascend310P 4
        allocatable = node.node()["status"]["allocatable"]
        assert int(allocatable.get(nodekit.NPU, "0")) == 0, allocatable  # every card under its model's name
        name = nodekit.unique("npu310p")
        pods.append(name)
        nodekit.assert_npu_pod_sees_its_cards(node, name, resource, 2)
    finally:
        dp.stop()
        node.wait_allocatable(resource, 0, timeout=60)
        npu.close()


def test_ascend_resource(node: Cluster, tmp_path: Path, pods: List[str]) -> None:
    """An Ascend host: the plugin advertises huawei.com/npu (4), a pod with one gets that NPU."""
    npu = Cards(node, tmp_path / "npu", profile="ascend")
    dp = DevicePlugin(node, npu, tmp_path)
    try:
        dp.wait_served()
        assert node.capacity(nodekit.NPU) == 4
        name = nodekit.unique("npu")
        pods.append(name)
        out = nodekit.run_pod(node, nodekit.npu_pod(name, {nodekit.NPU: 1}))
        pr = PodResources(node)
        try:
            (npu_id,) = pr.devices(name, nodekit.NPU)
        finally:
            pr.close()
        nodekit.check_npu(out, int(npu_id))
    finally:
        dp.stop()
        node.wait_allocatable(nodekit.NPU, 0, timeout=60)
        npu.close()



def test_preferred_allocation_one_hccs_ring(node: Cluster, tmp_path: Path, pods: List[str]) -> None:
    """A 910 server (two HCCS rings of 4, docs/training.md): with one NPU taken, a pod of huawei.com/npu: 4
    gets the other ring whole from kubelet (GetPreferredAllocation), not the first 4 free, which would
    straddle the rings (NPUs of different rings cannot talk over HCCS)."""
    npu = Cards(node, tmp_path / "npu", profile="ascend", pci_device="0xd801", npus=8, hccn=True)
    dp = DevicePlugin(node, npu, tmp_path)
    pr = PodResources(node)
    try:
        dp.wait_served()
        one = nodekit.unique("one")
        pods.append(one)
        nodekit.run_pod(node, nodekit.npu_pod(one, {nodekit.NPU: 1}))
        (taken,) = [int(i) for i in pr.devices(one, nodekit.NPU)]
        four = nodekit.unique("ring")
        pods.append(four)
        nodekit.run_pod(node, nodekit.npu_pod(four, {nodekit.NPU: 4}))
        got = sorted(int(i) for i in pr.devices(four, nodekit.NPU))
        other = 1 - taken // 4
        assert got == list(range(other * 4, other * 4 + 4)), (taken, got)
    finally:
        pr.close()
        nodekit.wait_gone(node, *pods)
        pods.clear()
        dp.stop()
        node.wait_allocatable(nodekit.NPU, 0, timeout=60)
        npu.close()
