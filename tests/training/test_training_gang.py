"""Gangs on the training fleet (issue 42, item 3; docs/training.md "Gangs"), with the real
Kubernetes 1.37 API server, scheduler and controllers: a job of three pods, each one DRA claim of
eight NPUs from deploy/dra's DeviceClass, in a PodGroup whose policy is a gang of three
(``scheduling.k8s.io/v1beta1``, the GenericWorkload gate: the scheduler's GangScheduling plugin
and its pod-group cycle).  With one node's NPUs held by another pod, the job holds no card (no
claim allocated, no pod bound) and stays Pending; once that node frees, all three start, one per
node, each with eight NPUs of its node."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple

import pytest
from support import HANG, matrix
from support.k8s import nodekit
from support.k8s.fleet import TRAINING_NODES, Fleet

pytestmark = [pytest.mark.privileged]
CLASS = "npu.huawei.com"  # deploy/dra's DeviceClass of the Ascend driver
SCHEDULING = "scheduling.k8s.io/v1beta1"
WORKLOADS, PODGROUPS = "workloads.scheduling.k8s.io", "podgroups.scheduling.k8s.io"  # kubectl's names
#: What a worker prints: each NPU node it has and whether it opens (ENXIO: the fake card is there
#: and the device cgroup lets it through); then it stays running.
SCRIPT = (f"for n in /dev/davinci*; do [ -e $n ] && {{ echo present $n; (echo x > $n) 2>&1; }}; done; "
          f"echo {nodekit.DONE}; exec sleep 2147483647")


@pytest.fixture
def made(training_fleet: Fleet) -> Iterator[List[Tuple[str, str]]]:
    """(kind, name) of what a test makes, deleted afterwards, last made first; until no claim is left."""
    objects: List[Tuple[str, str]] = []
    yield objects
    for kind, name in reversed(objects):
        training_fleet.kubectl("delete", kind, name, "--ignore-not-found", "--wait=true", timeout=180)
    training_fleet.wait(lambda: not training_fleet.get("resourceclaims")["items"], 2 * HANG, "the claims gone")


def container(claim: str) -> Dict[str, Any]:
    return {"name": "c", "image": nodekit.BUSYBOX, "imagePullPolicy": "Never", "command": ["sh", "-c", SCRIPT],
            "resources": {"claims": [{"name": claim}]}}


def claims_of(fleet: Fleet, pod: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The ResourceClaims generated for *pod* (by owner: a Pending pod's status may not name them yet)."""
    uid = pod["metadata"]["uid"]
    return [c for c in fleet.get("resourceclaims")["items"]
            if any(o.get("uid") == uid for o in c["metadata"].get("ownerReferences") or [])]


def allocated(claim: Dict[str, Any]) -> List[Tuple[str, str]]:
    """(pool, device) of *claim*'s allocation; [] when it has none."""
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    return sorted((r["pool"], r["device"]) for r in results)


def condition(fleet: Fleet, group: str) -> Dict[str, Any]:
    """The PodGroup's PodGroupInitiallyScheduled condition ({} while it has none)."""
    conds = (fleet.get(PODGROUPS, group).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "PodGroupInitiallyScheduled"), {})


def test_a_gang_holds_no_card_until_every_member_fits(training_fleet: Fleet,
                                                      made: List[Tuple[str, str]]) -> None:
    fleet = training_fleet
    a, b, c = TRAINING_NODES
    tmpl = nodekit.unique("eight-npus")
    fleet.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": tmpl},
                 "spec": {"spec": {"devices": {"requests": [
                     {"name": "npus", "exactly": {"deviceClassName": CLASS, "count": 8}}]}}}})
    made.append(("resourceclaimtemplate", tmpl))

    # another job's pod holds node C's eight NPUs
    holder = nodekit.unique("holder")
    fleet.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": holder}, "spec": {
        "terminationGracePeriodSeconds": 1, "nodeSelector": {"kubernetes.io/hostname": c.name},
        "resourceClaims": [{"name": "npus", "resourceClaimTemplateName": tmpl}], "containers": [container("npus")]}})
    made.append(("pod", holder))
    fleet.control.wait_pod_phase(holder, "Running", 3 * HANG)
    (held,) = claims_of(fleet, fleet.control.pod(holder))
    assert {pool for pool, _ in allocated(held)} == {c.name} and len(allocated(held)) == 8, held

    # the training job: a Workload, its gang of three, and an indexed Job whose pods name the gang
    job = nodekit.unique("train")
    fleet.apply({"apiVersion": SCHEDULING, "kind": "Workload", "metadata": {"name": job}, "spec": {
        "podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}}}]}})
    made.append((WORKLOADS, job))
    fleet.apply({"apiVersion": SCHEDULING, "kind": "PodGroup", "metadata": {"name": job}, "spec": {
        "workloadRef": {"workloadName": job, "templateName": "workers"},
        "schedulingPolicy": {"gang": {"minCount": 3}}}})
    made.append((PODGROUPS, job))
    fleet.apply({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job}, "spec": {
        "parallelism": 3, "completions": 3, "completionMode": "Indexed", "backoffLimit": 0,
        "template": {"metadata": {"labels": {"job": job}}, "spec": {
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "schedulingGroup": {"podGroupName": job},
            "resourceClaims": [{"name": "npus", "resourceClaimTemplateName": tmpl}],
            "containers": [container("npus")]}}}})
    made.append(("job", job))

    def workers() -> List[Dict[str, Any]]:
        return fleet.get("pods", "-l", f"job={job}")["items"]

    # the scheduler tried the gang as a whole and found no place for it
    fleet.wait(lambda: len(workers()) == 3 and condition(fleet, job).get("reason") == "Unschedulable",
               3 * HANG, f"PodGroup {job} found Unschedulable")
    pods = workers()
    for p in pods:
        assert p["status"]["phase"] == "Pending" and not p["spec"].get("nodeName"), p["status"]
        assert p["spec"]["schedulingGroup"] == {"podGroupName": job}
        claims = claims_of(fleet, p)
        assert len(claims) == 1 and allocated(claims[0]) == [], claims  # no card held by any member
    print(f"the gang: {condition(fleet, job).get('message')}")

    # node C frees: all three start, one per node, each with its node's eight NPUs
    fleet.kubectl("delete", "pod", holder, "--wait=true", timeout=180)

    def running() -> List[Dict[str, Any]]:
        now = workers()
        return now if len(now) == 3 and all(p["status"].get("phase") == "Running" for p in now) else []

    pods = fleet.wait(running, 3 * HANG, f"job {job}'s three pods Running", interval=0.5)
    assert sorted(p["spec"]["nodeName"] for p in pods) == [a.name, b.name, c.name]
    for p in pods:
        node, name = p["spec"]["nodeName"], p["metadata"]["name"]
        (claim,) = claims_of(fleet, p)
        got = allocated(claim)
        assert {pool for pool, _ in got} == {node} and len(got) == 8, claim
        out = fleet.wait(lambda: (lambda o: o if nodekit.DONE in o else None)(fleet.control.logs(name)), HANG,
                         f"pod {name}'s output")
        present = [ln.split()[1] for ln in out.splitlines() if ln.startswith("present ")]
        assert sorted(present) == sorted([f"/dev/davinci{d}" for _, d in got] + ["/dev/davinci_manager"]), out
        assert out.count(matrix.ENXIO) == 9, out
    assert condition(fleet, job).get("status") == "True", condition(fleet, job)
