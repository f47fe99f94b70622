"""The fleet itself (support/k8s/fleet.py): three Ready nodes on their own addresses, pods on the
pod network reaching each other across nodes by pod IP and through a Service (kube-proxy), the
control plane's namespace reaching pod IPs (as Prometheus scrapes them), nothing of it in the
machine's network namespace, and the cold start under three minutes."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
from typing import Any, Dict, Iterator, List

import pytest
from support.k8s import nodekit
from support.k8s.fleet import NODES, POD_CIDR, SUBNET, Fleet

pytestmark = [pytest.mark.privileged]
A, B, C = (s.name for s in NODES)
COLD_START_LIMIT = 180  # seconds, on a 2-core machine (issue 28)


def on(node: str, name: str, command: List[str], labels: Dict[str, str] = {}) -> Dict[str, Any]:
    """A busybox pod on the pod network, placed on *node* by the scheduler (a nodeSelector)."""
    pod = nodekit.pod(name, command)
    pod["spec"]["hostNetwork"] = False
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    pod["metadata"]["labels"] = dict(labels)
    return pod


@pytest.fixture
def pods(fleet: Fleet) -> Iterator[List[str]]:
    names: List[str] = []
    yield names
    if names:
        nodekit.wait_gone(fleet.control, *names)


def running(fleet: Fleet, pods: List[str], obj: Dict[str, Any]) -> Dict[str, Any]:
    pods.append(obj["metadata"]["name"])
    fleet.apply(obj)
    return fleet.control.wait_pod_phase(obj["metadata"]["name"], "Running", 180)


def web(fleet: Fleet, pods: List[str], node: str) -> Dict[str, Any]:
    """A pod on *node* serving its own name over HTTP on port 8080; the pod once Running."""
    name = nodekit.unique("web")
    cmd = ["sh", "-c", f"mkdir /www && echo {name} > /www/index.html && exec httpd -f -p 8080 -h /www"]
    return running(fleet, pods, on(node, name, cmd, {"app": name}))


def fetch(fleet: Fleet, pods: List[str], node: str, host: str, port: int) -> str:
    """The body a pod on *node* gets for ``GET /`` from *host*:*port* (busybox nc: the image's
    static wget crashes; retried for up to 30 s: kube-proxy writes a new Service's rules within
    its sync period)."""
    name = nodekit.unique("client")
    # nc's complaint of a try that timed out (stderr) would end up in the pod's log beside the answer
    get = f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 {host} {port} 2>/dev/null"
    cmd = ["sh", "-c", f"for i in $(seq 30); do out=$({get}) && [ -n \"$out\" ] && "
           f"{{ echo \"$out\" | tail -n 1; exit 0; }}; sleep 1; done; exit 1"]
    pod = on(node, name, cmd)
    pods.append(name)
    fleet.apply(pod)
    fleet.control.wait_pod_phase(name, "Succeeded", 180)
    return fleet.control.logs(name).strip()


def test_three_nodes_ready_on_their_addresses(fleet: Fleet) -> None:
    nodes = {n["metadata"]["name"]: n for n in fleet.get("nodes")["items"]}
    assert sorted(nodes) == sorted(s.name for s in NODES)
    for spec in NODES:
        n = nodes[spec.name]
        assert fleet.nodes[spec.name].node_ready(n), n["status"]["conditions"]
        addresses = {a["type"]: a["address"] for a in n["status"]["addresses"]}
        assert addresses["InternalIP"] == spec.ip, addresses
        info = n["status"]["nodeInfo"]
        assert info["kubeletVersion"] == fleet.control.versions()["kubernetes"], info
        containerd = fleet.control.versions()["containerd"].lstrip("v")
        assert info["containerRuntimeVersion"].startswith(f"containerd://{containerd}"), info


def test_cold_start_under_three_minutes(fleet: Fleet) -> None:
    """The fleet's start (warm Go builds: the fixture ensures them before it times) -- the figure of
    the README and docs/fleet.md."""
    t = fleet.timings
    print(f"fleet cold start: {t['total']:.1f} s (control plane {t['control plane']:.1f} s, "
          f"three nodes at once {t['nodes']:.1f} s); load {open('/proc/loadavg').read().split()[:3]}")
    assert t["total"] < COLD_START_LIMIT, t


def test_pods_reach_each_other_across_nodes_by_pod_ip(fleet: Fleet, pods: List[str]) -> None:
    server = web(fleet, pods, A)
    ip = server["status"]["podIP"]
    slice_a = ipaddress.ip_network(NODES[0].pod_cidr)
    assert ipaddress.ip_address(ip) in slice_a, (ip, slice_a)
    assert fetch(fleet, pods, C, ip, 8080) == server["metadata"]["name"]


def test_a_service_reaches_its_pod_from_another_node(fleet: Fleet, pods: List[str]) -> None:
    """A ClusterIP Service (kube-proxy's rules on every node) in front of a pod on node C, asked
    from a pod on node B."""
    server = web(fleet, pods, C)
    name = server["metadata"]["name"]
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
           "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]}}
    fleet.apply(svc)
    try:
        ip = fleet.get("service", name)["spec"]["clusterIP"]
        assert ipaddress.ip_address(ip) in ipaddress.ip_network("10.96.0.0/24"), ip
        assert fetch(fleet, pods, B, ip, 80) == name
    finally:
        fleet.kubectl("delete", "service", name, "--ignore-not-found")


def test_the_control_plane_reaches_pod_ips(fleet: Fleet, pods: List[str]) -> None:
    """From the control plane's namespace (where the tests' Prometheus runs) to a pod on each node."""
    for spec in NODES:
        server = web(fleet, pods, spec.name)
        url = f"http://{server['status']['podIP']}:8080/"
        code = f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=5).read().decode())"
        r = fleet.control.run_on_node([sys.executable, "-c", code], mount=False, timeout=30)
        assert r.returncode == 0 and r.stdout.strip() == server["metadata"]["name"], r.stderr


def addresses_and_links() -> str:
    """The machine's own network namespace: its links, addresses and routes."""
    out = [subprocess.run(["ip", "-j", *args], capture_output=True, text=True, check=True).stdout
           for args in (["link"], ["addr"], ["route", "show", "table", "all"])]
    return "\n".join(out)


def test_nothing_of_the_fleet_in_the_machines_network(fleet: Fleet) -> None:
    """No link (the bridge, a veth end, a pod bridge), address or route of the fleet's is in the
    machine's network namespace: all of it lives in the members' own."""
    mine = addresses_and_links()
    links = [link["ifname"] for link in json.loads(mine.split("\n")[0])]
    veths = [f"v{n.id}" for n in fleet.nodes.values()]
    assert not {"br0", "cni0", *veths} & set(links), links
    assert SUBNET + "." not in mine and POD_CIDR.split(".0.0/")[0] + "." not in mine
    # the bridge is where the fleet says: in the control plane's namespace, with a port per node
    r = fleet.control.run_on_node(["ip", "-j", "link", "show", "master", "br0"], mount=False)
    assert sorted(link["ifname"] for link in json.loads(r.stdout)) == sorted(veths), r.stdout
