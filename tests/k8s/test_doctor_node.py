"""`xpu-cdi doctor` on the cluster's node (run in the node's namespaces, with the node's containerd
2.x on PATH and its config): what it says about kubelet, the plugin and the runtime is checked
against the real cluster — the node's allocatable and kubelet's own PodResources view."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, Iterator

import pytest
import yaml

from support import matrix
from support.k8s.cluster import Cluster
from support.k8s.nodekit import XPU, Cards, DevicePlugin, PodResources

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
REPO = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(scope="module")
def cards(cluster: Cluster, cards: Cards) -> Iterator[Cards]:
    """conftest.py's cards, and what deploy/ installs on every node: env selection off for
    unprivileged containers."""
    config = yaml.safe_load((REPO / "deploy/node-config.yaml").read_text())["data"]["config.yaml"]
    cluster.write_node_file("/etc/xpu-cdi/config.yaml", config)
    yield cards
    cluster.remove_node_file("/etc/xpu-cdi/config.yaml")


def doctor(cluster: Cluster, cards: Cards, plugin: DevicePlugin) -> Dict[str, Dict[str, str]]:
    """`xpu-cdi doctor --json` on the node: check name -> its (last) result."""
    path = f"{cluster.bins['containerd']}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
    r = cluster.run_on_node(["env", f"PATH={path}", matrix.XPU_CDI, "doctor", "--json", "--profile", "kunlunxin",
                             "--profiles-dir", "/nonexistent", *cards.host.cli_roots,
                             "--spec-dir", str(cluster.cdi_dir), "--plugin-dir", str(cluster.plugin_dir),
                             "--plugin-status-file", str(plugin.status),
                             "--containerd-config", str(cluster.containerd_config)])
    assert r.stdout.strip().startswith("["), r.stdout + r.stderr
    return {c["check"]: c for c in json.loads(r.stdout)}


def test_doctor_on_a_serving_node(cluster: Cluster, cards: Cards, plugin: DevicePlugin) -> None:
    """kubelet found, the kind registered, its 8 cards advertised and defined; the count doctor
    gives is the node's allocatable and kubelet's own (PodResources); containerd 2.x with CDI on
    and the xpu handler; env selection off."""
    checks = doctor(cluster, cards, plugin)
    for name in ("plugin-kubelet", "plugin-registered", "plugin-socket", "plugin-devices", "env-selection",
                 "containerd-cdi", "containerd-handler"):
        assert checks[name]["status"] == "ok", checks[name]
    assert f"{XPU} as {XPU}: registered with kubelet" in checks["plugin-registered"]["found"]
    advertised = checks["plugin-devices"]["found"]
    assert "advertises 8 device(s), all defined by a spec, all Healthy" in advertised, advertised
    status = json.loads(plugin.status.read_text())
    ids = sorted(status["kinds"][XPU]["devices"], key=int)
    assert cluster.allocatable(XPU) == len(ids) == 8
    pr = PodResources(cluster)
    try:
        assert pr.allocatable(XPU) == ids
    finally:
        pr.close()
    assert "containerd 2.4" in checks["runtimes"]["found"], checks["runtimes"]


def test_doctor_with_the_plugin_stopped(cluster: Cluster, cards: Cards, plugin: DevicePlugin) -> None:
    """The plugin stopped: doctor says no device plugin runs and how to fix it; the node's
    allocatable drops to 0 (kubelet marks the cards unhealthy), which is what doctor explains."""
    plugin.stop()
    try:
        checks = doctor(cluster, cards, plugin)
        reg = checks["plugin-registered"]
        assert reg["status"] == "fail" and "no device plugin runs" in reg["found"], reg
        assert "xpu-cdi device-plugin" in reg["fix"], reg
        assert checks["plugin-kubelet"]["status"] == "ok"
        cluster.wait_allocatable(XPU, 0)
    finally:
        plugin.start()
        plugin.wait_served()
