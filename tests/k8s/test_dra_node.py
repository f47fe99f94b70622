"""`xpu-cdi dra-driver` on a real node: run on the machine against the session cluster's kubelet
(plugin watcher registration, NodePrepareResources, the health stream) and API server (as the
service account of deploy/dra/rbac.yaml, under its admission policy), cards from the fake host,
claims allocated by the real scheduler, containers started by containerd 2.x from the static
CDI names the driver answers with.

Each test checks what a user would: the node's ResourceSlices, the scheduler's allocation and
its verdicts, what a pod's container sees of the cards (ENXIO on exactly the allocated ones,
the others absent), the taint and the pod's allocatedResourcesStatus of a failing card, and
that restarts of kubelet and of the driver (and a reboot, a claim deleted while the driver was
down) hand out no card twice.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from support import HANG, fakehost
from support import matrix
from support.dpnode import short_dir
from support.dranode import (DEPLOY, DRIVER, Identity, DraDriver, allocated, claim_pod, claim_template, doctor,
                             manifests, pod_claim, unschedulable, with_claim)
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.nodekit import XPU, Cards, DevicePlugin

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
SWITCH = "kunlunxin.com/pcieSwitch"


def test_deploy_dra_dry_run(cluster: Cluster) -> None:
    """deploy/dra/ (kustomization: RBAC, the ValidatingAdmissionPolicy and its binding, the
    DeviceClasses, the DaemonSet and its ConfigMap) passes the API server's validation and
    admission, nothing stored; each file on its own too."""
    names = sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
    for name in names:
        r = cluster.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-",
                            input=(DEPLOY / name).read_text())
        assert r.stdout.count("(server dry run)") == len(manifests(name)), (name, r.stdout)
    r = cluster.kubectl("apply", "-k", str(DEPLOY), "--server-side", "--dry-run=server")
    assert r.stdout.count("(server dry run)") == sum(len(manifests(n)) for n in names), r.stdout
    assert "validatingadmissionpolicy.admissionregistration.k8s.io/xpu-cdi-dra-driver-own-node-slices" in r.stdout
    got = cluster.kubectl("get", "validatingadmissionpolicy", "xpu-cdi-dra-driver-own-node-slices", check=False)
    assert got.returncode != 0, "the dry run stored the policy"


@pytest.fixture(scope="module")
def templates(cluster: Cluster) -> Iterator[Dict[str, str]]:
    """The module's ResourceClaimTemplates, made when first asked for (by what they ask)."""
    made: Dict[str, str] = {}
    yield made
    if made:
        cluster.kubectl("delete", "resourceclaimtemplate", *made.values(), "--ignore-not-found")


def template(cluster: Cluster, templates: Dict[str, str], key: str, exactly: Dict[str, Any],
             constraints: Any = None) -> str:
    if key not in templates:
        templates[key] = claim_template(cluster, exactly, constraints)
    return templates[key]


def two(cluster: Cluster, templates: Dict[str, str]) -> str:
    return template(cluster, templates, "two", {"count": 2})


def run(cluster: Cluster, pods: List[str], prefix: str, tmpl: str) -> str:
    name = nodekit.unique(prefix)
    pods.append(name)
    return nodekit.run_pod(cluster, claim_pod(name, tmpl))


def test_slices_published(cluster: Cluster, driver: DraDriver, cards: Cards) -> None:
    """One pool named after the node, a device per card named as in the spec, the attributes
    users select on, the owner the node; the DeviceClass of deploy/dra applied for real selects
    them (a claim of count: 8 with it is allocatable: test_all_cards)."""
    (s,) = driver.slices()
    spec = s["spec"]
    assert spec["pool"]["name"] == cluster.node_name and spec["pool"]["resourceSliceCount"] == 1, spec["pool"]
    assert s["metadata"]["ownerReferences"][0]["uid"] == cluster.node()["metadata"]["uid"]
    devices = {d["name"]: d for d in spec["devices"]}
    assert sorted(devices, key=int) == [str(i) for i in range(8)]
    host = cards.host
    for i in range(8):
        a = devices[str(i)]["attributes"]
        assert a["index"] == {"int": i} and a["model"] == {"string": "P800"}, a
        assert a["driverVersion"]["version"] == "5.0.21", a
        assert a["resource.kubernetes.io/pciBusID"] == {"string": host.pci[i]}, a
        assert a["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:00" if i < 4 else "pci0000:80"}, a
        assert a["pcieSwitch"] == {"string": host.switch[i]}, a
        assert a["numaNode"] == {"int": host.numa[i]}, a
        assert not devices[str(i)].get("taints"), devices[str(i)]
    cls = cluster.get("deviceclass", "xpu.kunlunxin.com")
    assert cls["spec"]["selectors"] == [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}], cls
    assert driver.served_after <= 10, driver.served_after


