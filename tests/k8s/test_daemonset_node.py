"""deploy/ for real on the suite's node: `kubectl apply -k` with the image `make image`
builds (tests/support/imagebuild.py), imported into the node's containerd as an admin without a
registry would (`ctr images import`).

The node keeps its runtime's and kubelet's directories private to the test session
(tests/support/k8s/cluster.py): containerd reads CDI specs from the session's ``cdi_dir``, not
/var/run/cdi, and the machine's /usr/local must not receive the hook.  So the test applies
deploy/ through a kustomize overlay of its own that moves exactly those host paths to the
session's (spec dir, install dir) and adds the fake host's roots to the commands (the cards
are fake nodes under a temp dir, mounted at the same path so the specs name them); every
other path (/etc/xpu-cdi, /run/xpu-cdi, kubelet's plugin dir) is the node's own, already
private.  install-binaries still installs into /usr/local/xpu-cdi/bin inside its container,
now the session's dir, without the machine's /usr/local mounted above it (which it must not
touch; the ownership checks see the image's /usr/local there instead).  Nothing else of the
manifests changes: the images, init containers, probes, security contexts and rollout are
deploy/'s.

Checked: the DaemonSet Ready; the static hook on the host; specs naming it with
update-ldcache and no LD_LIBRARY_PATH; the device plugin registered; a pod asking for 2
cards sees exactly those; an image whose own env sets LD_LIBRARY_PATH keeps it while the
driver's library is found through the loader cache; a rolling update to a second image
while pods start, no container start failing; `kubectl delete -k` leaving the host as it
was but for what docs/operations.md says stays.
"""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
import threading
import time
from typing import Any, Dict, Iterator, List

import pytest

from support import fakehost
from support import imagebuild
from support import matrix
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from xpu_cdi._version import VERSION
from support.k8s.dsnode import (ACCEL_LABEL, CARDS, DRIVER_SO, DS, EXPORTER, NS, XPU, Node, label,
                                 two_cards, unlabel)
from xpu_cdi.host import install

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]


@pytest.fixture(scope="module")
def images(cluster: Cluster) -> Dict[str, Dict[str, Any]]:
    out = {"first": imagebuild.image(), "second": imagebuild.second_version(),
           "framework": imagebuild.framework_image()}
    for img in out.values():
        cluster.import_image(img["archive"])
    return out


