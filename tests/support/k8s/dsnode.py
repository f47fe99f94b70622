"""deploy/ on the suite's node through an overlay of the test's (tests/k8s/test_daemonset_node.py
says why and what it moves): a fake 8-card Kunlunxin host with a real shared library in its
driver, the session's install dir, and the DaemonSet's rollout and listings."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set

import yaml

from support import exporternode, fakehost, imagebuild, matrix
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from xpu_cdi.host import install

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
NS = "kube-system"
DS = "xpu-cdi"
WIRING_DS = "xpu-cdi-runtime-wiring"
EXPORTER = "xpu-cdi-exporter"
XPU = nodekit.XPU
CARDS = 8
DRIVER_SO = "libxpufake.so.1"
ACCEL_LABEL = "xpu-cdi.io/present"  # what deploy/'s DaemonSets select on, set by `xpu-cdi labels`
#: the node's own directories the DaemonSet writes (besides the session's spec and install dirs)
HOST_PATHS = ("/etc/xpu-cdi", "/run/xpu-cdi", "/var/lib/kubelet/device-plugins")
#: kubelet's own record of the plugins it served (written at the first registration of the session)
KUBELET_FILES = {"/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"}
LABELS = "xpu-cdi.io/"


def label(cluster: Cluster, host: fakehost.FakeHost, profile: str = "kunlunxin") -> Dict[str, str]:
    """The node labelled as deploy/labels' DaemonSet labels it: one pass of `xpu-cdi labels` over the
    fake host, through the API server (admin's kubeconfig: the admission policy is test_labels_node's);
    the node's labels of ours after it."""
    r = cluster.run_on_node([matrix.XPU_CDI, "labels", "--profile", profile, "--profiles-dir", "/nonexistent",
                             *host.cli_roots, "--node", cluster.node_name, "--kubeconfig", str(cluster.kubeconfig)],
                            mount=False)
    assert r.returncode == 0, r.stderr
    return node_labels(cluster)


def node_labels(cluster: Cluster) -> Dict[str, str]:
    """The node's labels under xpu-cdi.io/."""
    node = json.loads(cluster.kubectl("get", "node", cluster.node_name, "-o", "json").stdout)
    return {k: v for k, v in (node["metadata"].get("labels") or {}).items() if k.startswith(LABELS)}


def unlabel(cluster: Cluster) -> None:
    """Every xpu-cdi.io/ label off the node."""
    keys = [f"{k}-" for k in node_labels(cluster)]
    if keys:
        cluster.kubectl("label", "node", cluster.node_name, *keys, check=False)


