"""A real one-node Kubernetes cluster for the suite: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kubelet and containerd 2.x, built from their upstream Go modules (builds.py).
The same class makes each member of the fleet (fleet.py: a control plane, nodes that join it).

**The node's namespaces.**  Every daemon runs in one private network and mount namespace, held
open by a ``sleep`` (the *holder*) and entered with ``nsenter``:

- network: only ``lo``, with 127.0.0.1 and the node's address (:data:`NODE_IP`: kubelet refuses a
  loopback node IP), so the ports are the components' defaults and never collide with another
  cluster, and the iptables chains kubelet insists on (KUBE-FIREWALL, KUBE-KUBELET-CANARY, ...)
  go into this namespace, not the machine's.  Pods run with ``hostNetwork: true``: the node's
  network is this loopback-only one.  A loopback-only CNI config (Debian's
  containernetworking-plugins) makes the runtime report its network ready, so the node is Ready.
- mounts: ``/run`` is a tmpfs; ``/etc``, ``/var/lib`` and ``/var/log`` are overlays whose upper
  layers are the session's: what kubelet and containerd write to paths they hard-code
  (``/var/log/containers``, ``/var/lib/cni``, ``/run/containerd/runc``, ...) lands there.  etcd's
  data is a tmpfs.  Every mount the daemons make (pods' volumes and shm, rootfs overlays) lives
  and dies with the namespace.  kubelet sets six kernel tunables it has no setting to leave
  alone (``protectKernelDefaults`` only turns the write into a refusal to start): the node's
  namespace shows it the values it wants, as files bound over the three or so that differ on
  this machine, and the machine's stay as they are.
- paths: kubelet's ``--root-dir`` is the session's :attr:`Cluster.root_dir`, seen at the same
  path from the machine (so the device plugin, a DRA driver or a PodResources client run outside
  the node use kubelet's own paths), except the device-plugin directory, which kubelet fixes at
  ``/var/lib/kubelet/device-plugins``: the node sees :attr:`Cluster.plugin_dir` bound there.

**The API** (what later work builds on): :meth:`Cluster.kubectl` / :meth:`get` / :meth:`apply`
with the admin kubeconfig, :meth:`wait`, :meth:`wait_pod_phase`, :meth:`wait_node`,
:meth:`wait_allocatable`; :attr:`node_name`, :attr:`root_dir`, :attr:`plugin_dir`,
:attr:`plugins_registry_dir`, :attr:`plugins_dir`, :attr:`pod_resources_socket`;
:attr:`containerd_socket`, :attr:`containerd_config`, :meth:`ctr`, :meth:`import_image`;
:meth:`stop_kubelet`, :meth:`start_kubelet`, :meth:`restart_kubelet`; :meth:`on_node`,
:meth:`run_on_node`, :meth:`write_node_file` for what must run or be written as the node sees it.

**cgroups.**  kubelet's ``cgroupRoot`` is a cgroup of the cluster's own in every v1 hierarchy
(``/xpu-cdi-k8s-<id>``: pods go below its ``kubepods``); the daemons are in its ``daemons`` child
of the pids hierarchy, so at the end every process of the cluster (daemons, shims, pods) is found
there, stopped, and the cgroups removed.

**Stopped whatever ends the tests.**  A *reaper* (:func:`reap`, its own session, outside the
cluster's cgroups) holds the read end of a pipe from the process that started the cluster: when
that process ends without :meth:`Cluster.stop` having said so (SIGTERM, SIGKILL, an xdist worker's
``os._exit``), the pipe closes and the reaper kills the cgroups' processes, removes the cgroups and
the session's directory.  What tests run against the node from the machine (a device plugin, a
DRA driver) is put in the cluster's ``tests`` cgroup (:meth:`Cluster.adopt`) to go with it.

**What the machine lacks** is said in kubelet's config file (:meth:`Cluster.kubelet_config`):
cgroup v1 (``failCgroupV1: false``, the cgroupfs driver), no systemd, no swap, no network.

The API server is reached through the cluster's own kubectl, run in the node's network
namespace.  Feature gates are given at start to every component (:class:`Cluster`
``feature_gates``, ``kubelet_feature_gates`` for kubelet alone); in 1.37.2 DRADeviceTaints
(GA), DRAExtendedResource (GA, locked on) and ResourceHealthStatus (beta) are on by default; in
1.34 the three are alpha, off (there is no gate named DRAResourceHealth: ResourceHealthStatus
covers device plugins and DRA).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import tomlkit
import yaml
from support.k8s import builds
from support.k8s import pki
from support.runtimes import oci_image_archive


NODE_IP = "10.251.0.1"
SERVICE_CIDR = "10.96.0.0/24"
API_PORT = 6443
NODE_NAME = "xpu-cdi-node"
CNI_BIN_DIRS = ["/usr/lib/cni", "/opt/cni/bin"]  # Debian's containernetworking-plugins, upstream's default
BUSYBOX = "localhost/xpu-cdi-busybox:latest"
PAUSE = "localhost/xpu-cdi-pause:3.10.2"
CGROUP = Path("/sys/fs/cgroup")
SUPPORT_PARENT = Path(__file__).resolve().parents[2]  # tests/: where ``support`` is imported from

#: Where kubelet, containerd and CNI write when not told otherwise: the node's namespaces keep
#: them away from the machine (checked by test_cluster.py and the no-traces test).
HOST_PATHS = ("/var/lib/kubelet", "/etc/kubernetes", "/run/containerd", "/var/log/containers", "/var/log/pods",
              "/var/lib/cni", "/var/lib/containerd", "/etc/cni", "/opt/cni", "/run/nri", "/var/run/kubernetes")

#: What kubelet's setupKernelTunables wants (pkg/kubelet/cm/container_manager_linux.go).
KUBELET_TUNABLES = {"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10",
                    "kernel/panic_on_oops": "1", "kernel/keys/root_maxkeys": "1000000",
                    "kernel/keys/root_maxbytes": "25000000"}

HOLDER = r"""
set -e
ip link set lo up
# the one-node cluster's node address is on lo; a fleet's member gets its own link afterwards
[ -z "$LO_ADDR" ] || ip addr add "$LO_ADDR/32" dev lo
# -n: libmount would otherwise lock and write /run/mount/utab on the machine's /run first
mount -n -t tmpfs -o mode=0755 tmpfs /run
for d in $OVERLAY_DIRS; do
  n=$(echo "$d" | tr / _)
  mkdir -p "$OVERLAYS/$n/upper" "$OVERLAYS/$n/work"
  mount -t overlay overlay -o "lowerdir=$d,upperdir=$OVERLAYS/$n/upper,workdir=$OVERLAYS/$n/work" "$d"
