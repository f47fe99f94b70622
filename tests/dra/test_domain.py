"""Training domains (dra/domain.py): the TrainingDomain config, a pod's rank index, the table assembled
from the members' published facts (only what each claim's own node may publish), and the driver on a
fake 910B host with hccn.conf: prepare mounts the member's table and says its ranks, the facts go on
the claim, the table follows the members (initializing -> completed -> a replaced pod), unprepare
removes it all, a restart picks the member up from the checkpoint."""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest
from click.testing import CliRunner

from support import fakehost
from support.fakeapi import FakeKube
from xpu_cdi import log
from xpu_cdi.cli import main
from xpu_cdi.dra import config, domain
from xpu_cdi.node import claimspec
from xpu_cdi.errors import ClaimError

DRIVER = "huawei.com"
KIND = "huawei.com/npu"
PARAMS = {"apiVersion": "xpu-cdi.io/v1", "kind": "TrainingDomain", "name": "job-a", "size": 2}


def until(cond: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"not within {timeout}s: {what}")


def claim(name: str, uid: str, node: str, devices: List[str], params: Any = PARAMS, pod: str = "",
          published: List[Dict[str, Any]] = (), created: str = "2026-12-07T20:00:00Z") -> Dict[str, Any]:
    status: Dict[str, Any] = {"allocation": {
        "devices": {"results": [{"request": "npus", "driver": DRIVER, "pool": node, "device": d} for d in devices],
                    "config": [{"source": "FromClaim", "requests": ["npus"],
                                "opaque": {"driver": DRIVER, "parameters": copy.deepcopy(params)}}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    if pod:
        status["reservedFor"] = [{"resource": "pods", "name": pod, "uid": "uid-" + pod}]
    if published:
        status["devices"] = list(published)
    return {"metadata": {"namespace": "ns", "name": name, "uid": uid, "creationTimestamp": created},
            "status": status}


def facts(node: str, index: int, pod: str, pod_ip: str, devices: Dict[str, int], domain_name: str = "job-a",
          host: str = "10.0.0.2") -> List[Dict[str, Any]]:
    return [{"driver": DRIVER, "pool": node, "device": name,
             "data": domain.member_data(domain.Spec(domain_name, 2), index, pod, "uid-" + pod, host, pod_ip, phy,
                                        f"192.168.2.{10 + phy}")} for name, phy in devices.items()]


# -- the config, the index ----------------------------------------------------------------------------------

def test_config_parsed() -> None:
    assert domain.parse(PARAMS) == domain.Spec("job-a", 2)
    assert domain.spec_of(claim("c", "u", "n1", ["0"]), DRIVER) == domain.Spec("job-a", 2)
    assert domain.spec_of(claim("c", "u", "n1", ["0"]), "kunlunxin.com") is None  # another driver's config


@pytest.mark.parametrize("params,why", [
    ("job-a", "must be an object"),
    (dict(PARAMS, apiVersion="v1"), "is not known"),
    (dict(PARAMS, kind="ComputeDomain"), "is not known"),
    (dict(PARAMS, path="/etc"), "unknown field"),
    (dict(PARAMS, name="Job_A"), "not a DNS label"),
    (dict(PARAMS, name="../x"), "not a DNS label"),
    (dict(PARAMS, name="a" * 64), "not a DNS label"),
    (dict(PARAMS, size=0), "from 1 to 4096"),
    (dict(PARAMS, size=True), "from 1 to 4096"),
    (dict(PARAMS, size="2"), "from 1 to 4096"),
    (dict(PARAMS, size=4097), "from 1 to 4096"),
])
def test_bad_config_refused_in_one_line(params: Any, why: str) -> None:
    with pytest.raises(ClaimError, match=why) as err:
        domain.spec_of(claim("c", "u", "n1", ["0"], params), DRIVER)
    assert "\n" not in str(err.value)


def test_two_domains_in_one_claim_refused() -> None:
    c = claim("c", "u", "n1", ["0"])
    c["status"]["allocation"]["devices"]["config"].append(
        {"source": "FromClass", "opaque": {"driver": DRIVER, "parameters": dict(PARAMS, name="job-b")}})
    with pytest.raises(ClaimError, match="more than one training domain"):
        domain.spec_of(c, DRIVER)


@pytest.mark.parametrize("meta,want", [
    ({"labels": {"batch.kubernetes.io/job-completion-index": "1"}}, 1),
    ({"annotations": {"batch.kubernetes.io/job-completion-index": "0"}}, 0),
    ({"labels": {"apps.kubernetes.io/pod-index": "1"}}, 1),
    ({"labels": {}}, "no rank index"),
    ({"labels": {"apps.kubernetes.io/pod-index": "2"}}, "has 2 members"),
    ({"labels": {"apps.kubernetes.io/pod-index": "01"}}, "not an index"),
    ({"labels": {"apps.kubernetes.io/pod-index": "-1"}}, "not an index"),
])
def test_rank_index(meta: Dict[str, Any], want: Any) -> None:
    pod = {"metadata": dict(meta, name="p")}
    if isinstance(want, int):
        assert domain.index_of(pod, 2) == want
    else:
        with pytest.raises(ClaimError, match=want):
            domain.index_of(pod, 2)


# -- assembling ----------------------------------------------------------------------------------------------

def test_members_from_what_each_node_published() -> None:
    spec = domain.Spec("job-a", 2)
    a = claim("a", "ua", "n1", ["0", "1"], pod="p0", published=facts("n1", 0, "p0", "10.1.0.1", {"0": 0, "1": 1},
                                                                            host="10.0.0.1"))
    b = claim("b", "ub", "n2", ["2", "3"], pod="p1", published=facts("n2", 1, "p1", "10.1.0.2", {"2": 2, "3": 3}))
    found, notes = domain.members([b, a], spec, DRIVER)
    assert notes == []
    assert [(m.index, m.server_id, m.container_ip, [d.device_id for d in m.devices]) for m in found] == [
        (0, "10.0.0.1", "10.1.0.1", [0, 1]), (1, "10.0.0.2", "10.1.0.2", [2, 3])]
    # another domain's claim, or one of no domain, is no member
    other = claim("o", "uo", "n3", ["0", "1"], dict(PARAMS, name="job-b"), pod="q",
                  published=facts("n3", 1, "q", "10.1.0.9", {"0": 0, "1": 1}, domain_name="job-b"))
    assert len(domain.members([a, b, other], spec, DRIVER)[0]) == 2


def test_members_only_what_the_claims_own_node_published() -> None:
    spec = domain.Spec("job-a", 2)
    # facts said for pool n2 on a claim allocated on n1: not that claim's node's
    forged = claim("f", "uf", "n1", ["0", "1"], pod="p0", published=facts("n2", 0, "p0", "10.1.0.1", {"0": 0, "1": 1}))
    assert domain.members([forged], spec, DRIVER)[0] == []
    # facts for a device the claim was not allocated: the claim's facts are partial, not taken
    extra = claim("e", "ue", "n1", ["0", "1"], pod="p0", published=facts("n1", 0, "p0", "10.1.0.1", {"0": 0, "7": 7}))
    found, notes = domain.members([extra], spec, DRIVER)
    assert found == [] and "partial" in notes[0]
    # a pod IP of a pod the claim is not reserved for (the old pod's) is not taken
    stale = claim("s", "us", "n1", ["0", "1"], pod="p0-new",
                  published=facts("n1", 0, "p0", "10.1.0.1", {"0": 0, "1": 1}))
    [m] = domain.members([stale], spec, DRIVER)[0]
    assert m.container_ip == ""


def test_replaced_pod_the_reserved_newest_claim_wins() -> None:
    spec = domain.Spec("job-a", 2)
    old = claim("old", "u1", "n1", ["0", "1"], published=facts("n1", 0, "p0", "10.1.0.1", {"0": 0, "1": 1}))
    new = claim("new", "u2", "n1", ["2", "3"], pod="p0b", created="2026-12-07T21:00:00Z",
                published=facts("n1", 0, "p0b", "10.1.0.7", {"2": 2, "3": 3}))
    [m] = domain.members([new, old], spec, DRIVER)[0]
    assert m.container_ip == "10.1.0.7" and [d.device_id for d in m.devices] == [2, 3]


# -- the driver ------------------------------------------------------------------------------------------------

class TrainingNode:
    """A 4-NPU 910B host with hccn.conf, its static spec, the driver stepped by hand."""

    def __init__(self, root: Path, sockets: Path) -> None:
        self.root = root
        self.host = fakehost.ascend(root, cards=4, hccn=True)
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

    def daemon(self, kube: FakeKube) -> Any:
        from xpu_cdi.dra.daemon import Daemon
        from xpu_cdi.generate import profile as _profile

        d = Daemon(self.settings, log=log.into(self.logs), kube=kube)
        d.profiles = [_profile.load_all()["ascend"]]
        d.ours = {p.kind: p.name for p in d.profiles}
        d.step()
        assert KIND in d.drivers, self.logs
        return d

    def table_dir(self, uid: str) -> Path:
        return Path(self.settings.plugins_dir) / DRIVER / "training" / uid

    def table(self, uid: str) -> Dict[str, Any]:
        return json.loads((self.table_dir(uid) / "hccl.json").read_text())


@pytest.fixture
def node(host_root: Path) -> Iterator[TrainingNode]:
    d = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))
    yield TrainingNode(host_root, d)
    shutil.rmtree(d, ignore_errors=True)


def pod(name: str, index: int, ip: str = "") -> Dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": "uid-" + name,
                         "labels": {"batch.kubernetes.io/job-completion-index": str(index)}},
            "status": {"hostIP": "10.0.0.1", "podIP": ip}}