class Node:
    """The session's node with deploy/ applied through the test's overlay."""

    def __init__(self, cluster: Cluster, base: Path,
                 make_host: Optional[Callable[[Path], fakehost.FakeHost]] = None) -> None:
        """*make_host*: another fake host than the 8 Kunlunxin cards, made at the path it is given."""
        self.cluster, self.base = cluster, base
        where = matrix.device_dir(base / "fake") / "host"
        self.host = make_host(where) if make_host else fakehost.kunlunxin(where, CARDS)
        for n in sorted(set(self.host.numa.values())):
            (self.host.root / "sys/devices/system/node" / f"node{n}").mkdir(parents=True, exist_ok=True)
        if make_host is None:
            # a real shared library in the driver's lib64, as the XRE's are (ldconfig ignores the fake text ones)
            lib64 = self.host.path("/usr/local/xpu/lib64")
            imagebuild.shared_library(lib64 / DRIVER_SO, DRIVER_SO, "xpu_fake_answer", 42)
        # the host's install dir: root's, 0755, as /usr/local/xpu-cdi would be (the checks run on it)
        self.install_dir = base / "usr-local-xpu-cdi"
        self.install_dir.mkdir(mode=0o755)
        self.install_dir.chmod(0o755)
        self.host.path("/lib/modules").mkdir(parents=True, exist_ok=True)
        self.overlay = base / "overlay"
        self.overlay.mkdir()

    @property
    def hook(self) -> str:
        return f"{self.install_dir}/bin/xpu-cdi-hook"

    def write_overlay(self, tag: str, wiring: bool = False) -> None:
        """The overlay (see test_daemonset_node's doc) for image tag *tag*; *wiring*: with the
        runtime-wiring component, its containerd paths moved to the session's containerd."""
        fake = str(self.host.root)
        roots = self.host.cli_roots
        fake_mount = {"name": "fake-host", "mountPath": fake, "readOnly": True}

        def args_patch(container: str, index: int, args: List[str]) -> Dict[str, Any]:
            return {"op": "replace", "path": f"/spec/template/spec/{container}/{index}/args", "value": args}

        ds = yaml.safe_load((DEPLOY / "daemonset.yaml").read_text())
        spec = ds["spec"]["template"]["spec"]
        inits = {c["name"]: i for i, c in enumerate(spec["initContainers"])}
        mains = {c["name"]: i for i, c in enumerate(spec["containers"])}
        ops: List[Dict[str, Any]] = []
        # the spec dir containerd reads, the install dir (same paths inside as outside); this machine's
        # kernel has no /lib/modules (a hostPath of type Directory): the fake host's stands in
        for v, path in (("host-cdi", str(self.cluster.cdi_dir)), ("host-xpu-cdi", str(self.install_dir)),
                        ("host-lib-modules", str(self.host.path("/lib/modules")))):
            idx = next(i for i, vol in enumerate(spec["volumes"]) if vol["name"] == v)
            ops.append({"op": "replace", "path": f"/spec/template/spec/volumes/{idx}/hostPath/path", "value": path})
        ops.append({"op": "add", "path": "/spec/template/spec/volumes/-",
                    "value": {"name": "fake-host", "hostPath": {"path": fake, "type": "Directory"}}})

        def remount(kind: str, index: int, container: Dict[str, Any]) -> None:
            mounts = []
            for m in container["volumeMounts"]:
                m = dict(m)
                if m["name"] == "host-cdi":
                    m["mountPath"] = str(self.cluster.cdi_dir)
                if not (container["name"] == "install-binaries" and m["name"] == "host-usr-local"):
                    mounts.append(m)
            if container["name"] not in ("install-binaries", "node-config"):
                mounts.append(fake_mount)
            ops.append({"op": "replace", "path": f"/spec/template/spec/{kind}/{index}/volumeMounts", "value": mounts})

        for kind, table in (("initContainers", inits), ("containers", mains)):
            for name, i in table.items():
                remount(kind, i, spec[kind][i])

        def moved(args: List[str]) -> List[str]:
            out = []
            for a in args:
                a = a.replace("/var/run/cdi", str(self.cluster.cdi_dir))
                a = a.replace(install.DEFAULT_DIR, f"{self.install_dir}/bin")
                out.append(a)
            return out

        gen = spec["initContainers"][inits["generate"]]["args"]
        ops.append(args_patch("initContainers", inits["generate"], moved(gen) + roots))
        ops.append(args_patch("containers", mains["watch"], moved(spec["containers"][mains["watch"]]["args"]) +
                              roots + ["--source", "none", "--poll-interval", "1"]))
        ops.append(args_patch("containers", mains["device-plugin"],
                              moved(spec["containers"][mains["device-plugin"]]["args"]) + roots +
                              ["--uevents", "none", "--health-interval", "0.5"]))
        rel = os.path.relpath(DEPLOY, self.overlay)
        (self.overlay / "patch.json").write_text(json.dumps(ops, indent=1))
        kustomization: Dict[str, Any] = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": [rel],
            "images": [{"name": "xpu-cdi", "newName": "docker.io/library/xpu-cdi", "newTag": tag}],
            "patches": [{"path": "patch.json", "target": {"kind": "DaemonSet", "name": DS}}]}
        (self.overlay / "exporter.json").write_text(json.dumps(exporter_ops(self.cluster, self.host), indent=1))
        kustomization["patches"].append({"path": "exporter.json", "target": {"kind": "DaemonSet", "name": EXPORTER}})
        if wiring:
            kustomization["components"] = [os.path.join(rel, "runtime-wiring")]
            (self.overlay / "wiring.json").write_text(json.dumps(self.wiring_ops(), indent=1))
            kustomization["patches"].append({"path": "wiring.json",
                                             "target": {"kind": "DaemonSet", "name": WIRING_DS}})
        (self.overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))

    def wiring_ops(self) -> List[Dict[str, Any]]:
        """The wiring DaemonSet's containerd paths moved to the session's containerd (its config dir and
        socket; same paths inside as outside), the wrapper and hook to the session's install dir."""
        ds = yaml.safe_load((DEPLOY / "runtime-wiring" / "daemonset.yaml").read_text())
        spec = ds["spec"]["template"]["spec"]
        ctrd = str(self.cluster.containerd_config.parent)
        moves = {"/etc/containerd/config.toml": str(self.cluster.containerd_config),
                 "/etc/containerd/conf.d/99-xpu-cdi.toml": f"{ctrd}/conf.d/99-xpu-cdi.toml",
                 "/run/containerd/containerd.sock": str(self.cluster.containerd_socket),
                 install.DEFAULT_DIR: f"{self.install_dir}/bin"}
        (init,) = spec["initContainers"]
        args = []
        for a in init["args"]:
            for old, new in moves.items():
                a = a.replace(old, new)
            args.append(a)
        # the spec dir the DaemonSet writes is the session's (deploy/'s default: /var/run/cdi)
        args += ["--cdi-spec-dir", str(self.cluster.cdi_dir)]
        ops: List[Dict[str, Any]] = [{"op": "replace", "path": "/spec/template/spec/initContainers/0/args",
                                      "value": args}]
        # the config dir and the socket's dir are one directory of the session's: mounted once, writable
        # (the drop-in goes there), at its own path
        for i, vol in enumerate(spec["volumes"]):
            if vol["name"] in ("host-etc-containerd", "host-run-containerd"):
                ops.append({"op": "replace", "path": f"/spec/template/spec/volumes/{i}/hostPath/path", "value": ctrd})
        mounts = [dict(m, mountPath=ctrd) if m["name"] == "host-etc-containerd" else m
                  for m in init["volumeMounts"] if m["name"] != "host-run-containerd"]
        ops.append({"op": "replace", "path": "/spec/template/spec/initContainers/0/volumeMounts", "value": mounts})
        return ops

    def apply(self, tag: str, wiring: bool = False) -> None:
        self.write_overlay(tag, wiring)
        self.cluster.kubectl("apply", "-k", str(self.overlay), timeout=180)

    def ds(self, name: str = DS) -> Dict[str, Any]:
        return self.cluster.get("daemonset", name, "-n", NS)

    def wait_rolled_out(self, tag: str, timeout: float = 240, name: str = DS,
                        component: str = "cdi-spec") -> Dict[str, Any]:
        """Until DaemonSet *name*'s one pod runs image *tag* and is Ready (all containers)."""
        image = f"docker.io/library/xpu-cdi:{tag}"

        def done() -> Any:
            d = self.ds(name)
            st = d.get("status", {})
            if st.get("observedGeneration") != d["metadata"]["generation"]:
                return None
            if (st.get("updatedNumberScheduled"), st.get("numberReady"), st.get("desiredNumberScheduled")) != (1, 1, 1):
                return None
            (p,) = self.pods(component)
            if any(c["image"] != image for c in p["spec"]["containers"]):
                return None
            return p if all(s.get("ready") for s in p["status"].get("containerStatuses", [])) else None

        try:
            return self.cluster.wait(done, timeout, f"DaemonSet {name} rolled out with {tag}", interval=0.5)
        except Exception:
            for p in self.pods(component):
                pod = p["metadata"]["name"]
                print(self.cluster.describe_pod(pod, NS))
                for cs in p["status"].get("initContainerStatuses", []) + p["status"].get("containerStatuses", []):
                    for previous in ([], ["-p"]):
                        r = self.cluster.kubectl("logs", pod, "-n", NS, "-c", cs["name"], *previous, check=False)
                        print(f"--- {cs['name']} {' '.join(previous)}: {r.stdout[-2000:]}{r.stderr[-300:]}")
            raise

    def pods(self, component: str = "cdi-spec") -> List[Dict[str, Any]]:
        return self.cluster.get("pods", "-n", NS, "-l", f"app.kubernetes.io/component={component}")["items"]

    def listing(self) -> Set[str]:
        """Every path the DaemonSet may write on the node (:data:`HOST_PATHS`, the spec and install dirs)."""
        return self.node_listing(*HOST_PATHS, str(self.cluster.cdi_dir), str(self.install_dir))

    def what_stays(self) -> Set[str]:
        """What docs/operations.md (and docs/helm.md) say stays on the node once the DaemonSet is deleted:
        the hook and the wrapper, the specs and their index, the node config, the dirs kubelet created for
        hostPath volumes, servemode's empty flock files (one way per kind) in /run/xpu-cdi (a tmpfs)."""
        cdi = self.cluster.cdi_dir
        return {f"{self.install_dir}/bin", self.hook, f"{self.install_dir}/bin/xpu-container-runtime",
                f"{cdi}/kunlunxin.com-xpu.json", f"{cdi}/kunlunxin.com-xpu.json.xpu-cdi",
                "/etc/xpu-cdi", "/etc/xpu-cdi/config.yaml", "/etc/xpu-cdi/profiles.d", "/run/xpu-cdi",
                "/run/xpu-cdi/serve-kunlunxin.com_xpu.lock", "/run/xpu-cdi/serve-kunlunxin.com_xpu.device-plugin.lock"}

    def assert_left_only_what_stays(self) -> None:
        """After the objects are deleted: the node holds what :meth:`what_stays` lists and nothing else
        new, nothing that was there (:attr:`before`) is gone -- whatever ran before in the session (the
        listing before may hold some of what stays already: another module's plugin made the lock
        files) -- and the install dir, this module's own, holds new binaries."""
        after = self.listing()
        added = after - self.before - KUBELET_FILES  # type: ignore[attr-defined]
        removed = self.before - after  # type: ignore[attr-defined]
        stays = self.what_stays()
        assert sorted(stays - after) == [] and sorted(added - stays) == [] and sorted(removed) == [], \
            (sorted(stays - after), sorted(added - stays), sorted(removed))
        assert {f"{self.install_dir}/bin", self.hook} <= added, sorted(added)

    def node_listing(self, *paths: str) -> Set[str]:
        """Every path below *paths* as the node sees them (its /etc, /run are the session's)."""
        r = self.cluster.run_on_node(["sh", "-c", 'for p; do [ -e "$p" ] && find "$p"; done; true', "ls", *paths])
        return set(r.stdout.split())


