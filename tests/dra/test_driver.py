"""The driver's kubelet half through kubelet's own stubs (compiled from the upstream protos), against
the in-memory API stand-in: registration, prepare/unprepare, the checkpoint across restarts and
reboots, slices republished and tainted, one way per kind."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable

import pytest

from support import kubeproto
from xpu_cdi import remedy
from xpu_cdi.node import servemode
from xpu_cdi.node import checkpoint

DRIVER = "kunlunxin.com"


def stubs(proto: str) -> Any:
    return kubeproto.stubs(proto)


def until(cond: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"not within {timeout}s: {what}")


def result(device: str, request: str = "xpus") -> dict:
    return {"request": request, "driver": DRIVER, "pool": "n1", "device": device}


@pytest.fixture
def grpc_mod():
    return pytest.importorskip("grpc")


class Kubelet:
    """kubelet's calls, by its stubs."""

    def __init__(self, grpc: Any, registry: str) -> None:
        self.grpc = grpc
        self.dra, self.dra_grpc = stubs("dra/v1/api.proto")
        self.reg, self.reg_grpc = stubs("pluginregistration/v1/api.proto")
        sockets = [os.path.join(registry, n) for n in os.listdir(registry)]
        assert len(sockets) == 1, sockets
        ch = grpc.insecure_channel("unix:" + sockets[0])
        self.info = self.reg_grpc.RegistrationStub(ch).GetInfo(self.reg.InfoRequest(), timeout=60)
        self.reg_grpc.RegistrationStub(ch).NotifyRegistrationStatus(
            self.reg.RegistrationStatus(plugin_registered=True), timeout=60)
        ch.close()
        self.channel = grpc.insecure_channel("unix:" + self.info.endpoint)
        self.stub = self.dra_grpc.DRAPluginStub(self.channel)

    def prepare(self, *claims: tuple) -> Any:
        req = self.dra.NodePrepareResourcesRequest(
            claims=[self.dra.Claim(namespace=ns, name=n, uid=u) for ns, n, u in claims])
        return self.stub.NodePrepareResources(req, timeout=60)

    def unprepare(self, *claims: tuple) -> Any:
        req = self.dra.NodeUnprepareResourcesRequest(
            claims=[self.dra.Claim(namespace=ns, name=n, uid=u) for ns, n, u in claims])
        return self.stub.NodeUnprepareResources(req, timeout=60)


def started(node, kube, **changes):
    d = node.daemon(kube, **changes)
    d.step()
    assert DRIVER in {k.name for k in d.drivers.values()}, node.logs
    return d


def test_registration_info(dra_node, kube, grpc_mod) -> None:
    d = started(dra_node, kube)
    try:
        k = Kubelet(grpc_mod, dra_node.settings.registry_dir)
        assert k.info.type == "DRAPlugin" and k.info.name == DRIVER
        assert list(k.info.supported_versions)[:2] == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
        assert os.path.basename(k.info.endpoint) == "dra-pod1.sock"
        assert os.listdir(dra_node.settings.registry_dir) == [f"{DRIVER}-pod1-reg.sock"]
        until(lambda: d.drivers["kunlunxin.com/xpu"].services.registered.is_set(), what="registered")
    finally:
        d.close()


def test_prepare_two_cards_idempotent_and_exclusive(dra_node, kube, grpc_mod) -> None:
    d = started(dra_node, kube)
    kube.add_claim("ns", "a", "uid-a", [result("0"), result("1")])
    kube.add_claim("ns", "b", "uid-b", [result("1")])  # a scheduler bug: the driver is the last line
    kube.add_claim("ns", "pending", "uid-p", [])
    try:
        k = Kubelet(grpc_mod, dra_node.settings.registry_dir)
        r = k.prepare(("ns", "a", "uid-a"), ("ns", "b", "uid-b"), ("ns", "pending", "uid-p"),
                      ("ns", "a", "uid-old"), ("ns", "gone", "uid-g"))
        a = r.claims["uid-a"]
        assert a.error == "" and [(x.device_name, list(x.cdi_device_ids), list(x.request_names)) for x in a.devices] \
            == [("0", ["kunlunxin.com/xpu=0"], ["xpus"]), ("1", ["kunlunxin.com/xpu=1"], ["xpus"])]
        assert all(x.pool_name == "n1" for x in a.devices)
        assert "prepared for claim uid-a" in r.claims["uid-b"].error
        assert "not allocated" in r.claims["uid-p"].error
        assert "replaced" in r.claims["uid-old"].error
        assert "404" in r.claims["uid-g"].error
        again = k.prepare(("ns", "a", "uid-a"))
        assert again.claims["uid-a"] == a  # the same answer, nothing prepared twice
        k.unprepare(("ns", "a", "uid-a"))
        assert k.prepare(("ns", "b", "uid-b")).claims["uid-b"].devices[0].device_name == "1"
        un = k.unprepare(("ns", "never", "uid-never"))
        assert un.claims["uid-never"].error == ""  # unknown claims: nothing to undo
    finally:
        d.close()