pytestmark = pytest.mark.privileged  # the fake host's device nodes (mknod)


def test_prepare_mounts_the_table_and_follows_the_members(node: TrainingNode) -> None:
    kube = FakeKube()
    d = node.daemon(kube)
    try:
        kd = d.drivers[KIND]
        kube.claims[("ns", "c0")] = claim("c0", "u0", "n1", ["0", "1"], pod="p0")
        kube.pods[("ns", "p0")] = pod("p0", 0)
        out = kd.prepare([("ns", "c0", "u0")])
        devices, err = out["u0"]
        assert err == "", node.logs
        cdi = [c for dev in devices for c in dev.cdi]
        assert devices[0].cdi == ["huawei.com/npu=0", "k8s.huawei.com/claim=u0-training"]  # once, with the first
        assert cdi == ["huawei.com/npu=0", "k8s.huawei.com/claim=u0-training", "huawei.com/npu=1"]
        spec = json.loads(Path(claimspec.listed(str(node.spec_dir), DRIVER)["u0"]).read_text())
        edits = spec["devices"][0]["containerEdits"]
        assert edits["mounts"] == [{"hostPath": str(node.table_dir("u0")),
                                    "containerPath": "/user/serverid/devindex/config",
                                    "options": ["ro", "nosuid", "nodev", "noexec", "bind"]}]
        assert edits["env"] == ["RANK_TABLE_FILE=/user/serverid/devindex/config/hccl.json",
                                "XPU_CDI_TRAINING_DOMAIN=job-a", "XPU_CDI_RANK_INDEX=0", "XPU_CDI_RANK_IDS=0,1",
                                "XPU_CDI_RANK_SIZE=4"]
        first = node.table("u0")  # there before the container starts
        assert first["status"] == "initializing" and first["server_count"] == "1"
        assert oct(os.stat(node.table_dir("u0") / "hccl.json").st_mode & 0o777) == "0o644"

        # the sandbox gets its IP: the facts go on the claim (hccn.conf's addresses)
        kube.pods[("ns", "p0")] = pod("p0", 0, "10.1.0.1")
        published = until(lambda: [e for e in kube.claims[("ns", "c0")]["status"].get("devices", [])
                                   if e["data"]["podIP"]], what="pod IP published")
        assert [(e["pool"], e["device"], e["data"]["deviceID"], e["data"]["deviceIP"]) for e in published] == [
            ("n1", "0", 0, "192.168.1.10"), ("n1", "1", 1, "192.168.1.11")]
        assert node.table("u0")["status"] == "initializing"  # member 1 unknown

        # member 1, on another node, publishes: completed, 4 ranks, both pod IPs
        kube.claims[("ns", "c1")] = claim("c1", "u1", "n2", ["0", "1"], pod="p1",
                                          published=facts("n2", 1, "p1", "10.1.0.2", {"0": 0, "1": 1}))
        t = until(lambda: node.table("u0")["status"] == "completed" and node.table("u0"), what="completed")
        assert [s["container_ip"] for s in t["server_list"]] == ["10.1.0.1", "10.1.0.2"]
        assert [s["host_ip"] for s in t["server_list"]] == ["10.0.0.1", "10.0.0.2"]
        assert [d["rank_id"] for s in t["server_list"] for d in s["device"]] == ["0", "1", "2", "3"]
        assert [d["device_ip"] for d in t["server_list"][0]["device"]] == ["192.168.1.10", "192.168.1.11"]

        # member 1's pod replaced: gone (initializing), then back with its new IP (completed)
        del kube.claims[("ns", "c1")]
        until(lambda: node.table("u0")["status"] == "initializing", what="initializing after the member left")
        kube.claims[("ns", "c1b")] = claim("c1b", "u1b", "n2", ["0", "1"], pod="p1b",
                                           published=facts("n2", 1, "p1b", "10.1.0.9", {"0": 0, "1": 1}))
        t = until(lambda: node.table("u0")["status"] == "completed" and node.table("u0"), what="completed again")
        assert t["server_list"][1]["container_ip"] == "10.1.0.9"

        # a restarted driver picks the member up from the checkpoint: the table still follows
        d.close()
        d = node.daemon(kube)
        kd = d.drivers[KIND]
        kube.claims[("ns", "c1b")]["status"]["devices"] = facts("n2", 1, "p1b", "10.1.0.10", {"0": 0, "1": 1})
        until(lambda: node.table("u0")["server_list"][1]["container_ip"] == "10.1.0.10", what="restart")

        assert kd.unprepare([("ns", "c0", "u0")]) == {"u0": ""}
        assert not node.table_dir("u0").exists() and claimspec.listed(str(node.spec_dir), DRIVER) == {}
    finally:
        d.close()