def same_path_ops(ds: Dict[str, Any], moves: Dict[str, str], fake: str, extra_args: Dict[str, List[str]],
                  arg_moves: Dict[str, str], env: Dict[str, Dict[str, str]],
                  host_network: bool) -> List[Dict[str, Any]]:
    """JSON-patch ops for DaemonSet *ds* on the suite's node (test_dra_daemonset_node's doc says why):
    the hostPath of each volume named in *moves* becomes that path, mounted at the same path inside
    (kubelet connects to the sockets the driver names; its root dir is the session's); the fake host's
    root *fake* mounted read-only, at its own path, in every container but ``node-config``; *arg_moves*
    replaced in every container's args, *extra_args* appended to the named ones; *env* added to the
    named containers; ``hostNetwork`` set to *host_network*."""
    spec = ds["spec"]["template"]["spec"]
    ops: List[Dict[str, Any]] = [{"op": "add", "path": "/spec/template/spec/hostNetwork", "value": host_network}]
    for i, vol in enumerate(spec["volumes"]):
        if vol["name"] in moves:
            ops.append({"op": "replace", "path": f"/spec/template/spec/volumes/{i}/hostPath/path",
                        "value": moves[vol["name"]]})
    ops.append({"op": "add", "path": "/spec/template/spec/volumes/-",
                "value": {"name": "fake-host", "hostPath": {"path": fake, "type": "Directory"}}})
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(kind) or []):
            base = f"/spec/template/spec/{kind}/{i}"
            mounts = [dict(m, mountPath=moves[m["name"]]) if m["name"] in moves else dict(m) for m in c["volumeMounts"]]
            if c["name"] != "node-config":
                mounts.append({"name": "fake-host", "mountPath": fake, "readOnly": True})
            ops.append({"op": "replace", "path": f"{base}/volumeMounts", "value": mounts})
            if c["name"] != "node-config":
                args = list(c.get("args") or [])
                for old, new in arg_moves.items():
                    args = [a.replace(old, new) for a in args]
                ops.append({"op": "replace", "path": f"{base}/args", "value": args + extra_args.get(c["name"], [])})
            if c["name"] in env:
                ops.append({"op": "add", "path": f"{base}/env",
                            "value": list(c.get("env") or []) + [{"name": k, "value": v}
                                                                 for k, v in env[c["name"]].items()]})
    return ops