def test_two_cards(cluster: Cluster, driver: DraDriver, templates: Dict[str, str], pods: List[str]) -> None:
    """count: 2 → Running; the container has exactly the 2 allocated cards (ENXIO on them, the
    others absent); the driver's checkpoint holds them for the claim."""
    out = run(cluster, pods, "two", two(cluster, templates))
    got = allocated(cluster, pods[0])
    assert len(got) == 2, got
    matrix.check_cards(out, got)
    claim = pod_claim(cluster, pods[0])
    prepared = driver.checkpoint()[claim["metadata"]["uid"]]
    assert sorted(int(d["device"]) for d in prepared["devices"]) == got, prepared
    assert sorted(c for d in prepared["devices"] for c in d["cdi"]) == [f"{XPU}={i}" for i in got], prepared


def test_match_attribute_one_switch(cluster: Cluster, driver: DraDriver, cards: Cards,
                                    templates: Dict[str, str], pods: List[str]) -> None:
    """With 3 cards of one switch taken, 2 cards with matchAttribute on our switch attribute come
    from one switch (the other one), not the first two free ones."""
    run(cluster, pods, "three", template(cluster, templates, "three", {"count": 3}))
    taken = allocated(cluster, pods[0])
    assert len({cards.host.switch[i] for i in taken}) == 1, taken
    out = run(cluster, pods, "pair", template(cluster, templates, "pair", {"count": 2},
                                              [{"requests": ["xpus"], "matchAttribute": SWITCH}]))
    pair = allocated(cluster, pods[1])
    matrix.check_cards(out, pair)
    assert len({cards.host.switch[i] for i in pair}) == 1, {i: cards.host.switch[i] for i in pair}
    assert not set(pair) & set(taken), (taken, pair)


def test_all_cards(cluster: Cluster, driver: DraDriver, templates: Dict[str, str], pods: List[str]) -> None:
    """allocationMode: All → every card of the node in the container."""
    out = run(cluster, pods, "all", template(cluster, templates, "all", {"allocationMode": "All"}))
    assert allocated(cluster, pods[0]) == list(range(8))
    matrix.check_cards(out, range(8))


