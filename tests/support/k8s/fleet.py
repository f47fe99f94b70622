"""A fleet for tests/fleet/: a control plane and three nodes of different cards on a pod network
(docs/fleet.md says what it is for); and the training fleet of tests/training/, three 910B nodes
(:func:`training`, docs/training.md).

Every member is a :class:`~support.k8s.cluster.Cluster` (one implementation of a member's
namespaces, cgroups, daemons and tear-down), each in its own network and mount namespace:

- the control plane (etcd, API server, controller manager, scheduler; no kubelet).  Its network
  namespace holds the bridge (the main fleet's ``br0``, at :data:`SUBNET` ``.1``) and a route to
  each node's pod CIDR.
- the nodes (:data:`NODES`, or the training fleet's :data:`TRAINING_NODES`), each with its own
  containerd, kubelet and kube-proxy (built from the same ``k8s.io/kubernetes`` pin).  A node is
  linked to the bridge by a veth pair made inside the control plane's namespace, its end moved
  straight into the node's as ``eth0``: nothing is ever created in the machine's network
  namespace, and the only addresses are the members' and loopback.  Pods are on the CNI bridge
  plugin's ``cni0`` with host-local addresses from the node's slice of the fleet's pod CIDR
  (:data:`POD_CIDR` for the main one); each node routes the other slices to their node, the Service CIDR to
  its ``eth0`` (kube-proxy's rules take it from there).

So that one manifest serves every node (a DaemonSet has one pod template), each node sees its own
things at the paths deploy/ names, in its mount namespace: its fake host at :data:`FAKE_ROOT`, its
CDI spec dir (:attr:`Cluster.cdi_dir`, which its containerd reads) at ``/var/run/cdi``, kubelet's
root dir at ``/var/lib/kubelet``, and ``/usr/local`` as an overlay of its own (what the DaemonSet
installs there stays in the session's directory).

Killing a member's holder ends its namespace and with it its links; the bridge goes with the
control plane's.  :meth:`Fleet.stop` stops the nodes first, then the control plane.

Two fleets may run at once (tests/fleet/ and tests/training/ on two xdist workers): each has a
:class:`Network` of its own (member names, bridge, addresses), so nothing of one can be taken for
the other's, in a log, a route or the leak check.
"""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from support import fakehost, matrix
from support.k8s import nodekit
from support.k8s.cluster import SERVICE_CIDR, Cluster, ClusterError

#: What a fleet runs: the builds (kube-proxy: the same k8s.io/kubernetes pin) and Debian's CNI plugins.
COMPONENTS = ("kubernetes", "containerd", "etcd", "kube-proxy")
CNI_PLUGINS = ("loopback", "bridge", "host-local")


@dataclass(frozen=True)
class Network:
    """Where a fleet lives: its control plane's name, its bridge, the bridge's /24 (control plane
    .1, nodes .11 ...) and the pods' /16 (a /24 per node): private addresses that exist only
    inside the members' namespaces."""
    control: str
    bridge: str
    subnet: str  # "10.251.8": the first three octets of the /24
    pods: str    # "10.252": the first two octets of the /16

    @property
    def pod_cidr(self) -> str:
        return f"{self.pods}.0.0/16"


MAIN = Network("xpu-fleet-control", "br0", "10.251.8", "10.252")
#: The training fleet's: apart from the main one's in every name and address.
TRAINING = Network("xpu-train-control", "br-train", "10.251.9", "10.253")
SUBNET, POD_CIDR, CONTROL_NAME = MAIN.subnet, MAIN.pod_cidr, MAIN.control
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
    network: Network = MAIN
    #: the third octet of its NPUs' RoCE addresses in its /etc/hccn.conf (fakehost.hccn_conf:
    #: NPU i at 192.168.<hccn>.<10 + i>), unique per node as on a real cluster; 0: no hccn.conf
    hccn: int = 0

    @property
    def ip(self) -> str:
        return f"{self.network.subnet}.{11 + self.index}"

    @property
    def pod_cidr(self) -> str:
        return f"{self.network.pods}.{1 + self.index}.0/24"

    @property
    def kind(self) -> str:
        return nodekit.XPU if self.profile == "kunlunxin" else nodekit.NPU


NODES = (NodeSpec("xpu-fleet-a", "kunlunxin", 8, "", "P800", 0),
         NodeSpec("xpu-fleet-b", "ascend", 4, "0xd500", "Ascend310P", 1),
         NodeSpec("xpu-fleet-c", "ascend", 8, "0xd802", "Ascend910B", 2))