@pytest.fixture(scope="module")
def daemonset(cluster: Cluster, images: Dict[str, Dict[str, Any]],
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(cluster, tmp_path_factory.mktemp("ds"))
    n.before = n.listing()  # type: ignore[attr-defined]
    assert label(cluster, n.host)[ACCEL_LABEL] == "true"  # what the DaemonSets select on
    try:
        n.apply(VERSION)
        n.wait_rolled_out(VERSION)
        n.wait_rolled_out(VERSION, name=EXPORTER, component="metrics")
        yield n
    finally:
        cluster.kubectl("delete", "-k", str(n.overlay), "--ignore-not-found", "--wait=true", check=False, timeout=180)
        unlabel(cluster)
        for f in cluster.cdi_dir.glob("kunlunxin.com-xpu*"):
            f.unlink()
        cluster.run_on_node(["rm", "-rf", "/etc/xpu-cdi", "/run/xpu-cdi"])
        fakehost.remove_tree(n.host.root)
        shutil.rmtree(n.install_dir, ignore_errors=True)


def test_every_daemonset_of_deploy_ready(daemonset: Node) -> None:
    """`kubectl apply -k deploy/` starts the exporter's DaemonSet beside the device plugin's, both
    Ready on the node (the exporter's readiness probe is its /healthz)."""
    for name in (DS, EXPORTER):
        st = daemonset.ds(name)["status"]
        assert (st.get("desiredNumberScheduled"), st.get("numberReady")) == (1, 1), (name, st)


def test_daemonset_ready_hook_on_the_host(daemonset: Node) -> None:
    """Ready; install-binaries put the image's static hook and wrapper into the install dir: root's,
    0755, not dynamically linked, the same bytes as the image's copies."""
    bindir = daemonset.install_dir / "bin"
    st = bindir.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)
    assert sorted(p.name for p in bindir.iterdir()) == sorted(install.NAMES)
    (p,) = daemonset.pods()
    logs = daemonset.cluster.logs(p["metadata"]["name"], "install-binaries", NS)
    # its container sees the install dir at deploy/'s path (see the module doc)
    assert logs.split("\n")[:2] == [f"installed {install.DEFAULT_DIR}/{n}" for n in install.NAMES], logs
    for name in install.NAMES:
        f = bindir / name
        st = f.stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o755)
        headers = subprocess.run(["readelf", "--program-headers", "--dynamic", str(f)], capture_output=True,
                                 text=True, check=True).stdout
        assert "INTERP" not in headers and "(NEEDED)" not in headers
    r = subprocess.run([daemonset.hook, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("usage: xpu-cdi-hook")


def test_specs_name_the_hook_and_never_set_ld_library_path(daemonset: Node) -> None:
    specs = sorted(daemonset.cluster.cdi_dir.glob("*.json"))
    assert [s.name for s in specs] == ["kunlunxin.com-xpu.json"]
    text = specs[0].read_text()
    assert "LD_LIBRARY_PATH" not in text
    spec = json.loads(text)
    (hook,) = [h for h in spec["containerEdits"]["hooks"] if "update-ldcache" in h["args"]]
    assert hook["path"] == daemonset.hook and hook["args"][-2:] == ["--folder", "/usr/local/xpu/lib64"], hook
    assert len(spec["devices"]) == CARDS + 1  # and "all"


def test_device_plugin_registered(daemonset: Node) -> None:
    daemonset.cluster.wait_allocatable(XPU, CARDS, timeout=60)
    podres = nodekit.PodResources(daemonset.cluster)
    try:
        assert podres.allocatable(XPU) == [str(i) for i in range(CARDS)]
    finally:
        podres.close()


def test_pod_with_two_sees_exactly_them(daemonset: Node, pods: List[str]) -> None:
    name = nodekit.unique("two")
    pods.append(name)
    two_cards(daemonset.cluster, name)


FRAMEWORK_SCRIPT = (
    'echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; '
    "python3 -c \"import ctypes; "
    f"print('framework', ctypes.CDLL('{imagebuild.FRAMEWORK_SO}').framework_answer()); "
    f"print('driver', ctypes.CDLL('{DRIVER_SO}').xpu_fake_answer())\"; "
    f"ldconfig -p | grep -F '{DRIVER_SO}'; cat /etc/ld.so.conf.d/*xpu-cdi*; "
    "ls /dev | grep '^xpu[0-9]'; echo xpu-cdi-script-done; exec sleep 2147483647")


def test_image_ld_library_path_kept_driver_found_through_the_cache(daemonset: Node, pods: List[str]) -> None:
    """A framework image whose own config sets LD_LIBRARY_PATH=/opt/framework/lib: the container still has
    exactly that value (its library loads through it), and the driver's library, in no dir of that
    path, is found by the loader through the cache the spec's update-ldcache hook built with the
    image's ldconfig."""
    name = nodekit.unique("framework")
    pods.append(name)
    manifest = nodekit.pod(name, ["sh", "-c", FRAMEWORK_SCRIPT], {XPU: 1})
    manifest["spec"]["containers"][0]["image"] = imagebuild.FRAMEWORK
    daemonset.cluster.apply(manifest)
    daemonset.cluster.wait_pod_phase(name, "Running", 120)
    out = daemonset.cluster.wait(lambda: (lambda o: o if nodekit.DONE in o else None)(daemonset.cluster.logs(name)), 60,
                            "the pod's output")
    lines = out.splitlines()
    assert lines[0] == f"LD_LIBRARY_PATH={imagebuild.FRAMEWORK_LIB}", out
    assert "framework 7" in lines and "driver 42" in lines, out
    assert re.search(rf"{re.escape(DRIVER_SO)} .*=> /usr/local/xpu/lib64/{re.escape(DRIVER_SO)}", out), out
    assert "/usr/local/xpu/lib64" in out
    assert len([ln for ln in lines if re.fullmatch(r"xpu\d+", ln)]) == 1, out


def test_rolling_update_while_pods_start(daemonset: Node, pods: List[str]) -> None:
    """The DaemonSet moves to a second image (other bytes in the host binaries) while card pods keep
    starting, two at a time: install-binaries replaces the hook under them, the spec keeps its
    content.  No container start fails (no pod fails or stalls at container creation or start,
    none reports its cards wrong).  Pods the kubelet rejects at admission while the device plugin is
    between its old and its new pod (UnexpectedAdmissionError, kubelet's behaviour with any plugin
    restart: kubernetes/kubernetes#109595) are counted apart: no container was started for them."""
    cluster = daemonset.cluster
    old_hook = (daemonset.install_dir / "bin" / "xpu-cdi-hook").stat().st_ino
    spec_before = (cluster.cdi_dir / "kunlunxin.com-xpu.json").read_bytes()
    stop = threading.Event()
    results: List[Dict[str, Any]] = []

    def starter() -> None:
        while not stop.is_set():
            name = nodekit.unique("roll")
            pods.append(name)
            manifest = nodekit.pod(name, ["sh", "-c", matrix.SCRIPT + "; echo xpu-cdi-script-done"], {XPU: 1})
            created = time.monotonic()
            cluster.apply(manifest)
            results.append({"name": name, "created": created, **wait_finished(cluster, name)})

    threads = [threading.Thread(target=starter) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        cluster.wait(lambda: len(results) >= 2, 300, "two card pods ended before the rollout")
        rollout = time.monotonic()
        daemonset.apply(f"{VERSION}-v2")
        daemonset.wait_rolled_out(f"{VERSION}-v2")
        rolled_out = time.monotonic()
        # and some starts after: pods created once it was done, and five started in all
        cluster.wait(lambda: any(r["created"] > rolled_out for r in results)
                     and len([r for r in results if r["outcome"] != "admission"]) >= 5, 300,
                     "pods started after the rollout")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=300)
    started = [r for r in results if r["outcome"] != "admission"]
    failed = [r for r in started if r["outcome"] != "ok"]
    assert failed == [] and len(started) >= 5, (failed, len(results))
    during = [r for r in started if rollout <= r["created"] <= rolled_out]
    assert during, "no pod was created while the DaemonSet rolled out"
    new = daemonset.install_dir / "bin" / "xpu-cdi-hook"
    assert new.stat().st_ino != old_hook and new.read_bytes().endswith(b"second version\0")
    # generate rewrites it (atomically) with the same content: the same image code, the same cards
    assert (cluster.cdi_dir / "kunlunxin.com-xpu.json").read_bytes() == spec_before
    print(f"rolling update ({rolled_out - rollout:.1f} s): {len(results)} pods, {len(started)} started ok "
          f"({len(during)} created during it), "
          f"{len(results) - len(started)} rejected at admission while the plugin restarted")


def wait_finished(cluster: Cluster, name: str, timeout: float = 120) -> Dict[str, Any]:
    """How pod *name* ended: ok (Succeeded, one card seen and allowed), admission (rejected by kubelet
    before any container), or what went wrong."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = cluster.pod(name)
        st = p.get("status", {})
        if st.get("phase") == "Succeeded":
            out = cluster.logs(name)
            seen = nodekit.cards_seen(out)
            good = len(seen) == 1 and out.count(matrix.ENXIO) >= 1
            return {"outcome": "ok" if good else "wrong cards", "log": out[-500:]}
        if st.get("phase") == "Failed":
            if st.get("reason") == "UnexpectedAdmissionError" and not st.get("containerStatuses"):
                return {"outcome": "admission", "message": st.get("message", "")}
            return {"outcome": "failed", "status": st}
        for cs in st.get("containerStatuses", []):
            waiting = cs.get("state", {}).get("waiting", {})
            if waiting.get("reason") in ("CreateContainerError", "RunContainerError", "StartError",
                                         "CreateContainerConfigError"):
                return {"outcome": "failed", "waiting": waiting}
        time.sleep(0.3)
    return {"outcome": "stalled", "describe": cluster.describe_pod(name)}


def test_delete_leaves_the_host_as_before_but_for_what_stays(daemonset: Node) -> None:
    """`kubectl delete -k`: the pod goes, its sockets with it (kubelet's plugin dir as before); what the docs
    say stays, stays: the hook and the wrapper (the specs left behind name them: a container started from
    them needs the hook), the specs and their index in the spec dir (a tmpfs on real hosts, gone at
    reboot), the node config, the dirs kubelet created for hostPath volumes and the device plugin's
    empty lock files in /run/xpu-cdi (a tmpfs).  The plugin's socket and status file go with it."""
    cluster = daemonset.cluster
    cluster.kubectl("delete", "-k", str(daemonset.overlay), "--wait=true", timeout=180)
    # both DaemonSets' pods: the exporter's removes its status file as it stops
    cluster.wait(lambda: not daemonset.pods() and not daemonset.pods("metrics"), 120, "the DaemonSets' pods gone")
    daemonset.assert_left_only_what_stays()
