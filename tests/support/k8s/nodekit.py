"""What the Kubernetes tests put on the cluster's node: fake cards with their CDI spec in the
node's spec dir, `xpu-cdi device-plugin` run on the machine against the real kubelet, pods that
look at their cards, and kubelet's PodResources API."""

from __future__ import annotations

import re
import subprocess
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple
from support import fakehost
from support import kubeletkit
from support import matrix
from support.k8s.cluster import BUSYBOX, CNI_BIN_DIRS, Cluster  # noqa: F401 - CNI_BIN_DIRS for conftest


XPU = "kunlunxin.com/xpu"
NPU = "huawei.com/npu"
DONE = "xpu-cdi-script-done"

#: Set on every component of the session's cluster (DRA work builds on them); all three are on by
#: default in 1.37, named here so that the cluster says so and the plumbing is exercised.
FEATURE_GATES = {"DRADeviceTaints": True, "DRAExtendedResource": True, "ResourceHealthStatus": True}


def runtime_configure(cluster: Cluster) -> None:
    """What the node's admin runs: `xpu-cdi runtime configure` on containerd's config (CDI on,
    the cluster's spec dir, the ``xpu`` handler running the wrapper)."""
    r = subprocess.run([matrix.XPU_CDI, "runtime", "configure", "--runtime", "containerd",
                        "--config", str(cluster.containerd_config), "--enable-cdi",
                        "--cdi-spec-dir", str(cluster.cdi_dir), "--wrapper-path", matrix.WRAPPER],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"xpu-cdi runtime configure: {r.stdout}{r.stderr}")


def xpu_cluster(kubelet: str = "kubernetes", feature_gates: Optional[Dict[str, bool]] = None, **kw: Any) -> Cluster:
    """The cluster (or a fleet's node: *kw* for Cluster) as our users' nodes run it (not started):
    containerd configured by runtime_configure, the wrapper (the ``xpu`` handler) reading the node's
    spec dir."""
    c = Cluster(kubelet=kubelet, feature_gates=feature_gates, configure_containerd=runtime_configure, **kw)
    c.containerd_env["XPU_CDI_SPEC_DIRS"] = str(c.cdi_dir)
    return c


#: What a cluster runs beside the binaries it builds (Debian packages scripts/install-deps.sh installs).
TOOLS = ("openssl", "nsenter", "unshare", "ip", "runc", "iptables", "gcc", "mount")


def check_machine(components: Sequence[str], cni_plugins: Sequence[str] = ("loopback",)) -> None:
    """Before a cluster starts: root, the tools, the CNI plugins, the builds of *components* (a
    calling test skips where Go is missing, or fails under CI=true, where nothing may skip)."""
    import os
    import shutil

    import pytest

    from support.k8s import builds

    if os.geteuid() != 0:  # a failure under CI=true (support/cisafe.py)
        pytest.skip("the cluster tests need root (namespaces, cgroups, mounts)")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    missing += [f"the CNI {p} plugin" for p in cni_plugins if not any(Path(d, p).exists() for d in CNI_BIN_DIRS)]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: run `make deps` (scripts/install-deps.sh)")
    for c in dict.fromkeys(components):
        builds.ensure_or_skip(c)


# ------------------------------------------------------------------------------ cards


