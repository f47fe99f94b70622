"""A training domain on the real cluster (docs/training.md): an Indexed Job of two pods x 4 NPUs of
a fake 910B host with /etc/hccn.conf, their claims from one template naming the domain, the DRA
driver as deploy/dra's service account under its RBAC and admission policies, the real scheduler,
Job controller, kubelet and containerd.

What a user would check: each container reads the same completed table of 8 ranks at mind-cluster's
path, read-only, naming its pods' IPs, the node's IP and hccn.conf's device IPs, with
RANK_TABLE_FILE and its rank ids in its env; a deleted pod's replacement brings the table back to
initializing, then completed; a kubelet restart changes nothing; and the API server keeps the
driver's status writes to its own node's entries.  The one-node cluster's pods share the node's
network (hostNetwork), so their IPs are the node's: distinct pod IPs are the fleet's test.
"""

from __future__ import annotations

import json
import shutil
from typing import Any, Dict, Iterator, List

import pytest

from support import HANG
from support.dpnode import short_dir
from support.dranode import DraDriver, Identity
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.nodekit import Cards

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
TABLE = "/user/serverid/devindex/config/hccl.json"
DRIVER = "huawei.com"


@pytest.fixture(scope="module")
def npus(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cards]:
    """An 8-NPU 910B host whose hccn.conf gives NPU i 192.168.1.<10+i>."""
    c = Cards(cluster, tmp_path_factory.mktemp("npu"), profile="ascend", npus=8, hccn=True)
    yield c
    c.close()


@pytest.fixture(scope="module")
def npu_driver(cluster: Cluster, npus: Cards, identity: Identity) -> Iterator[DraDriver]:
    work = short_dir()
    d = DraDriver(cluster, npus, work, identity)
    try:
        d.wait_served()
        yield d
    finally:
        d.close()
        shutil.rmtree(work, ignore_errors=True)


def domain_template(cluster: Cluster, name: str, domain: str, size: int, count: int) -> None:
    cluster.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
                   "spec": {"spec": {"devices": {
                       "requests": [{"name": "npus", "exactly": {"deviceClassName": "npu.huawei.com",
                                                                 "count": count}}],
                       "config": [{"requests": ["npus"], "opaque": {"driver": DRIVER, "parameters": {
                           "apiVersion": "xpu-cdi.io/v1", "kind": "TrainingDomain", "name": domain,
                           "size": size}}}]}}}})


def indexed_job(name: str, template: str, size: int) -> Dict[str, Any]:
    pod = nodekit.pod("x", ["sh", "-c", "exec sleep 2147483647"])
    spec = pod["spec"]
    spec["resourceClaims"] = [{"name": "npus", "resourceClaimTemplateName": template}]
    spec["containers"][0]["resources"] = {"claims": [{"name": "npus"}]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"completionMode": "Indexed", "completions": size, "parallelism": size, "backoffLimit": 4,
                     "template": {"metadata": {"labels": {"training": name}}, "spec": spec}}}


def job_pods(cluster: Cluster, job: str) -> Dict[int, Dict[str, Any]]:
    """The job's running, not terminating pods, by completion index."""
    items = cluster.get("pods", "-l", f"training={job}")["items"]
    return {int(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]): p for p in items
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}


def exec_out(cluster: Cluster, pod: str, *argv: str, check: bool = True) -> str:
    return cluster.kubectl("exec", pod, "--", *argv, check=check).stdout


def claim_of(cluster: Cluster, pod: Dict[str, Any]) -> Dict[str, Any]:
    (name,) = [s["resourceClaimName"] for s in pod["status"]["resourceClaimStatuses"]]
    return cluster.get("resourceclaim", name)


def host_table(driver: DraDriver, claim_uid: str) -> Dict[str, Any]:
    """The table the driver keeps for a claim on the host (what its container's bind mount shows)."""
    try:
        return json.loads((driver.dir / "training" / claim_uid / "hccl.json").read_text())
    except (OSError, ValueError):
        return {}


