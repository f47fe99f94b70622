"""The training fleet itself (conftest.py's ``training_fleet``, docs/training.md): three 8 x 910B
nodes on addresses of their own, every NPU published by deploy/dra's driver with its node's
hccn.conf address, and Kubernetes 1.37's Workload API served."""

from __future__ import annotations

import ipaddress
from typing import Any, Dict

import pytest
from support.k8s.fleet import MAIN, NODES, TRAINING, TRAINING_NODES, Fleet
from support.k8s.fleetdeploy import DRA_DS, ds_pods, slices

pytestmark = [pytest.mark.privileged]


def test_apart_from_the_main_fleet() -> None:
    """Names, bridge and addresses differ from tests/fleet/'s, which may run at the same time."""
    assert not {s.name for s in TRAINING_NODES} & {s.name for s in NODES}
    assert (TRAINING.control, TRAINING.bridge) != (MAIN.control, MAIN.bridge)
    assert not ipaddress.ip_network(f"{TRAINING.subnet}.0/24").overlaps(ipaddress.ip_network(f"{MAIN.subnet}.0/24"))
    assert not ipaddress.ip_network(TRAINING.pod_cidr).overlaps(ipaddress.ip_network(MAIN.pod_cidr))
    assert len({s.hccn for s in TRAINING_NODES}) == len(TRAINING_NODES) and all(s.hccn for s in TRAINING_NODES)


def test_three_910b_nodes_ready_on_their_addresses(training_fleet: Fleet) -> None:
    nodes = {n["metadata"]["name"]: n for n in training_fleet.get("nodes")["items"]}
    assert sorted(nodes) == sorted(s.name for s in TRAINING_NODES)
    for spec in TRAINING_NODES:
        addresses = {a["type"]: a["address"] for a in nodes[spec.name]["status"]["addresses"]}
        assert addresses["InternalIP"] == spec.ip and spec.ip.startswith(TRAINING.subnet + "."), addresses
        assert training_fleet.nodes[spec.name].node_ready(nodes[spec.name])
    assert sorted(p["spec"]["nodeName"] for p in ds_pods(training_fleet, DRA_DS)) == sorted(nodes)


def attributes(device: Dict[str, Any]) -> Dict[str, Any]:
    return {k: next(iter(v.values())) for k, v in device.get("attributes", {}).items()}


def test_every_npu_published_with_its_nodes_device_ip(training_fleet: Fleet) -> None:
    """Each node's pool: its eight 910B, one HCCS domain (an Atlas 800T A2), each NPU's deviceIP
    the address its node's /etc/hccn.conf gives it, so no two NPUs of the fleet share one."""
    seen = []
    for spec in TRAINING_NODES:
        devices = {d["name"]: attributes(d) for s in slices(training_fleet, spec.name) for d in s["spec"]["devices"]}
        assert sorted(devices, key=int) == [str(i) for i in range(spec.cards)], devices
        for i in range(spec.cards):
            a = devices[str(i)]
            assert (a["model"], a["hccsDomain"], a["deviceIP"]) == ("Ascend910B", 0, f"192.168.{spec.hccn}.{10 + i}"), a
            seen.append(a["deviceIP"])
    assert len(set(seen)) == len(seen) == 24


def test_the_workload_api_is_served(training_fleet: Fleet) -> None:
    """scheduling.k8s.io/v1beta1 serves Workloads and PodGroups (the GenericWorkload gate and the
    runtime-config of support/k8s/fleet.py's TRAINING_* on the API server)."""
    served = {r["name"] for r in training_fleet.control.get_raw("/apis/scheduling.k8s.io/v1beta1")["resources"]}
    assert {"workloads", "podgroups"} <= served, served
