"""deviceplugin/evict.py: who holds a card (kubelet's PodResources answer, built with the real
message classes), and the evictor's calls to the API server (a stand-in recording them, answering
as the API server does: 201, 429 for a budget, 404, 403).  The real API server, NodeRestriction
and a PodDisruptionBudget: tests/k8s/test_remedy_plugin_node.py."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest

from xpu_cdi.deviceplugin import evict
from xpu_cdi.errors import ApiError, PodResourcesError
from xpu_cdi.node.podresources import message

CARD = evict.Card("kunlunxin.com/xpu", "3", "kunlunxin.com/xpu")


def listing(*pods: Tuple[str, str, List[Dict[str, Any]]]) -> Any:
    """A ListPodResourcesResponse: (namespace, pod, containers), a container {"devices": [(resource, ids)],
    "cdi": [names]}."""
    out = message("ListPodResourcesResponse")()
    for ns, name, containers in pods:
        p = out.pod_resources.add(namespace=ns, name=name)
        for i, c in enumerate(containers):
            cr = p.containers.add(name=f"c{i}")
            for resource, ids in c.get("devices", []):
                cr.devices.add(resource_name=resource, device_ids=ids)
            if c.get("cdi"):
                claim = cr.dynamic_resources.add(claim_name="x", claim_namespace=ns).claim_resources.add(
                    driver_name="kunlunxin.com", pool_name="n", device_name="xpu-3")
                for n in c["cdi"]:
                    claim.cdi_devices.add(name=n)
    return out


def test_holders_device_plugin_replicas_and_dra_claims() -> None:
    """A device id of the card's resource, a time-sliced replica of it, a DRA claim resolved to its CDI
    name (how kubelet lists an extended-resource-mapped claim too); not another card, another
    resource of the same id, or a claim-scoped name alone."""
    got = evict.holders(listing(
        ("default", "dp", [{"devices": [("kunlunxin.com/xpu", ["2", "3"])]}]),
        ("team", "sliced", [{}, {"devices": [("kunlunxin.com/xpu", ["3::1"])]}]),
        ("team", "claim", [{"cdi": ["kunlunxin.com/xpu=3", "k8s.kunlunxin.com/claim=u-0"]}]),
        ("default", "other-card", [{"devices": [("kunlunxin.com/xpu", ["4", "33"])]}]),
        ("default", "other-resource", [{"devices": [("huawei.com/npu", ["3"])]}]),
        ("default", "scoped-only", [{"cdi": ["k8s.kunlunxin.com/claim=u-1"]}]),
        ("default", "two-containers", [{"devices": [("kunlunxin.com/xpu", ["3"])]},
                                       {"devices": [("kunlunxin.com/xpu", ["3"])]}]),
    ), CARD)
    assert got == [evict.Pod("default", "dp"), evict.Pod("default", "two-containers"),
                   evict.Pod("team", "claim"), evict.Pod("team", "sliced")]


class FakeApi:
    """Records each request; answers from *answers* ("METHOD path-suffix" -> ApiError or dict), else a pod
    for a GET and {} for the rest."""

    def __init__(self, answers: Dict[str, Any] = {}) -> None:  # noqa: B006 -- read only
        self.calls: List[Tuple[str, str, Any]] = []
        self.answers = dict(answers)

    def request(self, method: str, path: str, body: Any = None) -> Dict[str, Any]:
        self.calls.append((method, path, body))
        for key, answer in self.answers.items():
            m, _sp, suffix = key.partition(" ")
            if method == m and path.endswith(suffix):
                if isinstance(answer, ApiError):
                    raise answer
                return answer
        return {"metadata": {"uid": "uid-" + path.rsplit("/", 1)[-1]}} if method == "GET" else {}


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def make(pods: Any, answers: Dict[str, Any] = {}) -> Tuple[evict.Evictor, FakeApi, FakeApi, List[str], Clock]:  # noqa: B006
    lines: List[str] = []
    api, as_node, clock = FakeApi(), FakeApi(answers), Clock()

    def list_pods() -> Any:
        if isinstance(pods, Exception):
            raise pods
        return pods

    e = evict.Evictor("node-a", lambda line, level=0: lines.append(line), list_pods, api, as_node, clock=clock)
    return e, api, as_node, lines, clock


def evictions(as_node: FakeApi) -> List[Tuple[str, Any]]:
    return [(path, body) for method, path, body in as_node.calls if path.endswith("/eviction")]


def test_evicts_each_holder_as_the_node_with_its_uid() -> None:
    e, api, as_node, lines, _ = make(listing(("team", "a", [{"devices": [("kunlunxin.com/xpu", ["3"])]}])))
    e.evict(CARD, "unhealthy")
    e.step()
    (path, body), = evictions(as_node)
    assert path == "/api/v1/namespaces/team/pods/a/eviction"
    assert body == {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a", "namespace": "team"},
                    "deleteOptions": {"preconditions": {"uid": "uid-a"}}}
    assert e.status()["pods_evicted"] == [{"kind": "kunlunxin.com/xpu", "reason": "unhealthy", "count": 1}]
    events = [(b["involvedObject"]["kind"], b["involvedObject"]["name"], b["reason"], b["metadata"]["namespace"])
              for _m, _p, b in api.calls]
    assert events == [("Node", "node-a", evict.UNHEALTHY, "default"), ("Pod", "a", evict.EVICTING, "team")]
    pod_event = api.calls[1][2]
    assert pod_event["involvedObject"]["uid"] == "uid-a" and pod_event["source"]["component"] == evict.COMPONENT
    assert any("evicted pod team/a" in line for line in lines)
    e.step()  # still listed while it terminates: not evicted twice
    assert len(evictions(as_node)) == 1


def test_a_budget_holds_it_back_and_it_is_retried_not_forced() -> None:
    """429: one log line and one Event saying why, tried again after RETRY, never a delete."""
    budget = ApiError(429, "POST ...: 429 Cannot evict pod as it would violate the pod's disruption budget.")
    e, api, as_node, lines, clock = make(listing(("team", "a", [{"devices": [("kunlunxin.com/xpu", ["3"])]}])),
                                         {"POST /eviction": budget})
    e.evict(CARD, "unhealthy")
    e.step()
    e.step()  # not yet due again
    assert len(evictions(as_node)) == 1
    clock.t += evict.RETRY
    e.step()
    assert len(evictions(as_node)) == 2
    assert not [c for c in as_node.calls if c[0] == "DELETE"]
    assert e.status()["pods_evicted"] == [] and e.status()["evicting"] == [CARD.name]
    assert e.status()["evictions_blocked"] == [{"kind": "kunlunxin.com/xpu", "why": "disruption-budget",
                                                "count": 2}]
    blocked = [b for _m, _p, b in api.calls if b["reason"] == evict.BLOCKED]
    assert len(blocked) == 1 and "disruption budget" in blocked[0]["message"]
    assert sum("refused" in line for line in lines) == 1
    del as_node.answers["POST /eviction"]  # the budget allows it now
    clock.t += evict.RETRY
    e.step()
    assert e.status()["pods_evicted"][0]["count"] == 1


def test_another_nodes_pod_refused_is_counted_not_forced() -> None:
    """The API server's 403 (NodeRestriction: not bound to this node) is a refusal like a budget's."""
    e, _api, as_node, _lines, _ = make(listing(("team", "a", [{"devices": [("kunlunxin.com/xpu", ["3"])]}])),
                                       {"GET /pods/a": ApiError(403, "forbidden")})
    e.evict(CARD, "unhealthy")
    e.step()
    assert evictions(as_node) == [] and e.status()["evictions_blocked"][0]["why"] == "http-403"


def test_done_when_no_pod_holds_it_and_restore_drops_it() -> None:
    e, api, _as_node, _lines, _ = make(listing())
    e.evict(CARD, "unhealthy")
    e.step()
    assert e.status()["evicting"] == []
    e.evict(CARD, "unhealthy")
    e.restore(CARD, "recovered")
    e.step()
    assert e.status()["evicting"] == []
    assert [b["reason"] for _m, _p, b in api.calls][-1] == evict.RESTORED


def test_kubelet_unreachable_waits() -> None:
    e, _api, as_node, lines, _ = make(PodResourcesError("kubelet's pod-resources API at /x did not answer"))
    e.evict(CARD, "unhealthy")
    assert e.step() == evict.RETRY
    assert as_node.calls == [] and any("evictions wait" in line for line in lines)


def test_an_event_refused_is_a_log_line() -> None:
    e, api, _as_node, lines, _ = make(listing())
    api.answers = {"POST /events": ApiError(403, "refused by policy")}
    e.evict(CARD, "unhealthy")
    e.step()
    assert any("not recorded" in line for line in lines)


@pytest.mark.parametrize("value,err", [
    ("kunlunxin.com/xpu:grace=x", "grace"), ("xpu", "KIND"), (["kunlunxin.com/xpu", "kunlunxin.com/xpu"], "twice")])
def test_config_file_evict_refused(value: Any, err: str) -> None:
    from xpu_cdi.deviceplugin import config
    from xpu_cdi.errors import ConfigError

    with pytest.raises(ConfigError, match=err):
        config.from_mapping({"version": "v1", "flags": {"evict": value}}, "f")


def test_config_file_evict() -> None:
    from xpu_cdi import remedy
    from xpu_cdi.deviceplugin import config

    got = config.from_mapping({"version": "v1", "flags": {"evict": ["kunlunxin.com/xpu:grace=5,hold-down=60"],
                                                          "nodeName": "n1"}}, "f")
    assert got == {"evict": {"kunlunxin.com/xpu": remedy.Policy(True, 5.0, 60.0)}, "node_name": "n1"}


# ---- the daemon: what kubelet is told (the fake kubelet of tests/deviceplugin) -------------------------------

def test_daemon_holds_a_recovered_card_down(node: Any, stack: str, kubelet: Any, tmp_path: Any) -> None:
    """--evict with a grace and a hold-down: a card gone is Unhealthy at once; back, it stays Unhealthy to
    kubelet for the hold-down ("held down" its reason in the status file), then Healthy.  The eviction
    itself has no kubelet here (its socket absent): one line saying the evictions wait."""
    import json
    import time

    from support import fakehost, kubeletkit

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "x"}}], "contexts": [{"name": "c", "context": {"cluster": "c",
                                                                                                "user": "u"}}]}))
    p = kubeletkit.PluginProcess(stack, node.args(
        "--evict", "kunlunxin.com/xpu:grace=0.5,hold-down=2", "--node-name", "node-a", "--kubeconfig",
        str(kubeconfig), "--pod-resources-socket", str(tmp_path / "absent.sock")), tmp_path / "p.log")
    try:
        kubelet.wait_registered()
        state = lambda c: kubelet.latest().get(c, ("?",))[0]  # noqa: E731
        kubelet.wait_for(lambda: state("3") == "Healthy", message="card 3 Healthy")
        path = node.host.path("/dev/xpu3")
        path.unlink()
        kubelet.wait_for(lambda: state("3") == "Unhealthy", message="card 3 Unhealthy")
        p.wait_log("kunlunxin.com/xpu=3: unhealthy past the grace: evicting the pods holding it")
        p.wait_log("evictions wait: kubelet's pod-resources API")
        fakehost.mknod(path, fakehost.XPU_MAJOR, 3)
        back = time.monotonic()
        reason = kubelet.wait_for(lambda: json.loads(node.status.read_text())["kinds"]["kunlunxin.com/xpu"][
            "unhealthy"].get("3", "").startswith("healthy again, held down") or None, message="held down")
        assert reason and state("3") == "Unhealthy"
        kubelet.wait_for(lambda: state("3") == "Healthy", message="card 3 offered again")
        assert time.monotonic() - back >= 1.5  # the hold-down, not the first health pass
        text = p.wait_log("kunlunxin.com/xpu=3: healthy for the hold-down: offered again (recovered)")
        whole = kubelet.wait_for(lambda: (lambda d: d if d["kinds"]["kunlunxin.com/xpu"].get("restores") else None)(
            json.loads(node.status.read_text())), message="the restore in the status file")
        assert whole["remediation"]["policies"] == {"kunlunxin.com/xpu": {"grace": 0.5, "hold_down": 2.0}}
        entry = whole["kinds"]["kunlunxin.com/xpu"]  # what the exporter's xpu_cdi_evictions_total reads
        assert entry["remediation"] == {"evict": True, "grace": 0.5, "holdDown": 2.0}
        assert entry["evictions"] == {"unhealthy": 1} and entry["restores"] == {"recovered": 1}
        assert "Traceback" not in text
    finally:
        p.stop()


def test_node_kube_acts_as_the_node_for_evictions_only(tmp_path: Any) -> None:
    """The evictions' client sends Impersonate-User system:node:<node>; the Events' one is the account itself."""
    import json

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t0k"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    own, as_node = evict.node_kube(str(kubeconfig), "node-a")
    h_own, h_node = own._headers(), as_node._headers()
    assert "Impersonate-User" not in h_own and h_node["Impersonate-User"] == "system:node:node-a"
    assert h_own["Authorization"] == h_node["Authorization"] == "Bearer t0k"
    assert h_own["User-Agent"] == h_node["User-Agent"] == evict.COMPONENT