@pytest.fixture
def job(cluster: Cluster) -> Iterator[List[str]]:
    """Names of the Jobs and templates a test made: deleted afterwards, their pods waited for."""
    made: List[str] = []
    yield made
    for name in made:
        cluster.kubectl("delete", "job", name, "--ignore-not-found", "--cascade=foreground", "--wait=true",
                        "--timeout=120s")
        cluster.wait(lambda: not cluster.get("pods", "-l", f"training={name}")["items"], HANG, "the job's pods gone")
        cluster.kubectl("delete", "resourceclaimtemplate", name, "--ignore-not-found")


def test_two_pods_one_domain(cluster: Cluster, npu_driver: DraDriver, job: List[str]) -> None:
    """Two pods x 4 NPUs, one domain: each container reads the same completed table of 8 ranks, its
    own ranks in its env; the table read-only inside; a replaced pod brings it back through
    initializing to completed; a kubelet restart leaves it and the pods as they were."""
    name = nodekit.unique("train")
    job.append(name)
    domain_template(cluster, name, "job-a", 2, 4)
    cluster.apply(indexed_job(name, name, 2))
    pods = cluster.wait(lambda: (lambda p: p if len(p) == 2 else None)(job_pods(cluster, name)), HANG,
                        "both pods running")

    def completed(pod: str) -> Dict[str, Any]:
        r = cluster.kubectl("exec", pod, "--", "cat", TABLE, check=False)
        doc = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else {}
        return doc if doc.get("status") == "completed" else {}

    tables = [cluster.wait(lambda p=p: completed(p["metadata"]["name"]), HANG, "a completed table")
              for _i, p in sorted(pods.items())]
    pods = job_pods(cluster, name)  # their IPs, as the API server has them now
    t = tables[0]
    assert tables[1] == t, tables
    assert (t["version"], t["server_count"]) == ("1.0", "2")
    claims = {i: claim_of(cluster, p) for i, p in pods.items()}
    for i, server in enumerate(t["server_list"]):
        st = pods[i]["status"]
        assert (server["host_ip"], server["container_ip"]) == (st["hostIP"], st["podIP"]), (server, st)
        assert server["server_id"] == st["hostIP"] == cluster.node_ip
        allocated = sorted(int(r["device"]) for r in claims[i]["status"]["allocation"]["devices"]["results"])
        assert [(d["device_id"], d["device_ip"], d["rank_id"]) for d in server["device"]] == [
            (str(n), f"192.168.1.{10 + n}", str(4 * i + k)) for k, n in enumerate(allocated)]
        env = exec_out(cluster, pods[i]["metadata"]["name"], "env").splitlines()
        assert f"RANK_TABLE_FILE={TABLE}" in env and f"XPU_CDI_RANK_INDEX={i}" in env, env
        assert f"XPU_CDI_RANK_IDS={','.join(str(4 * i + k) for k in range(4))}" in env, env
        # the facts the node published on the claim: its own pool's entries, one per NPU
        devices = claims[i]["status"]["devices"]
        assert sorted(int(d["device"]) for d in devices) == allocated
        assert {d["pool"] for d in devices} == {cluster.node_name} and {d["data"]["index"] for d in devices} == {i}
    first = pods[0]["metadata"]["name"]
    r = cluster.kubectl("exec", first, "--", "sh", "-c", f"echo x > {TABLE}", check=False)
    assert r.returncode != 0 and "Read-only file system" in r.stderr, (r.returncode, r.stderr)

    # member 1 replaced: member 0's table goes initializing (member 1 gone), then completed again
    uid0 = claims[0]["metadata"]["uid"]
    seen: List[str] = []

    def follow() -> bool:
        status = host_table(npu_driver, uid0).get("status", "")
        if status and (not seen or seen[-1] != status):
            seen.append(status)
        return seen[-2:] == ["initializing", "completed"]

    old = pods[1]["metadata"]["uid"]
    cluster.kubectl("delete", "pod", pods[1]["metadata"]["name"], "--wait=false")
    cluster.wait(follow, HANG, "member 0's table initializing, then completed", interval=0.01)
    pods = cluster.wait(lambda: (lambda p: p if len(p) == 2 and p[1]["metadata"]["uid"] != old else None)(
        job_pods(cluster, name)), HANG, "the replacement running")
    t = cluster.wait(lambda: completed(first), HANG, "member 0's container reads a completed table")
    assert t["server_list"][1]["container_ip"] == pods[1]["status"]["podIP"]
    new = completed(pods[1]["metadata"]["name"])
    assert new == t
    assert new["server_list"][1]["device"] == [
        {"device_id": r["device"], "device_ip": f"192.168.1.{10 + int(r['device'])}", "rank_id": str(4 + k)}
        for k, r in enumerate(sorted(claim_of(cluster, pods[1])["status"]["allocation"]["devices"]["results"],
                                     key=lambda r: int(r["device"])))]

    # a kubelet restart: the pods, their containers and the tables as they were
    before = {i: p["status"]["containerStatuses"][0]["containerID"] for i, p in pods.items()}
    table_before = (npu_driver.dir / "training" / uid0 / "hccl.json").read_bytes()
    cluster.stop_kubelet()
    cluster.start_kubelet()
    after = job_pods(cluster, name)
    assert {i: p["status"]["containerStatuses"][0]["containerID"] for i, p in after.items()} == before
    assert (npu_driver.dir / "training" / uid0 / "hccl.json").read_bytes() == table_before
    # the container reads it as before (exec goes through kubelet: once it serves again)
    assert cluster.wait(lambda: completed(first), HANG, "member 0's table read after the restart") == t


