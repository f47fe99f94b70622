"""A fleet for tests/fleet/: a control plane and three nodes of different cards on a pod network
(docs/fleet.md says what it is for).

Every member is a :class:`~support.k8s.cluster.Cluster` (one implementation of a member's
namespaces, cgroups, daemons and tear-down), each in its own network and mount namespace:

- the control plane (etcd, API server, controller manager, scheduler; no kubelet).  Its network
  namespace holds the bridge ``br0`` (:data:`SUBNET` ``.1``) and a route to each node's pod CIDR.
- three nodes (:data:`NODES`), each with its own containerd, kubelet and kube-proxy (built from the
  same ``k8s.io/kubernetes`` pin).  A node is linked to the bridge by a veth pair made inside the
  control plane's namespace, its end moved straight into the node's as ``eth0``: nothing is ever
  created in the machine's network namespace, and the only addresses are the members' and
  loopback.  Pods are on the CNI bridge plugin's ``cni0`` with host-local addresses from the node's
  slice of :data:`POD_CIDR`; each node routes the other slices to their node, the Service CIDR to
  its ``eth0`` (kube-proxy's rules take it from there).

So that one manifest serves every node (a DaemonSet has one pod template), each node sees its own
things at the paths deploy/ names, in its mount namespace: its fake host at :data:`FAKE_ROOT`, its
CDI spec dir (:attr:`Cluster.cdi_dir`, which its containerd reads) at ``/var/run/cdi``, kubelet's
root dir at ``/var/lib/kubelet``, and ``/usr/local`` as an overlay of its own (what the DaemonSet
installs there stays in the session's directory).

Killing a member's holder ends its namespace and with it its links; the bridge goes with the
control plane's.  :meth:`Fleet.stop` stops the nodes first, then the control plane.
"""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from support import fakehost, matrix
from support.k8s import nodekit
from support.k8s.cluster import SERVICE_CIDR, Cluster, ClusterError

#: The bridge's /24 (control plane .1, nodes .11 ...) and the pods' /16 (a /24 per node): private
#: addresses that exist only inside the members' namespaces.
SUBNET = "10.251.8"
POD_CIDR = "10.252.0.0/16"
CONTROL_NAME = "xpu-fleet-control"
PRESENT = "xpu-cdi.io/present"  # what deploy/'s DaemonSets select on, set by deploy/labels' labeller
#: kubelet's root dir as every node's kubelet and pods see it (its own, bound there): kubelet dials a
#: DRA driver's registration socket at the path it finds it, so the driver's socket names must fit
#: unix sockets' 107 bytes at this path, as on a real node, not at the session's longer one.
KUBELET_ROOT = "/var/lib/kubelet"
#: Where every node sees its own fake host (its mount namespace's /run is a tmpfs of its own).
FAKE_ROOT = "/run/xpu-cdi-fake-host"
FAKE_ROOTS = ["--dev-root", FAKE_ROOT, "--driver-root", FAKE_ROOT, "--sysfs-root", FAKE_ROOT]


@dataclass(frozen=True)
class NodeSpec:
    name: str
    profile: str        # the xpu-cdi profile of its cards
    cards: int
    pci_device: str     # the Ascend model's PCI device id ("" for Kunlunxin)
    model: str          # what `xpu-cdi labels` says of it (xpu-cdi.io/<class>.model)
    index: int

    @property
    def ip(self) -> str:
        return f"{SUBNET}.{11 + self.index}"

    @property
    def pod_cidr(self) -> str:
        return f"10.252.{1 + self.index}.0/24"

    @property
    def kind(self) -> str:
        return nodekit.XPU if self.profile == "kunlunxin" else nodekit.NPU


NODES = (NodeSpec("xpu-fleet-a", "kunlunxin", 8, "", "P800", 0),
         NodeSpec("xpu-fleet-b", "ascend", 4, "0xd500", "Ascend310P", 1),
         NodeSpec("xpu-fleet-c", "ascend", 8, "0xd802", "Ascend910B", 2))


def pod_network(cidr: str) -> Dict[str, Any]:
    """The node's CNI conflist: Debian's bridge and host-local plugins, no masquerade (a pod is
    seen by its own address everywhere in the fleet, as Prometheus must see the exporters)."""
    return {"cniVersion": "1.0.0", "name": "xpu-cdi-fleet", "plugins": [{
        "type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
        "ipam": {"type": "host-local", "ranges": [[{"subnet": cidr}]], "routes": [{"dst": "0.0.0.0/0"}]}}]}


def fake_host(spec: NodeSpec, base: Path) -> fakehost.FakeHost:
    """The node's cards: a fake host of its profile and model, with its NUMA nodes."""
    root = matrix.device_dir(base) / "host"
    if spec.profile == "kunlunxin":
        host = fakehost.kunlunxin(root, spec.cards)
    else:
        host = fakehost.ascend(root, spec.cards, pci_device=spec.pci_device)
    for n in sorted(set(host.numa.values())):
        (host.root / "sys/devices/system/node" / f"node{n}").mkdir(parents=True, exist_ok=True)
    return host


def _run(argv: List[str], what: str) -> None:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise ClusterError(f"{what}: {' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")