@pytest.mark.parametrize("change,why", [
    (lambda c, p: c["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"].update(size=0),
     "size 0 must be"),
    (lambda c, p: p["metadata"]["labels"].clear(), "has no rank index"),
    (lambda c, p: p["metadata"].update(uid="other"), "not the one the claim is reserved for"),
    (lambda c, p: c["status"]["reservedFor"].append({"resource": "pods", "name": "x", "uid": "y"}),
     "reserved for 2 pods"),
])
def test_bad_member_refused_leaves_nothing(node: TrainingNode, change: Callable, why: str) -> None:
    kube = FakeKube()
    d = node.daemon(kube)
    try:
        c, p = claim("c0", "u0", "n1", ["0", "1"], pod="p0"), pod("p0", 0)
        change(c, p)
        kube.claims[("ns", "c0")], kube.pods[("ns", "p0")] = c, p
        devices, err = d.drivers[KIND].prepare([("ns", "c0", "u0")])["u0"]
        assert devices == [] and why in err and "\n" not in err
        assert not node.table_dir("u0").exists() and claimspec.listed(str(node.spec_dir), DRIVER) == {}
    finally:
        d.close()


def test_npu_without_an_address_refused(node: TrainingNode) -> None:
    conf = node.root / "etc/hccn.conf"
    conf.write_text(fakehost.hccn_conf(4, skip=(1,)))
    kube = FakeKube()
    d = node.daemon(kube)
    try:
        kube.claims[("ns", "c0")] = claim("c0", "u0", "n1", ["0", "1"], pod="p0")
        kube.pods[("ns", "p0")] = pod("p0", 0)
        devices, err = d.drivers[KIND].prepare([("ns", "c0", "u0")])["u0"]
        assert devices == [] and "NPU 1 has no RoCE address (address_1= in /etc/hccn.conf)" in err
        assert claimspec.listed(str(node.spec_dir), DRIVER) == {}
    finally:
        d.close()


def test_claim_of_no_domain_unchanged(node: TrainingNode) -> None:
    kube = FakeKube()
    d = node.daemon(kube)
    try:
        c = claim("c0", "u0", "n1", ["2"], pod="p0")
        del c["status"]["allocation"]["devices"]["config"]
        kube.claims[("ns", "c0")] = c
        devices, err = d.drivers[KIND].prepare([("ns", "c0", "u0")])["u0"]
        assert err == "" and [x for dev in devices for x in dev.cdi] == ["huawei.com/npu=2"]
        assert ("GET", "/api/v1/namespaces/ns/pods/p0") not in kube.calls  # no pod read for it
    finally:
        d.close()


def test_copy_of_claim_helper_is_independent() -> None:
    a = claim("a", "u", "n1", ["0"])
    b = copy.deepcopy(a)
    b["status"]["allocation"]["devices"]["results"].clear()
    assert a["status"]["allocation"]["devices"]["results"]