def test_driver_restart_keeps_prepared_claims(dra_node, kube, grpc_mod) -> None:
    d = started(dra_node, kube)
    kube.add_claim("ns", "a", "uid-a", [result("2")])
    kube.add_claim("ns", "b", "uid-b", [result("2")])
    Kubelet(grpc_mod, dra_node.settings.registry_dir).prepare(("ns", "a", "uid-a"))
    d.close()
    d = started(dra_node, kube)
    try:
        k = Kubelet(grpc_mod, dra_node.settings.registry_dir)
        assert "prepared for claim uid-a" in k.prepare(("ns", "b", "uid-b")).claims["uid-b"].error
        assert k.prepare(("ns", "a", "uid-a")).claims["uid-a"].devices[0].device_name == "2"
    finally:
        d.close()


def test_claim_deleted_while_down_is_released_at_start(dra_node, kube, grpc_mod) -> None:
    d = started(dra_node, kube)
    kube.add_claim("ns", "a", "uid-a", [result("3")])
    Kubelet(grpc_mod, dra_node.settings.registry_dir).prepare(("ns", "a", "uid-a"))
    d.close()
    del kube.claims[("ns", "a")]
    kube.add_claim("ns", "b", "uid-b", [result("3")])
    d = started(dra_node, kube)
    try:
        assert any("gone from the API: released" in line for line in dra_node.logs), dra_node.logs
        got = Kubelet(grpc_mod, dra_node.settings.registry_dir).prepare(("ns", "b", "uid-b"))
        assert got.claims["uid-b"].error == ""
    finally:
        d.close()


def test_reboot_discards_the_checkpoint_and_rebuilds_from_the_api(dra_node, kube, grpc_mod) -> None:
    d = started(dra_node, kube)
    kube.add_claim("ns", "a", "uid-a", [result("0")])
    Kubelet(grpc_mod, dra_node.settings.registry_dir).prepare(("ns", "a", "uid-a"))
    d.close()
    dra_node.boot.write_text("boot-2\n")
    kube.add_claim("ns", "idle", "uid-i", [result("1")], reserved=False)  # allocated, no pod: not taken back
    kube.add_claim("ns", "b", "uid-b", [result("2")])
    d = started(dra_node, kube)
    try:
        assert any("earlier boot" in line for line in dra_node.logs), dra_node.logs
        cp = json.loads(open(checkpoint.path_in(os.path.join(dra_node.settings.plugins_dir, DRIVER))).read())
        assert cp["bootId"] == "boot-2" and sorted(cp["claims"]) == ["uid-a", "uid-b"]
        assert cp["claims"]["uid-a"]["devices"][0]["cdi"] == ["kunlunxin.com/xpu=0"]
    finally:
        d.close()


def test_corrupt_checkpoint_is_a_line_and_an_event(dra_node, kube, grpc_mod) -> None:
    data = os.path.join(dra_node.settings.plugins_dir, DRIVER)
    os.makedirs(data)
    with open(checkpoint.path_in(data), "w") as f:
        f.write('{"version": 1, "claims": {"x": ')
    d = started(dra_node, kube)
    try:
        assert [r for r, _m in kube.events] == ["CheckpointCorrupt"]
        assert sum("is corrupt" in line for line in dra_node.logs) == 1
    finally:
        d.close()


