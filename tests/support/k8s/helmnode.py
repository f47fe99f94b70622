"""The Helm chart on the suite's node: the suite's helm (tests/support/helmchart.py) talking to the
session's API server, with a post-renderer plugin of the test's own that moves exactly the host
paths deploy/'s overlay moves (tests/support/k8s/dsnode.py, tests/k8s/test_daemonset_node.py say
which and why), so that ``helm install`` of the chart runs on the node as ``kubectl apply -k`` of
deploy/ does.  Helm 4 takes a post-renderer as a plugin (``postrenderer/v1``, subprocess runtime):
it writes the chart's output into the overlay and prints ``kubectl kustomize`` of it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import yaml

from support import fakehost, helmchart
from support.k8s.cluster import Cluster
from support.k8s.dsnode import ACCEL_LABEL, DS, NS, Node

PLUGIN = "xpu-cdi-test-node"
IMAGE = "docker.io/library/xpu-cdi"  # what `ctr images import` of make image's archive holds
SPECS = {"kunlunxin": "kunlunxin.com-xpu*", "ascend": "huawei.com-npu*"}  # a fake host's spec and index

PLUGIN_YAML = {"apiVersion": "v1", "type": "postrenderer/v1", "name": PLUGIN, "version": "0.1.0",
               "runtime": "subprocess",
               "runtimeConfig": {"platformCommand": [{"command": "${HELM_PLUGIN_DIR}/render.sh"}]}}
RENDER_SH = '#!/bin/sh\nset -e\ncat > "{overlay}/chart.yaml"\nexec "{kubectl}" kustomize "{overlay}"\n'


class HelmNode(Node):
    """The session's node (dsnode.Node: the fake 8-card host, the session's install dir) and a helm
    whose every install and upgrade goes through the post-renderer."""

    def __init__(self, cluster: Cluster, base: Path,
                 make_host: Optional[Callable[[Path], fakehost.FakeHost]] = None) -> None:
        super().__init__(cluster, base, make_host)
        self.home = base / "helm-home"
        plugin = self.home / "plugins" / PLUGIN
        plugin.mkdir(parents=True)
        (plugin / "plugin.yaml").write_text(yaml.safe_dump(PLUGIN_YAML))
        (plugin / "render.sh").write_text(RENDER_SH.format(overlay=self.overlay, kubectl=cluster.kubectl_bin))
        (plugin / "render.sh").chmod(0o755)
        self.write_overlay("unused")

    def write_overlay(self, tag: str, wiring: bool = False) -> None:
        """deploy/'s overlay with the chart's output (chart.yaml) as its one resource, the image left
        to the chart's values."""
        super().write_overlay(tag, wiring)
        k: Dict[str, Any] = yaml.safe_load((self.overlay / "kustomization.yaml").read_text())
        k["resources"] = ["chart.yaml"]
        k.pop("images", None)
        (self.overlay / "kustomization.yaml").write_text(yaml.safe_dump(k))

    def api_env(self, containers: Dict[str, List[str]]) -> None:
        """The API server's address in the env of the DaemonSet's *containers* (``{"initContainers": [names],
        "containers": [names]}``), as test_dra_daemonset_node gives the DRA driver's: 127.0.0.1:6443, there
        being no kube-proxy for the ``kubernetes`` Service's address; the containers still use their pod's
        token.  A strategic merge patch (by container name) in the overlay, until write_overlay()."""
        env = [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
               {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}]
        patch = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": DS, "namespace": NS},
                 "spec": {"template": {"spec": {kind: [{"name": n, "env": env} for n in names]
                                                for kind, names in containers.items()}}}}
        (self.overlay / "api-env.yaml").write_text(yaml.safe_dump(patch))
        k: Dict[str, Any] = yaml.safe_load((self.overlay / "kustomization.yaml").read_text())
        k["patches"].append({"path": "api-env.yaml"})
        (self.overlay / "kustomization.yaml").write_text(yaml.safe_dump(k))

    def env(self) -> Dict[str, str]:
        """helm's directories in the test's own (no ~/.config, ~/.cache of the machine's)."""
        return dict(os.environ, HELM_PLUGINS=str(self.home / "plugins"), HELM_CONFIG_HOME=str(self.home / "config"),
                    HELM_CACHE_HOME=str(self.home / "cache"), HELM_DATA_HOME=str(self.home / "data"))

    def helm(self, *args: str, check: bool = True, timeout: float = 420) -> subprocess.CompletedProcess:
        """helm *args* against the session's API server (in the node's network namespace)."""
        argv = self.cluster.on_node([helmchart.helm(), "--kubeconfig", str(self.cluster.kubeconfig), *args],
                                    mount=False)
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self.env(),
                           stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
        return r

    def chart_args(self, tag: str) -> List[str]:
        """The chart, the imported image at *tag*, and the post-renderer."""
        return [str(helmchart.CHART), "--set", f"image.repository={IMAGE}", "--set", f"image.tag={tag}",
                "--post-renderer", PLUGIN]

    def clean(self, namespace: str) -> None:
        """The release uninstalled (if still there), the node's label, the specs, node config, run dir, fake
        host and install dir removed: the node as before the test."""
        self.helm("uninstall", helmchart.RELEASE, "--namespace", namespace, "--wait", check=False)
        self.cluster.kubectl("label", "node", self.cluster.node_name, f"{ACCEL_LABEL}-", check=False)
        for f in self.cluster.cdi_dir.glob(SPECS[self.host.kind]):
            f.unlink()
        self.cluster.run_on_node(["rm", "-rf", "/etc/xpu-cdi", "/run/xpu-cdi"])
        fakehost.remove_tree(self.host.root)
        shutil.rmtree(self.install_dir, ignore_errors=True)