def test_model_matching_no_card_pending(cluster: Cluster, driver: DraDriver, templates: Dict[str, str],
                                        pods: List[str]) -> None:
    """A selector on a model no card has: Pending, the scheduler saying it cannot allocate the claim."""
    tmpl = template(cluster, templates, "p900", {"selectors": [
        {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "P900"'}}]})
    name = nodekit.unique("p900")
    pods.append(name)
    cluster.apply(claim_pod(name, tmpl))
    cond = cluster.wait(lambda: unschedulable(cluster, name), 60, "the scheduler's verdict")
    assert "cannot allocate all claims" in cond["message"], cond
    assert cluster.pod(name)["status"]["phase"] == "Pending"


def test_two_pods_never_share(cluster: Cluster, driver: DraDriver, templates: Dict[str, str],
                              pods: List[str]) -> None:
    """Two pods of 4 cards get the 8 between them, a third asking for one stays Pending."""
    four = template(cluster, templates, "four", {"count": 4})
    outs = [run(cluster, pods, "four", four) for _ in range(2)]
    a, b = allocated(cluster, pods[0]), allocated(cluster, pods[1])
    for out, got in zip(outs, (a, b)):
        matrix.check_cards(out, got)
    assert sorted(a + b) == list(range(8)), (a, b)
    name = nodekit.unique("one")
    pods.append(name)
    cluster.apply(claim_pod(name, template(cluster, templates, "one", {})))
    cond = cluster.wait(lambda: unschedulable(cluster, name), 60, "the one-card pod unschedulable")
    assert "cannot allocate all claims" in cond["message"], cond


def test_admission_policy_own_node_only(cluster: Cluster, driver: DraDriver, identity: Identity) -> None:
    """As the driver (its pod-bound token), a slice of another node is refused by the admission
    policy of deploy/dra, naming both nodes; the driver's own node's slices it writes (above)."""
    other = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "not-ours"},
             "spec": {"driver": DRIVER, "nodeName": "another-node",
                      "pool": {"name": "another-node", "generation": 1, "resourceSliceCount": 1}, "devices": []}}
    r = cluster.run_on_node([str(cluster.kubectl_bin), "--kubeconfig", str(identity.kubeconfig), "create", "-f", "-"],
                            input=json.dumps(other), mount=False)
    assert r.returncode != 0, r.stdout
    assert "ValidatingAdmissionPolicy" in r.stderr and f"runs on node '{cluster.node_name}'" in r.stderr \
        and "not 'another-node'" in r.stderr, r.stderr


def test_device_plugin_refused_for_the_same_kind(cluster: Cluster, driver: DraDriver, cards: Cards) -> None:
    """The device plugin started for the kind the driver serves (same run dir, no node config):
    it refuses with one line and advertises nothing."""
    dp = DevicePlugin(cluster, cards, driver.run_dir)
    try:
        assert dp.proc is not None
        dp.proc.wait_log("not served")
        lines = [ln for ln in dp.text().splitlines() if "not served" in ln]
        assert len(lines) == 1 and f"{XPU}: not served: the dra on this node serves it already" in lines[0], lines
        # the pass that refused ends by writing the status file: a plugin that went on is in it, and
        # was registered in that pass (reconcile runs before the write)
        status = cluster.wait(lambda: json.loads(dp.status.read_text()) if dp.status.exists() else None, HANG,
                              "the plugin's status file")
        assert status["kinds"] == {}, status
        assert dp.registrations() == 0 and cluster.allocatable(XPU) == 0, dp.text()
    finally:
        dp.stop()


def test_doctor_on_the_dra_node(cluster: Cluster, driver: DraDriver, cards: Cards, tmp_path: Path) -> None:
    """doctor: the driver registered, its 8 cards published and defined by the spec, the checkpoint
    readable, the kind served one way; then a device plugin serving the same kind beside it (its
    own run dir, so neither refuses): one-way fails, naming the kind."""
    checks = doctor(cluster, driver, cards, tmp_path / "none.json")
    (reg,), (slices,), (cp,), (one,) = (checks[n] for n in ("dra-registered", "dra-slices", "dra-checkpoint",
                                                            "one-way"))
    assert reg["status"] == "ok" and f"{XPU} as driver {DRIVER}: registered with kubelet" in reg["found"], reg
    assert slices["status"] == "ok" and "publishes 8 device(s), all defined by a spec, none tainted" in \
        slices["found"], slices
    assert cp["status"] == "ok" and "checkpoint readable" in cp["found"], cp
    assert one["status"] == "ok" and f"{XPU} by DRA" in one["found"], one
    dp = DevicePlugin(cluster, cards, tmp_path)
    try:
        dp.wait_served()
        (one,) = doctor(cluster, driver, cards, dp.status)["one-way"]
        assert one["status"] == "fail" and f"{XPU} served by the device plugin and the DRA driver both" in \
            one["found"], one
    finally:
        dp.stop()
        cluster.wait_allocatable(XPU, 0, timeout=60)

def taint_of(driver: DraDriver, card: int) -> List[Dict[str, Any]]:
    return driver.devices().get(str(card), {}).get("taints") or []


def health_of(cluster: Cluster, pod: str) -> Dict[str, str]:
    """The pod's allocatedResourcesStatus: resource id (CDI name) -> health."""
    out = {}
    for cs in cluster.pod(pod)["status"].get("containerStatuses") or []:
        for rs in cs.get("allocatedResourcesStatus") or []:
            for r in rs.get("resources") or []:
                out[r["resourceID"]] = r["health"]
    return out


def test_card_removed_tainted_and_unhealthy(cluster: Cluster, driver: DraDriver, cards: Cards,
                                            templates: Dict[str, str], pods: List[str]) -> None:
    """A pod's card loses its device node: the slice's device is tainted NoSchedule and
    kubelet shows the card Unhealthy in the pod's allocatedResourcesStatus (the health stream);
    the node back: untainted, Healthy again (how fast: the bench's, not a wall-clock limit here)."""
    run(cluster, pods, "one", template(cluster, templates, "one", {}))
    (card,) = allocated(cluster, pods[0])
    cdi = f"{XPU}={card}"
    cluster.wait(lambda: health_of(cluster, pods[0]).get(cdi) == "Healthy", 30, f"{cdi} Healthy in the pod")
    path = cards.host.path(f"/dev/xpu{card}")
    path.unlink()
    try:
        (taint,) = cluster.wait(lambda: taint_of(driver, card), 30, f"card {card} tainted", interval=0.05)
        assert taint["key"] == f"{DRIVER}/unhealthy" and taint["effect"] == "NoSchedule", taint
        cluster.wait(lambda: health_of(cluster, pods[0]).get(cdi) == "Unhealthy", 30, f"{cdi} Unhealthy in the pod")
    finally:
        fakehost.mknod(path, fakehost.XPU_MAJOR, card)
    cluster.wait(lambda: not taint_of(driver, card) and len(driver.devices()) == 8, 30, f"card {card} untainted",
                 interval=0.05)
    cluster.wait(lambda: health_of(cluster, pods[0]).get(cdi) == "Healthy", 30, f"{cdi} Healthy again")


def test_kubelet_restart_slices_back(cluster: Cluster, driver: DraDriver, templates: Dict[str, str],
                                     pods: List[str]) -> None:
    """kubelet stopped and started wipes the node's slices: the driver registers again and publishes
    them again; a pod running through it is untouched, a new claim works."""
    run(cluster, pods, "before", two(cluster, templates))
    before = cluster.pod(pods[0])["status"]["containerStatuses"][0]
    held = allocated(cluster, pods[0])
    (old,) = driver.slices()
    cluster.stop_kubelet()
    cluster.start_kubelet(wait_ready=False)

    def republished() -> bool:
        s = driver.slices()
        return len(s) == 1 and s[0]["metadata"]["uid"] != old["metadata"]["uid"] and len(s[0]["spec"]["devices"]) == 8

    cluster.wait(republished, 60, "the slices published again", interval=0.05)
    after = cluster.pod(pods[0])["status"]["containerStatuses"][0]
    assert after["containerID"] == before["containerID"] and after["restartCount"] == 0
    out = run(cluster, pods, "after", two(cluster, templates))
    fresh = allocated(cluster, pods[1])
    matrix.check_cards(out, fresh)
    assert not set(fresh) & set(held), (held, fresh)


def test_driver_restart_no_double_prepare(cluster: Cluster, driver: DraDriver, templates: Dict[str, str],
                                          pods: List[str]) -> None:
    """The driver restarted while a pod runs: its claim is not prepared again (the checkpoint has it
    as before, the new process logs no prepare of it), the pod is untouched, and a new claim gets
    free cards."""
    run(cluster, pods, "held", two(cluster, templates))
    held = allocated(cluster, pods[0])
    uid = pod_claim(cluster, pods[0])["metadata"]["uid"]
    before_cp = driver.checkpoint()[uid]
    container = cluster.pod(pods[0])["status"]["containerStatuses"][0]["containerID"]
    driver.restart()
    out = run(cluster, pods, "new", two(cluster, templates))
    fresh = allocated(cluster, pods[1])
    matrix.check_cards(out, fresh)
    assert not set(fresh) & set(held), (held, fresh)
    name = pod_claim(cluster, pods[0])["metadata"]["name"]
    assert f"claim default/{name} prepared" not in driver.text(), driver.text()
    assert driver.checkpoint()[uid] == before_cp
    now = cluster.pod(pods[0])["status"]["containerStatuses"][0]
    assert now["containerID"] == container and now["restartCount"] == 0


def test_claim_deleted_while_down_released_at_start(cluster: Cluster, driver: DraDriver,
                                                    templates: Dict[str, str], pods: List[str]) -> None:
    """A pod and its claim deleted while the driver is down: the driver releases the claim when it
    starts (one log line, gone from the checkpoint), and a claim of every card is prepared."""
    run(cluster, pods, "gone", two(cluster, templates))
    claim = pod_claim(cluster, pods[0])
    uid, name = claim["metadata"]["uid"], claim["metadata"]["name"]
    assert uid in driver.checkpoint()
    driver.stop()
    try:
        cluster.kubectl("delete", "pod", pods.pop(0), "--grace-period=0", "--force", "--wait=false")
        cluster.wait(lambda: cluster.kubectl("get", "resourceclaim", name, check=False).returncode != 0, 90,
                     f"claim {name} gone from the API")
        assert uid in driver.checkpoint()
    finally:
        driver.start()
    driver.wait_served()
    assert driver.proc is not None
    driver.proc.wait_log(f"claim default/{name} ({uid}) is gone from the API: released")
    assert uid not in driver.checkpoint()
    out = run(cluster, pods, "all", template(cluster, templates, "all", {"allocationMode": "All"}))
    matrix.check_cards(out, range(8))


def test_boot_id_changed_rebuilt_from_the_api(cluster: Cluster, driver: DraDriver, templates: Dict[str, str],
                                              pods: List[str]) -> None:
    """The driver started on another boot id (a reboot, as the checkpoint sees it): the checkpoint is
    discarded, the claim of the pod still running is taken back from the API with its cards, and
    a new claim gets other cards."""
    run(cluster, pods, "running", two(cluster, templates))
    held = allocated(cluster, pods[0])
    uid = pod_claim(cluster, pods[0])["metadata"]["uid"]
    driver.stop()
    driver.boot_id.write_text("00000000-0000-4000-8000-000000000001\n")
    driver.start()
    driver.wait_served()
    assert driver.proc is not None
    text = driver.proc.wait_log("taken back from the API")
    assert "is from an earlier boot" in text, text
    prepared = driver.checkpoint()
    assert uid in prepared and sorted(int(d["device"]) for d in prepared[uid]["devices"]) == held, prepared
    out = run(cluster, pods, "fresh", two(cluster, templates))
    fresh = allocated(cluster, pods[1])
    matrix.check_cards(out, fresh)
    assert not set(fresh) & set(held)


def test_extended_resource_served_by_dra(cluster: Cluster, driver: DraDriver, pods: List[str]) -> None:
    """A pod that still asks `limits: {kunlunxin.com/xpu: 2}` on a node where no device plugin
    advertises it: the DeviceClass's extendedResourceName has the scheduler make a claim for it
    (DRAExtendedResource), the driver prepares it, the container has exactly those 2 cards."""
    assert cluster.allocatable(XPU) == 0  # (a device plugin stopped earlier may leave its capacity)
    name = nodekit.unique("ext")
    pods.append(name)
    out = nodekit.run_card_pod(cluster, name, {XPU: 2})
    status = cluster.pod(name)["status"]["extendedResourceClaimStatus"]
    claim = cluster.get("resourceclaim", status["resourceClaimName"])
    got = sorted(int(r["device"]) for r in claim["status"]["allocation"]["devices"]["results"])
    assert len(got) == 2, claim["status"]
    matrix.check_cards(out, got)
    assert claim["metadata"]["uid"] in driver.checkpoint()



def test_older_kubelet(compat_cluster: Cluster, tmp_path: Path) -> None:
    """kubelet 1.34.4 (the oldest with resource.k8s.io/v1; no health stream, its gate is off) against
    the pinned control plane: the driver registers, a 2-card claim's pod runs with exactly those
    cards, and a kubelet restart's wipe of the slices is undone."""
    c = compat_cluster
    with contextlib.ExitStack() as stack:
        cards = Cards(c, tmp_path / "xpu")
        stack.callback(cards.close)
        identity = Identity(c, tmp_path)
        stack.callback(identity.close)
        work = short_dir()
        stack.callback(shutil.rmtree, work, True)
        d = DraDriver(c, cards, work, identity)
        stack.callback(d.close)
        d.wait_served()
        tmpl = claim_template(c, {"count": 2})
        stack.callback(c.kubectl, "delete", "resourceclaimtemplate", tmpl, "--ignore-not-found")
        pods: List[str] = []
        stack.callback(lambda: pods and nodekit.wait_gone(c, *pods))
        out = run(c, pods, "old", tmpl)
        got = allocated(c, pods[0])
        assert len(got) == 2, got
        matrix.check_cards(out, got)
        (old,) = d.slices()
        c.restart_kubelet()
        c.wait(lambda: [s["metadata"]["uid"] for s in d.slices()] not in ([], [old["metadata"]["uid"]]), 30,
               "the slices published again")


def test_corrupt_checkpoint_is_an_event(cluster: Cluster, driver: DraDriver, templates: Dict[str, str],
                                        pods: List[str]) -> None:
    """A damaged checkpoint: the driver starts (no crash loop), says so in one line and in a
    CheckpointCorrupt Event on the node (as its service account may), and takes the running pod's
    claim back from the API."""
    run(cluster, pods, "kept", two(cluster, templates))
    uid = pod_claim(cluster, pods[0])["metadata"]["uid"]
    driver.stop()
    (driver.dir / "checkpoint.json").write_text('{"version": 1, "claims": {"x": ')
    driver.start()
    driver.wait_served()
    assert driver.proc is not None
    lines = [ln for ln in driver.proc.wait_log("is corrupt").splitlines() if "is corrupt" in ln]
    assert len(lines) == 1, driver.text()

    def event() -> Dict[str, Any]:
        items = cluster.get("events", "-n", "default", "--field-selector", "reason=CheckpointCorrupt")["items"]
        return next((e for e in items if e["involvedObject"]["name"] == cluster.node_name), {})

    try:
        ev = cluster.wait(event, 30, "the CheckpointCorrupt event")
        assert ev["involvedObject"]["kind"] == "Node" and "is corrupt" in ev["message"], ev
    finally:
        cluster.kubectl("delete", "events", "-n", "default", "--field-selector", "reason=CheckpointCorrupt")
    assert uid in driver.checkpoint()


def test_rolling_update_two_drivers(cluster: Cluster, driver: DraDriver, cards: Cards, identity: Identity,
                                    templates: Dict[str, str], pods: List[str]) -> None:
    """A second driver pod (another pod uid: its own sockets, the same run dir, boot and checkpoint;
    a uid long enough that its sockets get hashed names) registers beside the first; the old one
    stopped leaves the slices in place (the new one still serves); kubelet prepares the next claim
    through the new one, which also unprepares a claim the old one prepared."""
    run(cluster, pods, "old", two(cluster, templates))
    old_claim = pod_claim(cluster, pods[0])["metadata"]["name"]
    new = DraDriver(cluster, cards, driver.work, identity, pod_uid=f"rolling-{uuid.uuid4()}")
    try:
        new.wait_served()
        assert new.status()["dra_socket"] != driver.status()["dra_socket"]
        (before,) = driver.slices()
        old_text = driver.text()
        driver.stop()
        assert "slices withdrawn" not in driver.text()[len(old_text):], driver.text()
        assert [s["metadata"]["uid"] for s in driver.slices()] == [before["metadata"]["uid"]]
        out = run(cluster, pods, "new", two(cluster, templates))
        fresh = allocated(cluster, pods[1])
        matrix.check_cards(out, fresh)
        new_claim = pod_claim(cluster, pods[1])["metadata"]["name"]
        assert new.proc is not None
        new.proc.wait_log(f"claim default/{new_claim} prepared")
        nodekit.wait_gone(cluster, pods.pop(0))
        cluster.wait(lambda: f"claim default/{old_claim} unprepared" in new.text(), 30,
                     "the old pod's claim unprepared by the new driver")
        # still the same slice after the new driver served a claim and unprepared the old one: nothing
        # the old driver's stop set off (no fixed wait: these later events bound it)
        assert [s["metadata"]["uid"] for s in driver.slices()] == [before["metadata"]["uid"]]
    finally:
        nodekit.wait_gone(cluster, *pods)
        pods.clear()
        new.stop()  # the last one: withdraws the slices (not close: the plugin dir is the first one's too)
        if driver.proc is None:
            driver.start()
        driver.wait_served()


def test_ascend_npu(cluster: Cluster, driver: DraDriver, identity: Identity, tmp_path: Path,
                    pods: List[str]) -> None:
    """An Ascend host beside the P800 one: a second driver (huawei.com) publishes its 4 NPUs; a claim
    of DeviceClass npu.huawei.com gets one, the pod sees that NPU and davinci_manager."""
    npu = Cards(cluster, tmp_path / "npu", profile="ascend")
    work = short_dir()
    d = DraDriver(cluster, npu, work, identity)
    try:
        d.wait_served()
        assert sorted(d.devices()) == ["0", "1", "2", "3"] and d.name == "huawei.com"
        tmpl = claim_template(cluster, {}, device_class="npu.huawei.com")
        try:
            name = nodekit.unique("npu")
            pods.append(name)
            out = nodekit.run_pod(cluster, with_claim(nodekit.npu_pod(name), tmpl))
            (got,) = allocated(cluster, name, driver="huawei.com")
            nodekit.check_npu(out, got)
        finally:
            nodekit.wait_gone(cluster, *pods)
            pods.clear()
            cluster.kubectl("delete", "resourceclaimtemplate", tmpl, "--ignore-not-found")
    finally:
        d.close()
        shutil.rmtree(work, ignore_errors=True)
        npu.close()


@pytest.mark.parametrize("npus, pci, size", [(16, "0xd802", 8), (8, "0xd801", 4)], ids=["910b-ax16", "910"])
def test_ascend_one_hccs_domain(cluster: Cluster, driver: DraDriver, identity: Identity, tmp_path: Path,
                                pods: List[str], npus: int, pci: str, size: int) -> None:
    """The placement rule of docs/training.md under the real scheduler: on a 16-NPU 910B server (two HCCS
    domains of 8) and a 910 server (two rings of 4), with one NPU taken, a claim of a whole domain's
    count with matchAttribute on huawei.com/hccsDomain gets the other domain whole (the first free
    ones would straddle both); every NPU's slice says its domain and its hccn.conf address."""
    npu = Cards(cluster, tmp_path / "npu", profile="ascend", pci_device=pci, npus=npus, hccn=True)
    work = short_dir()
    d = DraDriver(cluster, npu, work, identity)
    made: List[str] = []
    try:
        d.wait_served()
        devices = d.devices()
        assert sorted(devices, key=int) == [str(i) for i in range(npus)] and d.name == "huawei.com"
        for i in range(npus):
            a = devices[str(i)]["attributes"]
            assert a["hccsDomain"] == {"int": i // size} and a["deviceIP"] == {"string": f"192.168.1.{10 + i}"}, a
        made.append(claim_template(cluster, {}, device_class="npu.huawei.com"))
        # docs/training.md's claim: one domain, NPUs with a RoCE address
        made.append(claim_template(cluster, {"count": size, "selectors": [
            {"cel": {"expression": '"deviceIP" in device.attributes["huawei.com"]'}}]},
            [{"requests": ["xpus"], "matchAttribute": "huawei.com/hccsDomain"}], device_class="npu.huawei.com"))
        one = nodekit.unique("one")
        pods.append(one)
        nodekit.run_pod(cluster, with_claim(nodekit.npu_pod(one), made[0]))
        (taken,) = allocated(cluster, one, driver="huawei.com")
        whole = nodekit.unique("domain")
        pods.append(whole)
        nodekit.run_pod(cluster, with_claim(nodekit.npu_pod(whole), made[1]))
        got = allocated(cluster, whole, driver="huawei.com")
        other = 1 - taken // size
        assert got == list(range(other * size, (other + 1) * size)), (taken, got)
    finally:
        nodekit.wait_gone(cluster, *pods)
        pods.clear()
        if made:
            cluster.kubectl("delete", "resourceclaimtemplate", *made, "--ignore-not-found")
        d.close()
        shutil.rmtree(work, ignore_errors=True)
        npu.close()