def test_slices_published_tainted_republished_withdrawn(dra_node, kube, grpc_mod) -> None:
    d = started(dra_node, kube)
    stop = threading.Event()
    loop = threading.Thread(target=lambda: [(d.step(), d.wait(0.05)) for _ in iter(stop.is_set, True)])
    loop.start()
    try:
        (s,) = kube.slices.values()
        assert [x["name"] for x in s["spec"]["devices"]] == ["0", "1", "2", "3"]
        gen = s["spec"]["pool"]["generation"]
        os.rename(dra_node.host.path("/dev/xpu2"), dra_node.host.path("/dev/xpu2.gone"))
        tainted = until(lambda: [x for v in kube.slices.values() for x in v["spec"]["devices"] if x.get("taints")],
                        what="card 2 tainted")
        assert [x["name"] for x in tainted] == ["2"]
        assert next(iter(kube.slices.values()))["spec"]["pool"]["generation"] == gen + 1
        os.rename(dra_node.host.path("/dev/xpu2.gone"), dra_node.host.path("/dev/xpu2"))
        until(lambda: not any(x.get("taints") for v in kube.slices.values() for x in v["spec"]["devices"]),
              what="taint removed")
        kube.delete_slices()  # kubelet's start
        until(lambda: kube.slices, what="slices republished")
    finally:
        stop.set()
        loop.join()
        d.close()
    assert kube.slices == {}


def test_health_stream(dra_node, kube, grpc_mod) -> None:
    h, h_grpc = stubs("dra-health/v1alpha1/api.proto")
    d = started(dra_node, kube)
    try:
        k = Kubelet(grpc_mod, dra_node.settings.registry_dir)
        assert "v1alpha1.DRAResourceHealth" in k.info.supported_versions
        stream = h_grpc.DRAResourceHealthStub(k.channel).NodeWatchResources(h.NodeWatchResourcesRequest(), timeout=60)
        first = next(stream)
        assert [(x.device.pool_name, x.device.device_name, x.health) for x in first.devices] == \
            [("n1", str(i), h.HEALTHY) for i in range(4)]
        os.rename(dra_node.host.path("/dev/xpu1"), dra_node.host.path("/dev/xpu1.gone"))
        d.step()
        second = next(stream)
        bad = [x for x in second.devices if x.health == h.UNHEALTHY]
        assert [x.device.device_name for x in bad] == ["1"] and "missing" in bad[0].message
        stream.cancel()
    finally:
        d.close()


def test_refused_when_the_device_plugin_serves_the_kind(dra_node, kube) -> None:
    from xpu_cdi import nodeconfig

    run = dra_node.settings.run_dir
    cfg = nodeconfig.read(dra_node.settings.node_config)
    assert servemode.claim("kunlunxin.com/xpu", servemode.DEVICE_PLUGIN, cfg, run) == ""
    try:
        d = dra_node.daemon(kube)
        d.step()
        assert d.drivers == {}
        refusals = [line for line in dra_node.logs if "not served" in line]
        assert len(refusals) == 1 and "device-plugin on this node serves it already" in refusals[0]
        d.step()
        assert len([line for line in dra_node.logs if "not served" in line]) == 1  # said once
    finally:
        servemode.release("kunlunxin.com/xpu", servemode.DEVICE_PLUGIN, run)


def test_socket_names_fit_the_unix_limit() -> None:
    """A pod uid that makes a socket path too long (a long kubelet --root-dir) gets a hashed name:
    one per uid, both sockets under the 107-byte limit; short paths keep the uid."""
    from xpu_cdi.node.grpcserve import MAX_SOCKET_PATH
    from xpu_cdi.dra.server import dra_socket, registration_socket

    uid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    assert dra_socket("/var/lib/kubelet/plugins/kunlunxin.com", uid).endswith(f"dra-{uid}.sock")
    deep = "/" + "d" * 40 + "/kubelet/plugins/kunlunxin.com"
    paths = {dra_socket(deep, u) for u in (uid, uid[::-1])} | {registration_socket(deep, DRIVER, uid)}
    assert len(paths) == 3 and all(len(p.encode()) <= MAX_SOCKET_PATH for p in paths), paths
    assert dra_socket(deep, uid) == dra_socket(deep, uid)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def taints(kube) -> dict:
    return {x["name"]: [t["effect"] for t in x["taints"]]
            for v in kube.slices.values() for x in v["spec"]["devices"] if x.get("taints")}