def exporter_ops(cluster: Cluster, host: fakehost.FakeHost) -> List[Dict[str, Any]]:
    """JSON-patch ops for deploy/exporter.yaml's DaemonSet on the suite's node (see :func:`same_path_ops`):
    the session's spec dir and PodResources socket, the fake host, whose ``xpu-smi`` prints the
    documented ``xpu-smi -m`` output (tests/data/exporter)."""
    tool = host.path(exporternode.TOOLS["xpu-smi"])
    tool.parent.mkdir(parents=True, exist_ok=True)
    tool.with_name("xpu-smi.out").write_bytes((exporternode.DATA / "xpu-smi-m.txt").read_bytes())
    tool.write_text('#!/bin/sh\nexec cat "$(dirname "$0")/xpu-smi.out"\n')
    tool.chmod(0o755)
    ds = next(d for d in yaml.safe_load_all((DEPLOY / "exporter.yaml").read_text()) if d and d["kind"] == "DaemonSet")
    moves = {"host-cdi": str(cluster.cdi_dir), "pod-resources": str(cluster.pod_resources_socket.parent)}
    return same_path_ops(
        ds, moves, str(host.root),
        extra_args={"exporter": host.cli_roots + ["--pod-resources-socket", str(cluster.pod_resources_socket),
                                                  "--interval", "1"]},
        arg_moves={"/var/run/cdi": str(cluster.cdi_dir)}, env={}, host_network=True)


def write_kustomization(overlay: Path, resources: List[str], tag: str,
                        patches: Dict[str, List[Dict[str, Any]]]) -> None:
    """*overlay*/kustomization.yaml: *resources*, the xpu-cdi image as imported (tag *tag*), and a JSON
    patch per DaemonSet named in *patches*."""
    kustomization: Dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": resources,
        "images": [{"name": "xpu-cdi", "newName": "docker.io/library/xpu-cdi", "newTag": tag}], "patches": []}
    for name, ops in patches.items():
        (overlay / f"{name}.json").write_text(json.dumps(ops, indent=1))
        kustomization["patches"].append({"path": f"{name}.json", "target": {"kind": "DaemonSet", "name": name}})
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))


def two_cards(cluster: Cluster, name: str) -> None:
    """Pod *name* asking for two cards sees exactly the two kubelet gave it (PodResources says which)."""
    out = nodekit.run_card_pod(cluster, name, {XPU: 2})
    podres = nodekit.PodResources(cluster)
    try:
        got = [int(i) for i in podres.devices(name, XPU)]
    finally:
        podres.close()
    assert len(got) == 2
    matrix.check_cards(out, got)