#: The training fleet (tests/training/, docs/training.md): three Atlas 800T A2-like servers of
#: 8 x 910B, each with its hccn.conf (device IPs 192.168.21.x, .22.x, .23.x), on :data:`TRAINING`.
TRAINING_NODES = tuple(NodeSpec(f"xpu-train-{x}", "ascend", 8, "0xd802", "Ascend910B", i, TRAINING, hccn=21 + i)
                       for i, x in enumerate("abc"))

#: What the training fleet runs with beside nodekit's gates: Kubernetes 1.37's Workload API
#: (``scheduling.k8s.io/v1beta1`` Workload and PodGroup, served only with the ``GenericWorkload``
#: gate, beta and off by default, and the group version turned on: new beta APIs are off by
#: default) and so the scheduler's GangScheduling plugin, which the same gate adds.
TRAINING_GATES = {"GenericWorkload": True}
TRAINING_API_ARGS = ("--runtime-config=scheduling.k8s.io/v1beta1=true",)


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
        if spec.hccn:
            fakehost.write(host.path("/etc/hccn.conf"), fakehost.hccn_conf(spec.cards, subnet=spec.hccn))
    for n in sorted(set(host.numa.values())):
        (host.root / "sys/devices/system/node" / f"node{n}").mkdir(parents=True, exist_ok=True)
    return host


def _run(argv: List[str], what: str) -> None:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise ClusterError(f"{what}: {' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")


class Fleet:
    """The control plane and the nodes of *nodes* (not started: :meth:`start`)."""

    def __init__(self, base: Path, feature_gates: Optional[Dict[str, bool]] = None,
                 audit: Optional[Dict[str, Any]] = None, nodes: Sequence[NodeSpec] = NODES,
                 control_args: Optional[Dict[str, Sequence[str]]] = None) -> None:
        """*audit*: an audit Policy for the API server (:attr:`Cluster.audit_log`).  *nodes*: all on
        one :class:`Network`.  *control_args*: more flags for a control-plane daemon, by name."""
        (self.network,) = {s.network for s in nodes}
        self.base = base
        self.node_specs: Tuple[NodeSpec, ...] = tuple(nodes)
        self.specs = {s.name: s for s in nodes}
        self.hosts = {s.name: fake_host(s, base / s.name) for s in nodes}  # first: it may skip
        net = self.network
        self.control = Cluster(kubelet=None, feature_gates=feature_gates, node_name=net.control,
                               node_ip=f"{net.subnet}.1", link=self._bridge, audit=audit, extra_args=control_args)
        self.nodes: Dict[str, Cluster] = {
            s.name: nodekit.xpu_cluster(feature_gates=feature_gates, node_name=s.name, node_ip=s.ip,
                                        join=self.control, link=self._attach, cni=pod_network(s.pod_cidr),
                                        kube_proxy=net.pod_cidr, kubelet_root=KUBELET_ROOT,
                                        overlays=("/etc", "/var/lib", "/var/log", "/usr/local"))
            for s in nodes}
        self.timings: Dict[str, float] = {}

    @property
    def members(self) -> List[Cluster]:
        return [self.control, *self.nodes.values()]

    # -- the network ------------------------------------------------------------------------------------

    def _bridge(self, control: Cluster) -> None:
        br, subnet = self.network.bridge, self.network.subnet
        _run(control.on_node(["sh", "-ec", f"ip link add {br} type bridge; ip addr add {subnet}.1/24 dev {br}; "
                                           f"ip link set {br} up"], mount=False), "the fleet's bridge")

    def _attach(self, node: Cluster) -> None:
        """A veth pair made in the control plane's namespace, one end on the bridge, the other the
        node's eth0; the node's address and routes; the control plane's route to its pods."""
        assert node.holder is not None
        spec = self.specs[node.node_name]
        veth = f"v{node.id}"
        _run(self.control.on_node(["sh", "-ec", f"ip link add {veth} type veth peer name eth0 netns {node.holder.pid}; "
                                                f"ip link set {veth} master {self.network.bridge} up"], mount=False),
             f"linking {spec.name}")
        routes = "".join(f"ip route add {o.pod_cidr} via {o.ip}; " for o in self.node_specs if o.name != spec.name)
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
        """The control plane, then the nodes at once; until every node is Ready.  Whatever
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
        for name, member in [*self.nodes.items(), (self.network.control, self.control)]:
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


def training(base: Path) -> Fleet:
    """The training fleet (not started): :data:`TRAINING_NODES`, nodekit's gates and the Workload
    API's (:data:`TRAINING_GATES`, :data:`TRAINING_API_ARGS`)."""
    return Fleet(base, feature_gates={**nodekit.FEATURE_GATES, **TRAINING_GATES}, nodes=TRAINING_NODES,
                 control_args={"kube-apiserver": TRAINING_API_ARGS})