class Cards:
    """A fake host (*profile*: ``kunlunxin`` 8 cards on two PCIe switches and two NUMA nodes, or
    ``ascend`` 4 NPUs (*npus*), 910Bs or the model *pci_device* says) and its spec, written by `xpu-cdi
    generate` into the node's spec dir; :meth:`close` removes both."""

    def __init__(self, cluster: Cluster, base: Path, profile: str = "kunlunxin", pci_device: str = "0xd802",
                 npus: int = 4, hccn: bool = False) -> None:
        """*npus*, *hccn*: an Ascend host's NPU count and its /etc/hccn.conf (fakehost.ascend)."""
        self.cluster, self.profile = cluster, profile
        base = matrix.device_dir(base)
        if profile == "kunlunxin":
            self.host = fakehost.kunlunxin(base / "host", matrix.CARDS)
            self.kind = XPU
        else:
            self.host = fakehost.ascend(base / "host", npus, pci_device=pci_device, hccn=hccn)
            self.kind = NPU
        for n in sorted(set(self.host.numa.values())):
            (self.host.root / "sys/devices/system/node" / f"node{n}").mkdir(parents=True, exist_ok=True)
        self.generate()

    @property
    def spec(self) -> Path:
        return self.cluster.cdi_dir / f"{self.kind.replace('/', '-')}.json"

    def generate(self) -> None:
        r = subprocess.run([matrix.XPU_CDI, "generate", "--profile", self.profile, "--profiles-dir", "/nonexistent",
                            *self.host.cli_roots, "--spec-dir", str(self.cluster.cdi_dir), "--hook-path", matrix.HOOK],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr

    @property
    def count(self) -> int:
        return len(self.host.cards)

    def close(self) -> None:
        for f in self.cluster.cdi_dir.glob(f"{self.kind.replace('/', '-')}*"):
            f.unlink()
        fakehost.remove_tree(self.host.root)


# ------------------------------------------------------------------------------ the device plugin


class DevicePlugin:
    """`xpu-cdi device-plugin` on the machine, serving *cards* to the cluster's kubelet."""

    def __init__(self, cluster: Cluster, cards: Cards, log_dir: Path, *extra: str) -> None:
        self.cluster, self.cards = cluster, cards
        self.status = log_dir / f"dp-{uuid.uuid4().hex[:6]}.json"
        self.log = log_dir / f"dp-{uuid.uuid4().hex[:6]}.log"
        self.extra = list(extra)
        self.proc: Optional[kubeletkit.PluginProcess] = None
        cluster.on_stop(self.stop)
        self.start()

    def args(self) -> List[str]:
        return [*self.cards.host.cli_roots, "--profile", self.cards.profile, "--profiles-dir", "/nonexistent",
                "--plugin-dir", str(self.cluster.plugin_dir), "--spec-dir", str(self.cluster.cdi_dir),
                "--status-file", str(self.status), "--uevents", "none", "--health-interval", "0.5", *self.extra]

    def start(self) -> None:
        self.proc = kubeletkit.PluginProcess("pypi", self.args(), self.log)  # the log starts afresh
        self.cluster.adopt(self.proc.proc.pid)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    def restart(self) -> None:
        """Stop and start again; then wait_served."""
        self.stop()
        self.start()
        self.wait_served()

    def wait_served(self, registrations: int = 1, timeout: float = 60, resource: str = "") -> None:
        """Until the plugin has been registered *registrations* times (this process), kubelet holds
        every card healthy (PodResources' allocatable: what admission checks) and the node's
        status says so (what the scheduler reads).  A node status from before a restart can still
        show the cards while kubelet has none: only all three together mean a pod will be admitted.
        *resource*: the cards' resource name (default: their kind's)."""
        resource = resource or self.cards.kind
        want = sorted(map(str, self.cards.host.cards), key=lambda i: (len(i), i))
        self.cluster.wait(lambda: self.registrations() >= registrations, timeout, "the plugin registered")
        podres = PodResources(self.cluster)
        try:
            self.cluster.wait(lambda: podres.allocatable(resource) == want, timeout,
                              f"kubelet holding {len(want)} healthy {resource}")
        finally:
            podres.close()
        self.cluster.wait_allocatable(resource, len(want), timeout)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def registrations(self) -> int:
        """How often the plugin has said kubelet took its registration."""
        return self.text().count(": registered ")


# ------------------------------------------------------------------------------ pods


def pod(name: str, command: Sequence[str], limits: Optional[Dict[str, int]] = None,
        runtime_class: str = "", env: Optional[Dict[str, str]] = None,
        annotations: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """A busybox pod on the node's (loopback-only) network that runs *command* once."""
    container: Dict[str, Any] = {"name": "c", "image": BUSYBOX, "imagePullPolicy": "Never", "command": list(command)}
    if limits:
        container["resources"] = {"limits": {k: str(v) for k, v in limits.items()}}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    spec: Dict[str, Any] = {"hostNetwork": True, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                            "containers": [container]}
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    meta: Dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def card_pod(name: str, limits: Optional[Dict[str, int]] = None, **kw: Any) -> Dict[str, Any]:
    """A pod that prints what it sees of the cards (matrix.SCRIPT), then stays running."""
    return pod(name, ["sh", "-c", f"{matrix.SCRIPT}; echo {DONE}; exec sleep 2147483647"], limits, **kw)


#: What an Ascend pod prints of the NPUs (4 on the fake host) and the manager node, then stays running.
NPU_SCRIPT = ("for n in /dev/davinci0 /dev/davinci1 /dev/davinci2 /dev/davinci3 /dev/davinci_manager; do "
              "[ -e $n ] && { echo present $n; (echo x > $n) 2>&1; }; done; echo " + DONE + "; exec sleep 2147483647")


def npu_pod(name: str, limits: Optional[Dict[str, int]] = None) -> Dict[str, Any]:
    return pod(name, ["sh", "-c", NPU_SCRIPT], limits)


def check_npu(out: str, npu: int) -> None:
    """What NPU_SCRIPT printed shows exactly NPU *npu* and the manager node, both usable (ENXIO)."""
    present = [ln.split()[1] for ln in out.splitlines() if ln.startswith("present ")]
    assert present == [f"/dev/davinci{npu}", "/dev/davinci_manager"], out
    assert out.count(matrix.ENXIO) == 2, out


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def run_card_pod(cluster: Cluster, name: str, limits: Optional[Dict[str, int]] = None,
                 timeout: float = 120, **kw: Any) -> str:
    """Create a card_pod, wait until it runs and has printed its view; that view."""
    return run_pod(cluster, card_pod(name, limits, **kw), timeout)


def run_pod(cluster: Cluster, obj: Dict[str, Any], timeout: float = 120) -> str:
    """Create pod *obj* (a card_pod), wait until it runs and has printed its view; that view."""
    name = obj["metadata"]["name"]
    cluster.apply(obj)
    cluster.wait_pod_phase(name, "Running", timeout)
    return cluster.wait(lambda: (lambda out: out if DONE in out else None)(cluster.logs(name)), 60,
                        f"pod {name}'s output")


def cards_seen(out: str) -> List[int]:
    return sorted(int(m) for m in re.findall(r"^present /dev/xpu(\d+)$", out, re.M))


# ------------------------------------------------------------------------------ PodResources


def assert_npu_pod_sees_its_cards(cluster: Cluster, name: str, resource: str, count: int) -> None:
    """Run *name* asking for *count* of *resource* (an NPU kind): kubelet assigned it *count* cards
    (PodResources), and it sees exactly their /dev/davinciN and davinci_manager."""
    out = run_pod(cluster, npu_pod(name, {resource: count}))
    podres = PodResources(cluster)
    try:
        got = sorted(int(i) for i in podres.devices(name, resource))
    finally:
        podres.close()
    present = [ln.split()[1] for ln in out.splitlines() if ln.startswith("present ")]
    assert len(got) == count and present == [f"/dev/davinci{i}" for i in got] + ["/dev/davinci_manager"], out


class PodResources:
    """kubelet's PodResourcesLister (v1) on its socket below the root dir."""

    def __init__(self, cluster: Cluster) -> None:
        import grpc

        from support import kubeproto

        # v1 of the pinned k8s.io/kubelet: a superset of what the older kubelet serves
        self.pb2, pb2_grpc = kubeproto.stubs("podresources/v1/api.proto")
        self.channel = grpc.insecure_channel(f"unix://{cluster.pod_resources_socket}")
        self.stub = pb2_grpc.PodResourcesListerStub(self.channel)

    def devices(self, pod_name: str, resource: str, namespace: str = "default") -> List[str]:
        """The device IDs of *resource* kubelet assigned to *pod_name* (all its containers)."""
        return self.held().get((namespace, pod_name), {}).get(resource, [])

    def held(self) -> Dict[Tuple[str, str], Dict[str, List[str]]]:
        """(namespace, pod) -> resource -> the device IDs kubelet assigned to it, from one List (one
        moment of kubelet's view); pods holding no device left out."""
        resp = self.stub.List(self.pb2.ListPodResourcesRequest(), timeout=10)
        out: Dict[Tuple[str, str], Dict[str, List[str]]] = {}
        for p in resp.pod_resources:
            for c in p.containers:
                for d in c.devices:
                    ids = out.setdefault((p.namespace, p.name), {}).setdefault(d.resource_name, [])
                    ids += list(d.device_ids)
        return {k: {r: sorted(ids, key=lambda i: (len(i), i)) for r, ids in v.items()} for k, v in out.items()}

    def allocatable(self, resource: str) -> List[str]:
        resp = self.stub.GetAllocatableResources(self.pb2.AllocatableResourcesRequest(), timeout=10)
        return sorted((i for d in resp.devices if d.resource_name == resource for i in d.device_ids),
                      key=lambda i: (len(i), i))

    def close(self) -> None:
        self.channel.close()


def wait_gone(cluster: Cluster, *pods: str, timeout: float = 120) -> None:
    """Delete *pods* (all at once) and wait until the API server has none of them."""
    cluster.delete("pod", *pods)
    cluster.wait(lambda: not any(cluster.kubectl("get", "pod", p, check=False).returncode == 0 for p in pods),
                 timeout, f"pods {pods} gone")