done
[ -z "$ETCD_DATA" ] || mount -t tmpfs -o mode=0700 tmpfs "$ETCD_DATA"
# kubelet's device-plugin directory is fixed at /var/lib/kubelet/device-plugins whatever its
# --root-dir (pluginapi.DevicePluginPath): the node sees the one below its root dir there
mkdir -p /var/lib/kubelet/device-plugins "$ROOT_DIR/device-plugins"
mount --bind "$ROOT_DIR/device-plugins" /var/lib/kubelet/device-plugins
for f in "$TUNABLES"/*; do
  [ -e "$f" ] || continue
  mount --bind "$f" "/proc/sys/$(basename "$f" | tr : /)"
done
: > "$READY"
exec sleep 2147483647
"""


class ClusterError(RuntimeError):
    pass


class DaemonExited(ClusterError):
    """A daemon the wait depends on is gone: no use waiting any longer."""


class Daemon:
    """One process of the node, started in its namespaces, logging to *log*."""

    def __init__(self, name: str, argv: Sequence[str], log: Path, env: Optional[Dict[str, str]] = None) -> None:
        self.name, self.argv, self.log, self.env = name, list(argv), log, env
        self.proc: Optional[subprocess.Popen] = None

    def start(self, wrap: Callable[[Sequence[str]], List[str]]) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(wrap(self.argv), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=self.env, start_new_session=True)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 20) -> None:
        if not self.alive():
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


class Cluster:
    """The one-node cluster; :meth:`start` brings it up (node Ready, images imported), :meth:`stop`
    removes every process, mount, cgroup and file of it (also after a failed start).

    The same class is each member of a fleet (fleet.py): a control plane without a node
    (*kubelet* None), and nodes that *join* it (no control plane of their own; its PKI, its admin
    kubeconfig), each in its own namespaces, given a network link by *link* once they are up, with
    a pod network (*cni*, a CNI conflist) and kube-proxy (*kube_proxy*: the cluster's pod CIDR).

    Args:
        kubelet: ``"kubernetes"`` (the control plane's release) or ``"kubelet-compat"`` (the older
            kubelet builds.py pins), for the node; None: no node (a fleet's control plane).
        feature_gates: given to every component; kubelet_feature_gates: to kubelet only (an older
            kubelet may not know a newer gate).
        env: extra environment of containerd (its shims and so the runtime binaries inherit it).
        configure_containerd: called with the cluster once containerd's config file
            (:attr:`containerd_config`, the session's paths in place) is written, before containerd
            starts: to add what the node's admin would (``xpu-cdi runtime configure``).
    """

    def __init__(self, kubelet: Optional[str] = "kubernetes", feature_gates: Optional[Dict[str, bool]] = None,
                 kubelet_feature_gates: Optional[Dict[str, bool]] = None, env: Optional[Dict[str, str]] = None,
                 configure_containerd: Optional[Callable[["Cluster"], None]] = None,
                 node_name: str = NODE_NAME, node_ip: str = NODE_IP, join: Optional["Cluster"] = None,
                 link: Optional[Callable[["Cluster"], None]] = None, cni: Optional[Dict[str, Any]] = None,
                 kube_proxy: str = "", overlays: Sequence[str] = ("/etc", "/var/lib", "/var/log"),
                 audit: Optional[Dict[str, Any]] = None, kubelet_root: str = "",
                 extra_args: Optional[Dict[str, Sequence[str]]] = None) -> None:
        """*audit*: an audit Policy; the API server then logs what it selects to :attr:`audit_log` (JSON lines).
        *extra_args*: more flags for a control-plane daemon, by name (``kube-scheduler``: ``--kube-api-qps``).
        *kubelet_root*: kubelet's ``--root-dir`` as the node sees it, where *link* binds :attr:`root_dir`
        (a fleet node's ``/var/lib/kubelet``, as on a real node); default: :attr:`root_dir` itself."""
        self.id = uuid.uuid4().hex[:8]
        self.audit = audit
        self.extra_args = {k: list(v) for k, v in (extra_args or {}).items()}
        self.join, self.link, self.cni, self.kube_proxy = join, link, cni, kube_proxy
        self.overlays = list(overlays)  # the node's directories whose writes land in the session's dir
        self.kubelet_component = kubelet
        self.feature_gates = dict(feature_gates or {})
        self.kubelet_feature_gates = {**self.feature_gates, **(kubelet_feature_gates or {})}
        self.containerd_env = dict(env or {})
        self.configure_containerd = configure_containerd
        # short: unix socket paths hold 107 bytes (kubelet's plugin sockets are below its root dir)
        self.base = Path(tempfile.mkdtemp(prefix=f"xk8s-{self.id}-"))
        self.log_dir = self.base / "logs"
        self.root_dir = self.base / "kubelet"
        self.kubelet_root = kubelet_root or str(self.root_dir)
        self.cgroup_name = f"xpu-cdi-k8s-{self.id}"
        self.cdi_dir = self.base / "cdi"
        self.audit_log = self.base / "logs" / "audit.log"
        self.containerd_socket = self.base / "containerd" / "containerd.sock"
        self.containerd_config = self.base / "containerd" / "config.toml"
        self.kubeconfig = join.kubeconfig if join else self.base / "pki" / "admin.kubeconfig"
        self.node_name = node_name
        self.node_ip = node_ip
        #: where every component and kubectl reach the API server: loopback on the one node
        self.api_server = join.api_server if join else \
            f"https://{'127.0.0.1' if link is None else node_ip}:{API_PORT}"
        self.holder: Optional[subprocess.Popen] = None
        self.reaper: Optional[subprocess.Popen] = None
        self.daemons: Dict[str, Daemon] = {}
        self.bins: Dict[str, Path] = {}
        self.timings: Dict[str, float] = {}
        self.stop_first: List[Callable[[], None]] = []  # what tests run against the node (on_stop)

    # -- where things are ------------------------------------------------------------------------------

    @property
    def plugin_dir(self) -> Path:
        """kubelet's device-plugin directory (``kubelet.sock``, the plugins' sockets, its checkpoint),
        as the machine sees it (the node sees it at /var/lib/kubelet/device-plugins)."""
        return self.root_dir / "device-plugins"

    @property
    def plugins_registry_dir(self) -> Path:
        """Where kubelet's plugin watcher looks for registration sockets (DRA and CSI drivers)."""
        return self.root_dir / "plugins_registry"

    @property
    def plugins_dir(self) -> Path:
        """Where DRA and CSI drivers put their service sockets (``<dir>/<driver>/...``)."""
        return self.root_dir / "plugins"

    @property
    def pod_resources_socket(self) -> Path:
        return self.root_dir / "pod-resources" / "kubelet.sock"

    @property
    def kubectl_bin(self) -> Path:
        return self.bins["kubernetes"] / "kubectl"

    def kubelet_version(self) -> str:
        return builds.COMPONENTS[self.kubelet_component or "kubernetes"].version()

    def components(self) -> List[str]:
        """The builds this member runs (kubectl is the kubernetes build's, on every member)."""
        out = ["kubernetes"] if self.join else ["kubernetes", "etcd"]
        if self.kubelet_component:
            out += ["containerd", self.kubelet_component]
        return list(dict.fromkeys(out + (["kube-proxy"] if self.kube_proxy else [])))

    def versions(self) -> Dict[str, str]:
        return {"kubernetes": builds.COMPONENTS["kubernetes"].version(), "kubelet": self.kubelet_version(),
                "containerd": builds.COMPONENTS["containerd"].version(), "etcd": builds.COMPONENTS["etcd"].version()}

    # -- running things on the node --------------------------------------------------------------------

    def on_node(self, argv: Sequence[str], mount: bool = True) -> List[str]:
        """*argv* run in the node's network (and, with *mount*, mount) namespace."""
        if self.holder is None:
            raise ClusterError("the node's namespaces are not set up")
        ns = ["--net", "--mount"] if mount else ["--net"]
        return ["nsenter", "--target", str(self.holder.pid), *ns, "--", *argv]

    def _daemon_argv(self, argv: Sequence[str]) -> List[str]:
        """As a daemon of the node: in its cgroup (found and stopped there at the end), then its namespaces."""
        return ["sh", "-c", 'echo $$ > "$1"; shift; exec "$@"', "join",
                str(self.daemon_cgroup / "cgroup.procs"), *self.on_node(argv)]

    @property
    def daemon_cgroup(self) -> Path:
        return CGROUP / "pids" / self.cgroup_name / "daemons"

    def adopt(self, pid: int) -> None:
        """Put process *pid* (run against the node from the machine) in the cluster's ``tests``
        cgroup: it is killed with the cluster, also when the test process dies before its stop."""
        tests = CGROUP / "pids" / self.cgroup_name / "tests"
        tests.mkdir(exist_ok=True)
        (tests / "cgroup.procs").write_text(f"{pid}\n")

    def run_on_node(self, argv: Sequence[str], timeout: float = 60, input: Optional[str] = None,
                    mount: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(self.on_node(argv, mount=mount), capture_output=True, text=True, timeout=timeout,
                              input=input, stdin=None if input is not None else subprocess.DEVNULL)

    def write_node_file(self, path: str, text: str) -> None:
        """Write *path* as the node sees it (``/etc/...`` goes to the session's overlay, not the machine)."""
        r = self.run_on_node(["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "write", path], input=text)
        if r.returncode != 0:
            raise ClusterError(f"writing {path} on the node: {r.stderr.strip()}")

    def remove_node_file(self, path: str) -> None:
        self.run_on_node(["rm", "-f", path])

    # -- the API ---------------------------------------------------------------------------------------

    def kubectl(self, *args: str, input: Optional[str] = None, check: bool = True,
                timeout: float = 120) -> subprocess.CompletedProcess:
        """The cluster's kubectl with the admin kubeconfig; *check*: a non-zero exit raises, quoting stderr."""
        r = self.run_on_node([str(self.kubectl_bin), "--kubeconfig", str(self.kubeconfig),
                              f"--cache-dir={self.base / 'kubectl-cache'}", *args],
                             timeout=timeout, input=input, mount=False)
        if check and r.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
        return r

    def get(self, *args: str) -> Dict[str, Any]:
        """``kubectl get ... -o json``, parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def get_raw(self, path: str) -> Any:
        """The API server's answer at *path* (``/version``, ``/apis/resource.k8s.io/v1``), parsed."""
        return json.loads(self.kubectl("get", "--raw", path).stdout)

    def apply(self, *objects: Dict[str, Any], server_side: bool = True) -> None:
        # JSON, not YAML: PyYAML leaves strings such as "y" unquoted, which kubectl reads as booleans
        text = json.dumps(objects[0] if len(objects) == 1 else {"apiVersion": "v1", "kind": "List",
                                                                 "items": list(objects)})
        self.kubectl("apply", *(["--server-side"] if server_side else []), "-f", "-", input=text)

    def delete(self, kind: str, *names: str, namespace: str = "default", wait: bool = True) -> None:
        """Delete objects; *wait*: until they are gone (a pod: its containers stopped by kubelet)."""
        self.kubectl("delete", kind, *names, "-n", namespace, "--ignore-not-found", f"--wait={str(wait).lower()}",
                     timeout=180)

    def node(self) -> Dict[str, Any]:
        return self.get("node", self.node_name)

    def allocatable(self, resource: str) -> int:
        return int(self.node()["status"].get("allocatable", {}).get(resource, "0"))

    def capacity(self, resource: str) -> int:
        return int(self.node()["status"].get("capacity", {}).get(resource, "0"))

    def pod(self, name: str, namespace: str = "default") -> Dict[str, Any]:
        return self.get("pod", name, "-n", namespace)

    def wait(self, what: Callable[[], Any], timeout: float, message: str, interval: float = 0.2) -> Any:
        """Poll *what* until it returns something true (returned) or *timeout* passes (ClusterError
        naming *message* and the last value or error)."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            try:
                got = what()
                if got:
                    return got
                last = got
            except DaemonExited:
                raise
            except (ClusterError, subprocess.TimeoutExpired, KeyError, ValueError) as err:
                last = err
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out after {timeout:.0f} s waiting for {message} (last: {last})")
            time.sleep(interval)

    def wait_pod_phase(self, name: str, phase: str = "Running", timeout: float = 120,
                       namespace: str = "default") -> Dict[str, Any]:
        """The pod once its phase is *phase* (for Running: its containers started); ClusterError with the
        pod's conditions, container states and events when it does not get there."""
        def reached() -> Optional[Dict[str, Any]]:
            p = self.pod(name, namespace)
            status = p.get("status", {})
            if status.get("phase") in ("Failed", "Succeeded") and status.get("phase") != phase:
                raise AssertionError(f"pod {name} ended {status.get('phase')}: {self.describe_pod(name, namespace)}")
            return p if status.get("phase") == phase else None

        try:
            return self.wait(reached, timeout, f"pod {name} {phase}")
        except ClusterError as err:
            raise ClusterError(f"{err}\n{self.describe_pod(name, namespace)}") from None

    def describe_pod(self, name: str, namespace: str = "default") -> str:
        r = self.kubectl("describe", "pod", name, "-n", namespace, check=False)
        return r.stdout[-4000:] + r.stderr

    def logs(self, pod: str, container: str = "", namespace: str = "default") -> str:
        return self.kubectl("logs", pod, "-n", namespace, *(["-c", container] if container else [])).stdout

    def wait_node(self, condition: Callable[[Dict[str, Any]], bool], timeout: float, message: str,
                  interval: float = 0.2) -> Dict[str, Any]:
        return self.wait(lambda: (lambda n: n if condition(n) else None)(self.node()), timeout, message, interval)

    def wait_allocatable(self, resource: str, count: int, timeout: float = 30) -> float:
        """Seconds until the node's allocatable *resource* is *count* (its capacity too when count > 0)."""
        t0 = time.monotonic()
        self.wait_node(lambda n: int(n["status"].get("allocatable", {}).get(resource, "0")) == count,
                       timeout, f"allocatable {resource} = {count}", interval=0.05)
        return time.monotonic() - t0

    def node_ready(self, node: Optional[Dict[str, Any]] = None) -> bool:
        node = node or self.node()
        return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", []))

    # -- containerd ------------------------------------------------------------------------------------

    def ctr(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """The cluster's ctr on its containerd, in CRI's ``k8s.io`` namespace."""
        return self.run_on_node([str(self.bins["containerd"] / "ctr"), "--address", str(self.containerd_socket),
                                 "-n", "k8s.io", *args], timeout=timeout)

    def import_image(self, archive: Path) -> None:
        """Import an OCI archive into containerd's ``k8s.io`` namespace (what CRI and so kubelet see)."""
        r = self.ctr("image", "import", str(archive))
        if r.returncode != 0:
            raise ClusterError(f"ctr image import {archive}: {r.stderr.strip()}")

    # -- kubelet ---------------------------------------------------------------------------------------

    def stop_kubelet(self) -> None:
        """Stop kubelet (SIGTERM, as a service manager does); pods keep running."""
        self.daemons["kubelet"].stop()

    def start_kubelet(self, wait_ready: bool = True) -> None:
        d = self.daemons["kubelet"]
        if d.alive():
            raise ClusterError("kubelet is already running")
        d.start(self._daemon_argv)
        if wait_ready:
            self.wait(lambda: self.pod_resources_socket.exists() and self._kubelet_healthy(), 60,
                      "kubelet healthy", interval=0.1)

    def restart_kubelet(self) -> None:
        self.stop_kubelet()
        self.start_kubelet()

    def kubelet_log(self) -> str:
        """kubelet's log: every instance's, one after the other (a start appends)."""
        return self.daemons["kubelet"].tail(n=1 << 30)

    def _registered_ready(self) -> Optional[Dict[str, Any]]:
        """The Node once Ready. A kubelet that exited fails at once with its log; a live one is
        waited for (on a loaded machine registration took minutes), and a hang ends with its log."""
        if not self.daemons["kubelet"].alive():
            raise DaemonExited(f"kubelet exited before its node was Ready:\n{self.daemons['kubelet'].tail()}")
        try:
            node = self.node()
        except ClusterError:
            return None
        return node if self.node_ready(node) else None

    def _kubelet_healthy(self) -> bool:
        if not self.daemons["kubelet"].alive():
            raise DaemonExited(f"kubelet exited:\n{self.daemons['kubelet'].tail()}")
        r = self.run_on_node([sys.executable, "-c", "import urllib.request,sys; "
                              "sys.exit(urllib.request.urlopen('http://127.0.0.1:10248/healthz', timeout=2)"
                              ".status != 200)"], timeout=10, mount=False)
        return r.returncode == 0

    # -- bring-up --------------------------------------------------------------------------------------

    def start(self) -> "Cluster":
        t0 = time.monotonic()
        ensure_inotify_instances()
        self.reaper = start_reaper(self.cgroup_name, self.base)
        try:
            for c in self.components():
                self.bins[c] = builds.ensure(c)
            self.timings["builds"] = time.monotonic() - t0
            t1 = time.monotonic()
            self._start()
            self.timings["start"] = time.monotonic() - t1
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        for d in (self.log_dir, self.root_dir, self.cdi_dir, self.base / "containerd", self.base / "pod-logs"):
            d.mkdir(parents=True, exist_ok=True)
        self._certificates()
        self._cgroups()
        self._namespaces()
        if self.link is not None:
            self.link(self)
        if self.join is None:
            self._control_plane()
        if self.kubelet_component:
            self._node()
        if self.join is None:
            # what every pod needs before it can be admitted: its namespace's service account and
            # the root CA config map its token volume projects
            self.wait(lambda: self.kubectl("get", "serviceaccount/default", "configmap/kube-root-ca.crt",
                                           check=False).returncode == 0, 120, "the default service account")

    def _node(self) -> None:
        """containerd, kube-proxy (a fleet's), kubelet; until the node is Ready with no not-ready taint."""
        self._containerd()
        if self.kube_proxy:
            self._run("kube-proxy", self.kube_proxy_argv())
        self.daemons["kubelet"] = Daemon("kubelet", self.kubelet_argv(), self.log_dir / "kubelet.log")
        self.start_kubelet(wait_ready=False)
        try:
            node = self.wait(self._registered_ready, 600, "the node Ready")
        except DaemonExited:
            raise
        except ClusterError as err:
            raise ClusterError(f"{err}\nkubelet's log ends:\n{self.daemons['kubelet'].tail()}") from None
        if node["metadata"]["name"] != self.node_name:
            raise ClusterError(f"unexpected node {node['metadata']['name']}")
        self.wait_node(lambda n: not any(t.get("key", "").startswith("node.kubernetes.io/")
                                         for t in n["spec"].get("taints", [])), 120, "the node untainted")

    def _certificates(self) -> None:
        """The control plane's PKI (a node that joins one uses its CA), and this node's identities."""
        server = self.api_server
        self.kubeconfigs: Dict[str, Path] = {}
        if self.join is not None:
            p = self.pki = self.join.pki
        else:
            p = self.pki = pki.PKI(self.base / "pki")
            self.api_pair = p.issue("apiserver", "kube-apiserver", server=True, client=False,
                                    dns=["kubernetes", "kubernetes.default", "kubernetes.default.svc",
                                         "kubernetes.default.svc.cluster.local", "localhost"],
                                    ips=["127.0.0.1", self.node_ip, "10.96.0.1"])
            self.api_kubelet_client = p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                                              orgs=["system:masters"])
            self.kubeconfigs.update({
                "admin": p.kubeconfig(self.kubeconfig, server, "admin",
                                      p.issue("admin", "xpu-cdi-test-admin", orgs=["system:masters"])),
                "controller-manager": p.kubeconfig(p.dir / "kcm.kubeconfig", server, "system:kube-controller-manager",
                                                   p.issue("kcm", "system:kube-controller-manager")),
                "scheduler": p.kubeconfig(p.dir / "scheduler.kubeconfig", server, "system:kube-scheduler",
                                          p.issue("scheduler", "system:kube-scheduler")),
            })
        if not self.kubelet_component:
            return
        node = self.node_name
        self.kubelet_serving = p.issue(f"kubelet-serving-{node}", node, server=True, client=False,
                                       dns=[node], ips=[self.node_ip])
        self.kubeconfigs["kubelet"] = p.kubeconfig(p.dir / f"kubelet-{node}.kubeconfig", server,
                                                   f"system:node:{node}",
                                                   p.issue(f"kubelet-{node}", f"system:node:{node}",
                                                           orgs=["system:nodes"]))
        if self.kube_proxy:  # system:kube-proxy is what RBAC's bootstrap binding to system:node-proxier names
            self.kubeconfigs["kube-proxy"] = p.kubeconfig(p.dir / f"kube-proxy-{node}.kubeconfig", server,
                                                          "system:kube-proxy",
                                                          p.issue(f"kube-proxy-{node}", "system:kube-proxy"))

    def _cgroups(self) -> None:
        """The cluster's cgroup in every v1 hierarchy (kubelet's cgroupRoot must exist) and its daemons' one."""
        for h in v1_hierarchies():
            d = h / self.cgroup_name
            d.mkdir(exist_ok=True)
            if h.name == "cpuset":  # a new cpuset has no cpus or mems: take the parent's
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (d / f).write_text((h / f).read_text())
        self.daemon_cgroup.mkdir(exist_ok=True)

    def _namespaces(self) -> None:
        tunables = self.base / "tunables"
        tunables.mkdir()
        for path, want in KUBELET_TUNABLES.items():
            if Path("/proc/sys", path).read_text().strip() != want:
                (tunables / path.replace("/", ":")).write_text(want + "\n")
        etcd = ""
        if self.join is None:
            (self.base / "etcd").mkdir()
            etcd = str(self.base / "etcd")
        ready = self.base / "holder.ready"
        env = dict(os.environ, LO_ADDR="" if self.link else self.node_ip, OVERLAYS=str(self.base / "overlays"),
                   OVERLAY_DIRS=" ".join(self.overlays),
                   ETCD_DATA=etcd, TUNABLES=str(tunables), READY=str(ready), ROOT_DIR=str(self.root_dir))
        with open(self.log_dir / "holder.log", "wb") as out:
            self.holder = subprocess.Popen(
                ["sh", "-c", 'echo $$ > "$1"; shift; exec "$@"', "join", str(self.daemon_cgroup / "cgroup.procs"),
                 "unshare", "--net", "--mount", "--propagation", "private", "sh", "-c", HOLDER],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        deadline = time.monotonic() + 30
        while not ready.exists():
            if self.holder.poll() is not None or time.monotonic() > deadline:
                raise ClusterError(f"setting up the node's namespaces failed:\n"
                                   f"{(self.log_dir / 'holder.log').read_text(errors='replace')}")
            time.sleep(0.02)

    def _gates(self, gates: Dict[str, bool]) -> List[str]:
        return [f"--feature-gates={','.join(f'{k}={str(v).lower()}' for k, v in sorted(gates.items()))}"] \
            if gates else []

    def _control_plane(self) -> None:
        k8s, p = self.bins["kubernetes"], self.pki
        self._run("etcd", [str(self.bins["etcd"] / "etcd"), "--name", "xpu-cdi", "--data-dir", str(self.base / "etcd"),
                           "--listen-client-urls", "http://127.0.0.1:2379",
                           "--advertise-client-urls", "http://127.0.0.1:2379",
                           "--listen-peer-urls", "http://127.0.0.1:2380",
                           "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
                           "--initial-cluster", "xpu-cdi=http://127.0.0.1:2380",
                           "--listen-metrics-urls", "http://127.0.0.1:2381", "--log-level", "warn"])
        self._run("kube-apiserver", [
            str(k8s / "kube-apiserver"), "--etcd-servers=http://127.0.0.1:2379",
            # every address of the namespace: its loopback, and a fleet's bridge
            "--bind-address=0.0.0.0", f"--advertise-address={self.node_ip}", f"--secure-port={API_PORT}",
            f"--cert-dir={self.base / 'apiserver'}",
            f"--tls-cert-file={self.api_pair.cert}", f"--tls-private-key-file={self.api_pair.key}",
            f"--client-ca-file={p.ca.cert}",
            f"--kubelet-client-certificate={self.api_kubelet_client.cert}",
            f"--kubelet-client-key={self.api_kubelet_client.key}",
            f"--kubelet-certificate-authority={p.ca.cert}", "--kubelet-preferred-address-types=InternalIP",
            "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p.sa_pub}", f"--service-account-signing-key-file={p.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--profiling=false", "--v=1",
            *self._audit_args(), *self._gates(self.feature_gates), *self.extra_args.get("kube-apiserver", [])])
        self.wait(lambda: self._alive("kube-apiserver") and
                  self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0,
                  120, "the API server ready", interval=0.3)
        self._run("kube-controller-manager", [
            str(k8s / "kube-controller-manager"), f"--kubeconfig={self.kubeconfigs['controller-manager']}",
            f"--authentication-kubeconfig={self.kubeconfigs['controller-manager']}",
            f"--authorization-kubeconfig={self.kubeconfigs['controller-manager']}",
            "--leader-elect=false", "--use-service-account-credentials=true",
            f"--service-account-private-key-file={p.sa_key}", f"--root-ca-file={p.ca.cert}",
            f"--cluster-signing-cert-file={p.ca.cert}", f"--cluster-signing-key-file={p.ca.key}",
            "--bind-address=127.0.0.1", "--profiling=false", "--v=1", *self._gates(self.feature_gates),
            *self.extra_args.get("kube-controller-manager", [])])
        self._run("kube-scheduler", [
            str(k8s / "kube-scheduler"), f"--kubeconfig={self.kubeconfigs['scheduler']}",
            f"--authentication-kubeconfig={self.kubeconfigs['scheduler']}",
            f"--authorization-kubeconfig={self.kubeconfigs['scheduler']}",
            "--leader-elect=false", "--bind-address=127.0.0.1", "--profiling=false", "--v=1",
            *self._gates(self.feature_gates), *self.extra_args.get("kube-scheduler", [])])

    def _audit_args(self) -> List[str]:
        if self.audit is None:
            return []
        policy = self.base / "audit-policy.json"
        policy.write_text(json.dumps(self.audit))
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}", "--audit-log-format=json",
                "--audit-log-maxbackup=1"]

    def start_daemon(self, name: str, argv: Sequence[str], env: Optional[Dict[str, str]] = None) -> Daemon:
        """*argv* run as one of the node's daemons (its namespaces, its cgroup: stopped with it
        whatever the test does), logging to ``<logs>/<name>.log``."""
        return self._run(name, argv, env)

    def _run(self, name: str, argv: Sequence[str], env: Optional[Dict[str, str]] = None) -> Daemon:
        d = Daemon(name, argv, self.log_dir / f"{name}.log", env)
        self.daemons[name] = d
        d.start(self._daemon_argv)
        return d

    def _alive(self, name: str) -> bool:
        d = self.daemons[name]
        if not d.alive():
            raise ClusterError(f"{name} exited ({d.proc.returncode if d.proc else '?'}):\n{d.tail()}")
        return True

    # -- containerd ------------------------------------------------------------------------------------

    def containerd_config_text(self) -> str:
        """containerd's own default config (version 4 in 2.3+) with the session's paths, CDI on and
        reading the cluster's spec dir, the pause image local, a loopback-only CNI, no NRI socket."""
        bin_dir = self.bins["containerd"]
        default = subprocess.run([str(bin_dir / "containerd"), "config", "default"], capture_output=True,
                                 text=True, check=True).stdout
        doc = tomlkit.parse(default)
        ctrd = self.base / "containerd"
        doc["root"], doc["state"] = str(ctrd / "root"), "/run/containerd"
        doc["imports"] = []
        plugins = doc["plugins"]
        plugins["io.containerd.server.v1.grpc"]["address"] = str(self.containerd_socket)
        plugins["io.containerd.server.v1.ttrpc"]["address"] = str(self.containerd_socket) + ".ttrpc"
        plugins["io.containerd.internal.v1.opt"]["path"] = str(ctrd / "opt")
        plugins["io.containerd.nri.v1.nri"]["disable"] = True
        images = plugins["io.containerd.cri.v1.images"]
        images["pinned_images"]["sandbox"] = PAUSE
        runtime = plugins["io.containerd.cri.v1.runtime"]
        runtime["enable_cdi"] = True
        runtime["cdi_spec_dirs"] = [str(self.cdi_dir)]
        if not has_cap_sys_resource():
            runtime["restrict_oom_score_adj"] = True
        cni_conf = ctrd / "net.d"
        cni_conf.mkdir(exist_ok=True)
        (cni_conf / "10-xpu-cdi.conflist").write_text(json.dumps(self.cni or {
            "cniVersion": "1.0.0", "name": "xpu-cdi-loopback", "plugins": [{"type": "loopback"}]}))
        runtime["cni"]["conf_dir"] = str(cni_conf)
        runtime["cni"]["bin_dirs"] = CNI_BIN_DIRS
        return tomlkit.dumps(doc)

    def _containerd(self) -> None:
        self.containerd_config.write_text(self.containerd_config_text())
        if self.configure_containerd is not None:
            self.configure_containerd(self)
        path = f"{self.bins['containerd']}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        self._run("containerd", [str(self.bins["containerd"] / "containerd"), "--config", str(self.containerd_config)],
                  env=dict(os.environ, PATH=path, **self.containerd_env))
        self.wait(lambda: self._alive("containerd") and self.containerd_socket.exists()
                  and self.ctr("version", timeout=10).returncode == 0, 60, "containerd", interval=0.1)
        self.import_image(oci_image_archive())
        self.import_image(pause_image(self.bins["kubernetes"]))

    # -- kubelet's configuration -----------------------------------------------------------------------

    def kubelet_config(self) -> Dict[str, Any]:
        p = self.pki
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            # this machine: cgroup v1 (hybrid), no systemd as init, no swap
            "failCgroupV1": False, "cgroupDriver": "cgroupfs", "cgroupRoot": f"/{self.cgroup_name}",
            "cgroupsPerQOS": True, "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "authentication": {"x509": {"clientCAFile": str(p.ca.cert)}, "webhook": {"enabled": True},
                               "anonymous": {"enabled": False}},
            "authorization": {"mode": "Webhook"},
            "tlsCertFile": str(self.kubelet_serving.cert), "tlsPrivateKeyFile": str(self.kubelet_serving.key),
            "address": self.node_ip, "readOnlyPort": 0, "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
            # no network: no cluster DNS, a resolv.conf of the session's
            "resolvConf": str(self.base / "resolv.conf"),
            "podLogsDir": str(self.base / "pod-logs"),
            # the machine's disk is shared with everything else: pods are never evicted for it
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                             "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            # the node's status (capacity, allocatable) is posted at most this long after a change;
            # the default 10 s would hide how fast the device plugin reports a card
            "nodeStatusUpdateFrequency": "1s",
            "featureGates": dict(self.kubelet_feature_gates),
        }

    def kubelet_argv(self) -> List[str]:
        cfg = self.base / "kubelet-config.yaml"
        cfg.write_text(yaml.safe_dump(self.kubelet_config()))
        (self.base / "resolv.conf").write_text("")
        assert self.kubelet_component
        return [str(self.bins[self.kubelet_component] / "kubelet"), f"--config={cfg}",
                f"--kubeconfig={self.kubeconfigs['kubelet']}", f"--root-dir={self.kubelet_root}",
                f"--cert-dir={self.base / 'kubelet-pki'}", f"--hostname-override={self.node_name}",
                f"--node-ip={self.node_ip}", "--v=2"]

    def kube_proxy_argv(self) -> List[str]:
        """kube-proxy in iptables mode, in the node's namespace; the conntrack tunables (machine-wide
        or per namespace by kernel) left as they are."""
        return [str(self.bins["kube-proxy"] / "kube-proxy"), f"--kubeconfig={self.kubeconfigs['kube-proxy']}",
                f"--hostname-override={self.node_name}", f"--cluster-cidr={self.kube_proxy}",
                "--proxy-mode=iptables", "--conntrack-max-per-core=0",
                "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
                "--metrics-bind-address=127.0.0.1:10249", "--healthz-bind-address=127.0.0.1:10256",
                "--profiling=false", "--v=1"]

    # -- tear-down -------------------------------------------------------------------------------------

    def record(self) -> None:
        """Note this cluster's directory and cgroup where the run's leak check reads them
        (``XPU_CDI_K8S_RECORD``, support/leaks.py): its own, not left behind by someone else."""
        path = os.environ.get("XPU_CDI_K8S_RECORD")
        if path:
            with open(path, "a") as f:
                f.write(json.dumps({"base": str(self.base), "cgroup": self.cgroup_name}) + "\n")

    def on_stop(self, stop: Callable[[], None]) -> None:
        """Have :meth:`stop` call *stop* first (a process a test runs against the node, e.g. a device
        plugin: it must not outlive the cluster when the test that started it failed to stop it)."""
        self.stop_first.append(stop)

    def stop(self, keep_logs: Optional[Path] = None) -> None:
        """Stop every daemon, then kill what is left in the cluster's cgroups (shims, pods), remove
        the cgroups and the session's directory (its logs copied to *keep_logs* first, when given).
        Safe after a failed or partial start."""
        for stop in reversed(self.stop_first):
            try:
                stop()
            except Exception:  # noqa: BLE001 - the cluster itself must still go
                pass
        self.stop_first.clear()
        for name in ("kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager", "kube-apiserver",
                     "containerd", "etcd"):
            if name in self.daemons:
                self.daemons[name].stop(timeout=15)
        kill_cgroup_tree(CGROUP / "pids" / self.cgroup_name)
        if self.holder is not None and self.holder.poll() is None:
            self.holder.kill()
        if self.holder is not None:
            self.holder.wait()
        for d in self.daemons.values():
            if d.proc is not None and d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()
        remove_cgroup_trees(self.cgroup_name)
        if keep_logs is not None and self.log_dir.is_dir():
            shutil.copytree(self.log_dir, keep_logs, dirs_exist_ok=True)
        shutil.rmtree(self.base, ignore_errors=True)
        if self.reaper is not None:
            self.reaper.communicate(STOPPED)  # it exits at once: nothing left for it to do
            self.reaper = None


STOPPED = b"stopped"  # what Cluster.stop tells the reaper when it is done


#: inotify instances the machine allows root: each cluster's kubelet, containerd and the daemons
#: take 30-40 of them, and kubelet exits ("inotify_init: too many open files") when none is left;
#: Debian's default of 128 holds three clusters (the session's, the older kubelet's, the fleet)
#: only just, so the suite raises it as kind's docs tell its users to (a raise, never lowered back)
INOTIFY_INSTANCES = 1024
INOTIFY_SYSCTL = Path("/proc/sys/fs/inotify/max_user_instances")


def ensure_inotify_instances() -> None:
    try:
        have = int(INOTIFY_SYSCTL.read_text())
        if have < INOTIFY_INSTANCES:
            INOTIFY_SYSCTL.write_text(f"{INOTIFY_INSTANCES}\n")
            sys.stderr.write(f"cluster: fs.inotify.max_user_instances raised from {have} to {INOTIFY_INSTANCES}\n")
    except OSError as err:
        raise ClusterError(f"cannot raise fs.inotify.max_user_instances to {INOTIFY_INSTANCES}: {err}: "
                           f"`sysctl -w fs.inotify.max_user_instances={INOTIFY_INSTANCES}` as root") from None


def start_reaper(cgroup_name: str, base: Path) -> subprocess.Popen:
    """The cluster's reaper (:func:`reap`): its own session (a signal to the tests' process group
    does not reach it), the write end of its stdin only here (close-on-exec: no child holds it)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(SUPPORT_PARENT),
                                                                     os.environ.get("PYTHONPATH")))))
    return subprocess.Popen([sys.executable, "-c", "import sys; from support.k8s.cluster import reap; "
                                                   "reap(sys.argv[1], sys.argv[2])", cgroup_name, str(base)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, start_new_session=True)


def reap(cgroup_name: str, base: str) -> None:
    """The reaper's body: wait until the cluster's owner says it stopped the cluster, or ends
    without saying it (the pipe closed); then kill every process of the cluster's cgroups
    (daemons, shims, pods, adopted processes: the node's mounts go with its namespaces), remove
    the cgroups and the session's directory."""
    if sys.stdin.buffer.read() == STOPPED:
        return
    kill_cgroup_tree(CGROUP / "pids" / cgroup_name)
    remove_cgroup_trees(cgroup_name)
    shutil.rmtree(base, ignore_errors=True)


def host_paths_snapshot() -> Dict[str, List[str]]:
    """Every name below each of HOST_PATHS on the machine (empty: absent)."""
    out: Dict[str, List[str]] = {}
    for top in HOST_PATHS:
        names: List[str] = []
        for dirpath, dirs, files in os.walk(top):
            names += [os.path.join(dirpath, n) for n in dirs + files]
        out[top] = sorted(names) if os.path.lexists(top) else []
    return out


def v1_hierarchies() -> List[Path]:
    """The mounted cgroup v1 hierarchies (``/sys/fs/cgroup/<name>``), not the unified one."""
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if fields[2] == "cgroup" and fields[1].startswith(str(CGROUP) + "/"):
                out.append(Path(fields[1]))
    return out


def cgroup_procs(top: Path) -> List[int]:
    pids: List[int] = []
    if not top.is_dir():
        return pids
    for procs in top.rglob("cgroup.procs"):
        try:
            pids += [int(p) for p in procs.read_text().split()]
        except OSError:
            pass
    return pids


def kill_cgroup_tree(top: Path, timeout: float = 30) -> None:
    """SIGKILL every process in cgroup *top* and below until none is left."""
    deadline = time.monotonic() + timeout
    while True:
        pids = [p for p in cgroup_procs(top) if p != os.getpid()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise ClusterError(f"processes left in {top}: {pids}")
        time.sleep(0.05)


def remove_cgroup_trees(name: str, timeout: float = 30) -> None:
    """rmdir cgroup *name* and everything below it in every hierarchy, deepest first (a cgroup whose
    last process just died may be busy for a moment)."""
    tops = [t for t in CGROUP.glob(f"*/{name}") if t.is_dir()]
    deadline = time.monotonic() + timeout
    for top in tops:
        while top.exists():
            for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [top]:
                try:
                    d.rmdir()
                except OSError:
                    pass
            if top.exists():
                if time.monotonic() > deadline:
                    raise ClusterError(f"cgroup {top} cannot be removed")
                time.sleep(0.05)


