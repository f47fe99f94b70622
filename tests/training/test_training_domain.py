"""A training domain across servers (docs/training.md) on the training fleet: a 2 x 8-NPU Indexed
Job on two of its 910B nodes, each node's deploy/dra driver (the DaemonSet, its RBAC and admission
policies) writing for its own pod only.  Both containers read the same completed table of 16
ranks: device IPs each node's hccn.conf, host IPs the nodes', container IPs the pods' (the pod
network: distinct).  Pod 1 deleted: pod 0's table goes initializing, then completed with the
replacement's new IP."""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List

import pytest
from support import HANG
from support.k8s import nodekit
from support.k8s.fleet import TRAINING_NODES, Fleet

pytestmark = [pytest.mark.privileged]
TABLE = "/user/serverid/devindex/config/hccl.json"
HCCN = {s.name: s.hccn for s in TRAINING_NODES}  # node -> its hccn.conf subnet: NPU i at 192.168.<n>.<10+i>


@pytest.fixture
def job(training_fleet: Fleet) -> Iterator[List[str]]:
    made: List[str] = []
    yield made
    for name in made:
        training_fleet.kubectl("delete", "job", name, "--ignore-not-found", "--cascade=foreground", "--wait=true",
                               timeout=180)
        training_fleet.wait(lambda: not training_fleet.get("pods", "-l", f"training={name}")["items"], HANG,
                            "the job's pods gone")
        training_fleet.kubectl("delete", "resourceclaimtemplate", name, "--ignore-not-found")


def start_job(fleet: Fleet, name: str, size: int, npus: int) -> None:
    fleet.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
                 "spec": {"spec": {"devices": {
                     "requests": [{"name": "npus", "exactly": {"deviceClassName": "npu.huawei.com", "count": npus}}],
                     "config": [{"requests": ["npus"], "opaque": {"driver": "huawei.com", "parameters": {
                         "apiVersion": "xpu-cdi.io/v1", "kind": "TrainingDomain", "name": name, "size": size}}}]}}}})
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "npus", "resourceClaimTemplateName": name}],
            "containers": [{"name": "c", "image": nodekit.BUSYBOX, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", "exec sleep 2147483647"],
                            "resources": {"claims": [{"name": "npus"}]}}]}
    fleet.apply({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
                 "spec": {"completionMode": "Indexed", "completions": size, "parallelism": size, "backoffLimit": 4,
                          "template": {"metadata": {"labels": {"training": name}}, "spec": spec}}})


def running(fleet: Fleet, job: str) -> Dict[int, Dict[str, Any]]:
    items = fleet.get("pods", "-l", f"training={job}")["items"]
    return {int(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]): p for p in items
            if p["status"].get("phase") == "Running" and p["status"].get("podIP")
            and not p["metadata"].get("deletionTimestamp")}


def table(fleet: Fleet, pod: str) -> Dict[str, Any]:
    r = fleet.kubectl("exec", pod, "--", "cat", TABLE, check=False)
    try:
        return json.loads(r.stdout) if r.returncode == 0 else {}
    except ValueError:
        return {}


def completed(fleet: Fleet, pod: str) -> Dict[str, Any]:
    t = table(fleet, pod)
    return t if t.get("status") == "completed" else {}


def test_two_servers_sixteen_ranks(training_fleet: Fleet, job: List[str]) -> None:
    fleet = training_fleet
    name = nodekit.unique("train")
    job.append(name)
    start_job(fleet, name, 2, 8)
    pods = fleet.wait(lambda: (lambda p: p if len(p) == 2 else None)(running(fleet, name)), HANG,
                      "both pods running")
    tables = [fleet.wait(lambda p=p: completed(fleet, p["metadata"]["name"]), HANG, "a completed table")
              for _i, p in sorted(pods.items())]
    pods = running(fleet, name)
    t = tables[0]
    assert tables[1] == t and (t["version"], t["server_count"]) == ("1.0", "2"), tables
    nodes = {n["metadata"]["name"]: {a["type"]: a["address"] for a in n["status"]["addresses"]}
             for n in fleet.get("nodes")["items"]}
    assert pods[0]["spec"]["nodeName"] != pods[1]["spec"]["nodeName"]
    assert pods[0]["status"]["podIP"] != pods[1]["status"]["podIP"]
    for i, server in enumerate(t["server_list"]):
        node = pods[i]["spec"]["nodeName"]
        assert server["host_ip"] == server["server_id"] == nodes[node]["InternalIP"], (server, nodes[node])
        assert server["container_ip"] == pods[i]["status"]["podIP"]
        assert [(d["device_id"], d["device_ip"], d["rank_id"]) for d in server["device"]] == [
            (str(n), f"192.168.{HCCN[node]}.{10 + n}", str(8 * i + n)) for n in range(8)]

    # pod 1 deleted: the Job's replacement (same index, a new pod IP) completes the table again
    first, old = pods[0]["metadata"]["name"], pods[1]
    fleet.kubectl("delete", "pod", old["metadata"]["name"], "--wait=false")
    fleet.wait(lambda: table(fleet, first).get("status") == "initializing", HANG, "pod 0's table initializing")
    pods = fleet.wait(lambda: (lambda p: p if len(p) == 2 and p[1]["metadata"]["uid"] != old["metadata"]["uid"]
                               else None)(running(fleet, name)), HANG, "the replacement running")
    t = fleet.wait(lambda: completed(fleet, first), HANG, "pod 0's table completed again")
    assert t["server_list"][1]["container_ip"] == pods[1]["status"]["podIP"] != old["status"]["podIP"]
    assert completed(fleet, pods[1]["metadata"]["name"]) == t