def test_evict_policy_noexecute_after_grace_events_and_restore(dra_node, kube, grpc_mod) -> None:
    """--evict: card 2, which a pod's claim holds, unhealthy: NoSchedule within the grace, NoExecute at
    its end, one Event on the Node and one on the pod, a line, a count; healthy: tainted through the
    hold-down (NoExecute still), then untainted and one restore."""
    d = started(dra_node, kube, remedy={f"{DRIVER}/xpu": remedy.Policy(True, grace=30, hold_down=300)})
    driver = next(iter(d.drivers.values()))
    clock = driver.remedy.clock = Clock()
    kube.add_claim("ns", "c", "uid-c", [result("2")])
    try:
        Kubelet(grpc_mod, dra_node.settings.registry_dir).prepare(("ns", "c", "uid-c"))
        os.rename(dra_node.host.path("/dev/xpu2"), dra_node.host.path("/dev/xpu2.gone"))
        d.step()
        assert taints(kube) == {"2": ["NoSchedule"]} and kube.about == []
        assert d.next_wait() == pytest.approx(min(30, d.poll_interval(d.s.health_interval)))
        clock.now += 29.9
        d.step()
        assert taints(kube) == {"2": ["NoSchedule"]} and kube.about == []
        clock.now += 0.1
        d.step()
        assert taints(kube) == {"2": ["NoExecute"]}
        assert [(ns, o["kind"], o["name"], r, t, h) for ns, o, r, t, h in kube.about] == [
            ("default", "Node", "n1", "CardUnhealthyEvicting", "Warning", "n1"),
            ("ns", "Pod", "p", "CardUnhealthyEvicting", "Warning", "n1")]
        assert kube.about[1][1]["uid"] == "pod-uid-c"
        assert "held by ns/p" in kube.events[0][1] and "NoExecute" in kube.events[0][1]
        assert sum("evict (unhealthy)" in line for line in dra_node.logs) == 1
        status = driver.status()
        assert status["evictions"] == {"unhealthy": 1} and status["restores"] == {}
        assert status["remediation"] == {"evict": True, "grace": 30, "hold_down": 300}
        os.rename(dra_node.host.path("/dev/xpu2.gone"), dra_node.host.path("/dev/xpu2"))
        clock.now += 5
        d.step()
        assert taints(kube) == {"2": ["NoExecute"]}  # held down
        assert "held down" in driver.unhealthy["2"]
        clock.now += 300
        d.step()
        assert taints(kube) == {}
        assert [r for _ns, _o, r, _t, _h in kube.about[2:]] == ["CardRestored", "CardRestored"]
        assert driver.status()["restores"] == {"recovered": 1}
    finally:
        d.close()


def test_evict_policy_blip_within_grace_evicts_nothing(dra_node, kube, grpc_mod) -> None:
    d = started(dra_node, kube, remedy={f"{DRIVER}/xpu": remedy.Policy(True, grace=30, hold_down=60)})
    driver = next(iter(d.drivers.values()))
    clock = driver.remedy.clock = Clock()
    try:
        os.rename(dra_node.host.path("/dev/xpu1"), dra_node.host.path("/dev/xpu1.gone"))
        d.step()
        clock.now += 20
        os.rename(dra_node.host.path("/dev/xpu1.gone"), dra_node.host.path("/dev/xpu1"))
        d.step()
        clock.now += 20
        d.step()
        assert taints(kube) == {"1": ["NoSchedule"]} and kube.about == []  # held down, never NoExecute
        clock.now += 40
        d.step()
        assert taints(kube) == {}
        assert [r for _ns, _o, r, _t, _h in kube.about] == ["CardRestored"]  # the node's only
        assert driver.status()["evictions"] == {} and driver.status()["restores"] == {"held-down": 1}
    finally:
        d.close()


def test_no_policy_is_todays_behaviour(dra_node, kube, grpc_mod) -> None:
    d = started(dra_node, kube)
    driver = next(iter(d.drivers.values()))
    driver.remedy.clock = clock = Clock()
    try:
        os.rename(dra_node.host.path("/dev/xpu1"), dra_node.host.path("/dev/xpu1.gone"))
        d.step()
        clock.now += 10_000
        d.step()
        assert taints(kube) == {"1": ["NoSchedule"]}
        os.rename(dra_node.host.path("/dev/xpu1.gone"), dra_node.host.path("/dev/xpu1"))
        d.step()
        assert taints(kube) == {} and kube.about == [] and d.next_wait() == d.poll_interval(d.s.health_interval)
        assert driver.status()["remediation"]["evict"] is False
    finally:
        d.close()