def has_cap_sys_resource() -> bool:
    """CAP_SYS_RESOURCE in our effective set (containerd's CRI sets oom_score_adj below its own without it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) & (1 << 24))
    return False


def pause_image(k8s_bin: Path) -> Path:
    """Kubernetes' pause (build/pause/linux/pause.c of the pinned k8s.io/kubernetes module), compiled
    statically as its Makefile does, in an OCI archive as its Dockerfile makes the image (``/pause``
    as the entrypoint, user 65535); built once per pin beside the binaries."""
    archive = k8s_bin.parent / "pause-oci.tar"
    if archive.exists():
        return archive
    import fcntl

    with open(k8s_bin.parent / ".lock-pause", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.exists():
            return archive
        version = builds.COMPONENTS["kubernetes"].version()
        src = builds.upstream.GOMODCACHE / f"k8s.io/kubernetes@{version}" / "build/pause/linux/pause.c"
        out = k8s_bin.parent / "pause"
        tag = PAUSE.rsplit(":", 1)[1]
        r = subprocess.run(["gcc", "-Os", "-Wall", "-Werror", "-static", f"-DVERSION=v{tag}-xpu-cdi-test",
                            "-o", str(out), str(src)], capture_output=True, text=True)
        if r.returncode != 0:
            raise ClusterError(f"compiling {src}: {r.stderr.strip()}")
        import io
        import tarfile

        from support.runtimes import write_oci_archive

        layer = io.BytesIO()
        with tarfile.open(fileobj=layer, mode="w") as t:
            t.add(out, arcname="pause")
        write_oci_archive(archive, PAUSE, layer.getvalue(), {"Entrypoint": ["/pause"], "User": "65535:65535"})
    return archive