def test_status_writes_held_to_the_own_nodes_entries(cluster: Cluster, npu_driver: DraDriver, identity: Identity,
                                                     job: List[str]) -> None:
    """As the driver (its pod-bound token): another node's entry, another driver's, a change of the
    claim's labels are refused by the admission policy, each naming what; its own pool's entry passes."""
    name = nodekit.unique("train")
    job.append(name)
    domain_template(cluster, name, "job-b", 1, 1)
    cluster.apply(indexed_job(name, name, 1))
    pods = cluster.wait(lambda: (lambda p: p if len(p) == 1 else None)(job_pods(cluster, name)), HANG, "running")
    claim = claim_of(cluster, pods[0])
    device = claim["status"]["allocation"]["devices"]["results"][0]["device"]
    ns, cname = claim["metadata"]["namespace"], claim["metadata"]["name"]

    def apply(entry: Dict[str, Any], meta: Dict[str, Any] = {}) -> Any:
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": cname, "namespace": ns, **meta}, "status": {"devices": [entry]}}
        return cluster.run_on_node([str(cluster.kubectl_bin), "--kubeconfig", str(identity.kubeconfig), "apply",
                                    "--server-side", "--subresource", "status", "--field-manager", "test-as-driver",
                                    "--force-conflicts", "-f", "-"], input=json.dumps(body), mount=False)

    ok = apply({"driver": DRIVER, "pool": cluster.node_name, "device": device, "data": {"kind": "Test"}})
    assert ok.returncode == 0, ok.stderr
    # another node's entry: refused (the API server's validation or the policy, whichever speaks first)
    other = apply({"driver": DRIVER, "pool": "another-node", "device": device})
    assert other.returncode != 0 and "another-node" in other.stderr, other.stderr
    # the claim's labels through its status: refused, or dropped by the status subresource; never stored
    apply({"driver": DRIVER, "pool": cluster.node_name, "device": device}, {"labels": {"x": "y"}})
    assert "x" not in (cluster.get("resourceclaim", cname)["metadata"].get("labels") or {})