class Fleet:
    """The control plane and the nodes of :data:`NODES` (not started: :meth:`start`)."""

    def __init__(self, base: Path, feature_gates: Optional[Dict[str, bool]] = None,
                 audit: Optional[Dict[str, Any]] = None) -> None:
        """*audit*: an audit Policy for the API server (:attr:`Cluster.audit_log`)."""
        self.base = base
        self.specs = {s.name: s for s in NODES}
        self.hosts = {s.name: fake_host(s, base / s.name) for s in NODES}  # first: it may skip
        self.control = Cluster(kubelet=None, feature_gates=feature_gates, node_name=CONTROL_NAME,
                               node_ip=f"{SUBNET}.1", link=self._bridge, audit=audit)
        self.nodes: Dict[str, Cluster] = {
            s.name: nodekit.xpu_cluster(feature_gates=feature_gates, node_name=s.name, node_ip=s.ip,
                                        join=self.control, link=self._attach, cni=pod_network(s.pod_cidr),
                                        kube_proxy=POD_CIDR, overlays=("/etc", "/var/lib", "/var/log", "/usr/local"),
                                        kubelet_root=KUBELET_ROOT)
            for s in NODES}
        self.timings: Dict[str, float] = {}

    @property
    def members(self) -> List[Cluster]:
        return [self.control, *self.nodes.values()]

    # -- the network ------------------------------------------------------------------------------------

    def _bridge(self, control: Cluster) -> None:
        _run(control.on_node(["sh", "-ec", f"ip link add br0 type bridge; ip addr add {SUBNET}.1/24 dev br0; "
                                           "ip link set br0 up"], mount=False), "the fleet's bridge")

    def _attach(self, node: Cluster) -> None:
        """A veth pair made in the control plane's namespace, one end on the bridge, the other the
        node's eth0; the node's address and routes; the control plane's route to its pods."""
        assert node.holder is not None
        spec = self.specs[node.node_name]
        veth = f"v{node.id}"
        _run(self.control.on_node(["sh", "-ec", f"ip link add {veth} type veth peer name eth0 netns {node.holder.pid}; "
                                                f"ip link set {veth} master br0 up"], mount=False),
             f"linking {spec.name}")
        routes = "".join(f"ip route add {o.pod_cidr} via {o.ip}; " for o in NODES if o.name != spec.name)
        _run(node.on_node(["sh", "-ec", f"ip addr add {spec.ip}/24 dev eth0; ip link set eth0 up; "
                                        "echo 1 > /proc/sys/net/ipv4/ip_forward; "
                                        f"ip route add {SERVICE_CIDR} dev eth0; {routes}"], mount=False),
             f"{spec.name}'s address and routes")
        _run(self.control.on_node(["ip", "route", "add", spec.pod_cidr, "via", spec.ip], mount=False),
             f"the route to {spec.name}'s pods")
        binds = ((self.hosts[spec.name].root, FAKE_ROOT), (node.cdi_dir, "/run/cdi"),
                 (node.root_dir, KUBELET_ROOT))
        script = "".join(f"mkdir -p {dst}; mount --bind {src} {dst}; " for src, dst in binds)
        _run(node.on_node(["sh", "-ec", script]), f"{spec.name}'s paths")

    # -- bring-up and tear-down -------------------------------------------------------------------------

    def start(self) -> "Fleet":
        """The control plane, then the three nodes at once; until every node is Ready.  Whatever
        fails, everything started is stopped before the error is raised."""
        t0 = time.monotonic()
        try:
            self.control.start()
            self.timings["control plane"] = time.monotonic() - t0
            self.on_each_node(Cluster.start)
            self.timings["nodes"] = time.monotonic() - t0 - self.timings["control plane"]
        except BaseException:
            self.stop()
            raise
        self.timings["total"] = time.monotonic() - t0
        return self

    def on_each_node(self, do: Callable[[Cluster], Any]) -> None:
        """*do* for every node at once (a thread each); the first error raised once all are done."""
        errors: List[BaseException] = []

        def run(node: Cluster) -> None:
            try:
                do(node)
            except BaseException as err:  # noqa: BLE001 - re-raised below, after the others
                errors.append(err)

        threads = [threading.Thread(target=run, args=(n,)) for n in self.nodes.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def stop(self, keep_logs: Optional[Path] = None) -> None:
        """Every node, then the control plane (and its bridge); the fake hosts."""
        for name, member in [*self.nodes.items(), (CONTROL_NAME, self.control)]:
            member.stop(keep_logs=keep_logs / name if keep_logs is not None else None)
        for host in self.hosts.values():
            fakehost.remove_tree(host.root)

    # -- the API, through the control plane -------------------------------------------------------------

    def kubectl(self, *args: str, **kw: Any) -> subprocess.CompletedProcess:
        return self.control.kubectl(*args, **kw)

    def get(self, *args: str) -> Dict[str, Any]:
        return self.control.get(*args)

    def apply(self, *objects: Dict[str, Any]) -> None:
        self.control.apply(*objects)

    def labels(self, node: str) -> Dict[str, str]:
        """Node *node*'s labels under xpu-cdi.io/."""
        labels = self.get("node", node)["metadata"].get("labels") or {}
        return {k: v for k, v in labels.items() if k.startswith("xpu-cdi.io/")}

    def wait(self, what: Any, timeout: float, message: str, interval: float = 0.2) -> Any:
        return self.control.wait(what, timeout, message, interval)
