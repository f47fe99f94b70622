"""The driver-upgrade drill (issue 28, item 6; the field report's outage) on node C's eight 910B,
with deploy/ as a user applies it (conftest.py's ``deployed``): the vendor's installer replaces
/usr/local/Ascend/driver with a new release while a pod holds a card.  docs/fleet.md says what
the running pod still has and why."""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any, Dict, List

import pytest
from support import fakehost, matrix
from support.k8s import nodekit
from support.k8s.fleet import FAKE_ROOTS, NODES, Fleet
from support.k8s.fleetdrill import DRIVER, NEW, OLD, upgrade

pytestmark = [pytest.mark.privileged]
C = NODES[2]
VERSION_LABEL = "xpu-cdi.io/npu.driver-version"
EXPORTER_PORT = 28470  # deploy/exporter.yaml's


def npu_pod(name: str) -> Dict[str, Any]:
    """A pod on node C holding one NPU: prints the driver's version file, then stays."""
    pod = nodekit.pod(name, ["sh", "-c", f"cat {DRIVER}/version.info; exec sleep 2147483647"], {nodekit.NPU: 1})
    pod["spec"].update(hostNetwork=False, nodeSelector={"kubernetes.io/hostname": C.name})
    return pod


def exec_in(fleet: Fleet, pod: str, script: str) -> str:
    r = fleet.kubectl("exec", pod, "--", "sh", "-c", script, check=False, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def exporter_driver_versions(fleet: Fleet) -> List[str]:
    """The versions node C's exporter pod names in xpu_cdi_driver_info, scraped from the control
    plane's namespace on its pod IP (as Prometheus does)."""
    (pod,) = [p for p in fleet.get("pods", "-n", "kube-system", "-l",
                                   "app.kubernetes.io/name=xpu-cdi-exporter")["items"]
              if p["spec"]["nodeName"] == C.name]
    url = f"http://{pod['status']['podIP']}:{EXPORTER_PORT}/metrics"
    code = f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=5).read().decode())"
    r = fleet.control.run_on_node([sys.executable, "-c", code], mount=False, timeout=30)
    assert r.returncode == 0, r.stderr
    return [line.split('version="')[1].split('"')[0] for line in r.stdout.splitlines()
            if line.startswith("xpu_cdi_driver_info{") and f'kind="{nodekit.NPU}"' in line]


def doctor_old_driver(fleet: Fleet) -> List[Dict[str, str]]:
    """`xpu-cdi doctor`'s old-driver lines, run on node C (its mount namespace: its fake host,
    the machine's /proc)."""
    r = fleet.nodes[C.name].run_on_node([matrix.XPU_CDI, "doctor", "--json", "--profile", "ascend",
                                         "--profiles-dir", "/nonexistent", *FAKE_ROOTS, "--proc-root", "/",
                                         "--spec-dir", "/var/run/cdi", "--runtime-version", "none"], timeout=120)
    assert r.returncode in (0, 1, 6), r.stderr  # 6: warnings only (docs/cli.md)
    return [x for x in json.loads(r.stdout) if x["check"] == "old-driver"]


def test_a_driver_upgrade_under_a_running_pod(fleet: Fleet, deployed: None, old_driver: fakehost.FakeHost) -> None:
    node = fleet.nodes[C.name]
    spec_file = node.cdi_dir / "huawei.com-npu.json"
    assert f"{DRIVER}/topo" not in spec_file.read_text()
    fleet.wait(lambda: fleet.labels(C.name).get(VERSION_LABEL) == "24.1.0-rc2", 60, "C's 24.1 label")
    fleet.wait(lambda: exporter_driver_versions(fleet) == ["24.1.0-rc2"], 60, "C's exporter on 24.1")
    before, after = f"drill-old-{uuid.uuid4().hex[:6]}", f"drill-new-{uuid.uuid4().hex[:6]}"
    try:
        fleet.apply(npu_pod(before))
        running = fleet.control.wait_pod_phase(before, "Running", 180)
        fleet.wait(lambda: fleet.control.logs(before).strip() == OLD, 60, "the old pod's version line")
        uid = running["metadata"]["uid"]
        assert not [r for r in doctor_old_driver(fleet) if uid in r["found"]]

        upgrade(old_driver)
        # watch (polling every second in the tests' overlay) rewrites the spec: the new topo mount
        fleet.wait(lambda: f"{DRIVER}/topo" in spec_file.read_text(), 60, "the spec rewritten with the new release")
        fleet.wait(lambda: fleet.labels(C.name).get(VERSION_LABEL) == "25.0.0-rc1", 60, "C's 25.0 label")
        fleet.wait(lambda: exporter_driver_versions(fleet) == ["25.0.0-rc1"], 60, "C's exporter on 25.0")
        assert node.allocatable(nodekit.NPU) == C.cards

        # the running pod runs on, with the old release's files: the version file it bound (the old
        # inode) and an empty lib64 (the old dir, its entries removed by the installer)
        fleet.apply(npu_pod(after))
        fleet.control.wait_pod_phase(after, "Running", 180)
        fleet.wait(lambda: fleet.control.logs(after).strip() == NEW, 60, "the new pod's version line")
        old_pod = fleet.control.pod(before)
        assert old_pod["status"]["phase"] == "Running", old_pod["status"]
        assert old_pod["status"]["containerStatuses"][0]["restartCount"] == 0
        assert exec_in(fleet, before, f"cat {DRIVER}/version.info").strip() == OLD
        assert exec_in(fleet, before, f"ls -A {DRIVER}/lib64").strip() == ""
        assert "libascend_hal.so" in exec_in(fleet, after, f"ls {DRIVER}/lib64/driver")
        assert exec_in(fleet, after, f"ls {DRIVER}/topo").strip() == "topo.json"

        # doctor names the old pod, not the new one
        lines = doctor_old_driver(fleet)
        new_uid = fleet.control.pod(after)["metadata"]["uid"]
        mine = [r for r in lines if r["found"].startswith(f"pod {uid} ")]
        assert len(mine) == 1 and mine[0]["status"] == "warn", lines
        assert f"{DRIVER}/lib64" in mine[0]["found"] and f"{DRIVER}/version.info" in mine[0]["found"], mine
        assert not [r for r in lines if new_uid in r["found"]], lines
    finally:
        nodekit.wait_gone(fleet.control, before, after)
