"""containerd's CRI driven as kubelet drives it (tests/support/cri.py over the CRI socket), two rows:
containerd 1.7 (Debian 13's) and containerd 2.x (built from its Go module by tests/support/k8s/builds.py,
run on the host in a private mount namespace with its own /run):
a host-network pod sandbox from a locally built pause image, containers that ask for
cards the ways Kubernetes passes them — ``CDI_devices`` (what kubelet sends for a device
plugin's ``cdi_devices``), the ``cdi.k8s.io/`` annotation, both at once, nothing, the
device plugin's selection variable — through the ``xpu`` handler that
``xpu-cdi runtime configure --runtime containerd --enable-cdi`` wrote, picked with
``runtime_handler`` as a RuntimeClass does.  containerd 1.7 is Debian 13's: the host's
on a Debian 13 machine, the trixie tree's on a Debian 12 one.  containerd 2.x writes config
version 4 (2.3+): its CRI tables are ``io.containerd.cri.v1.runtime`` and ``...images``.

Settings this kind of machine needs (docs/runtime-integration.md): no CNI for
host-network pods; ``restrict_oom_score_adj = true`` where CAP_SYS_RESOURCE is missing;
the pause image local (``sandbox_image``), no registry.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

import pytest
import tomlkit

from support import matrix
from support.cri import CRI
from support.matrix import Cards, CriContainerd, check_cards

from support import dpnode
from support import kubeletkit

from support.k8s import builds
from xpu_cdi.runtime import containerd as containerd_config  # noqa: E402

grpc = pytest.importorskip("grpc", reason="grpcio (the test extra) is not installed")
pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
FIRST_CDI = (1, 7, 0)
#: what each container prints last (its CRI log is complete once it holds the line)
END = "xpu-cdi-test: end"


def place_with_cdi_containerd(request: pytest.FixtureRequest, base: Path) -> Tuple[matrix.Place, tuple]:
    """The host when its containerd has CDI (Debian 13), else the other release's tree."""
    host = matrix.Place()
    version = matrix.release_of(matrix.version_line(host, ["containerd", "--version"]))
    if version >= FIRST_CDI:
        return host, version
    tree = matrix.TreePlace(request.getfixturevalue("other_tree"), matrix.releasetree.other_release(), [base])
    version = matrix.release_of(matrix.version_line(tree, ["containerd", "--version"]))
    assert version >= FIRST_CDI, f"neither the host nor the {tree.name} has containerd >= 1.7: {version}"
    return tree, version


class BuiltPlace(matrix.Place):
    """The host with the containerd builds.py built first on PATH; its daemon in a private mount
    namespace whose /run is a tmpfs (the runc shim keeps runc's state in /run/containerd/runc
    whatever the config says: none of it reaches the machine's /run)."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.path = f"{bin_dir}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
        self.release = matrix.Place.release
        self.name = f"host, containerd {builds.COMPONENTS['containerd'].version()} built from its module"

    def argv(self, cmd: Sequence[str], cgroups: str = "") -> List[str]:
        return super().argv(["env", f"PATH={self.path}", *cmd], cgroups=cgroups)

    def daemon_argv(self, cmd: Sequence[str]) -> List[str]:
        return ["unshare", "-m", "--propagation", "private", "sh", "-c",
                'mount -n -t tmpfs -o mode=0755 tmpfs /run && exec "$@"', "private-run",
                "env", f"PATH={self.path}", *cmd]


def built_containerd() -> Tuple[matrix.Place, tuple]:
    place = BuiltPlace(builds.ensure_or_skip("containerd"))
    return place, matrix.release_of(matrix.version_line(place, ["containerd", "--version"]))


def cri_config(place: matrix.Place, base: Path, cards: Cards) -> str:
    """containerd's own default config, then `runtime configure --enable-cdi`, then this
    machine's settings."""
    cfg = base / "config.toml"
    cfg.write_text(place.run(["containerd", "config", "default"]).stdout)
    r = subprocess.run([matrix.XPU_CDI, "runtime", "configure", "--runtime", "containerd", "--config", str(cfg),
                        "--enable-cdi", "--cdi-spec-dir", str(cards.spec_dir),
                        "--cdi-spec-dir", str(matrix.version_specs(cards, base / "versions")),
                        "--wrapper-path", matrix.WRAPPER],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = tomlkit.parse(cfg.read_text())
    cri = doc
    for key in containerd_config.cri_keys(doc):
        cri = cri[key]
    assert cri["enable_cdi"] is True and list(cri["cdi_spec_dirs"]) == [str(cards.spec_dir), str(base / "versions")]
    # the hook route as docs/hook.md registers it for containerd: a handler whose base
    # runtime spec (the shipped file, with this checkout's paths) has the prestart hook
    spec = json.loads((matrix.REPO / "hooks/containerd/xpu-cdi-base-spec.json").read_text())
    spec["hooks"]["prestart"] = [{"path": matrix.HOOK, "args": ["xpu-cdi-hook", "prestart", "--log",
                                                                str(base / "hook.log")],
                                  "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                                          f"XPU_CDI_SPEC_DIRS={cards.spec_dir}"], "timeout": 20}]
    (base / "base-spec.json").write_text(json.dumps(spec))
    runtimes = cri["containerd"]["runtimes"]
    runtimes["xpu-hook"] = {"runtime_type": "io.containerd.runc.v2", "base_runtime_spec": str(base / "base-spec.json")}
    if containerd_config.version(doc) >= 3:  # 2.x: the images' own plugin pins the sandbox image
        doc["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"] = CriContainerd.PAUSE
    else:
        cri["sandbox_image"] = CriContainerd.PAUSE
    if not matrix.has_cap_sys_resource():
        cri["restrict_oom_score_adj"] = True
    return tomlkit.dumps(doc)


class Pods:
    def __init__(self, ctrd: CriContainerd, cri: CRI, cards: Cards, version: tuple) -> None:
        self.ctrd, self.cri, self.cards, self.version = ctrd, cri, cards, version

    def run(self, handler: str = "xpu", share_pid: bool = False, **kw) -> str:  # type: ignore[no-untyped-def]
        pod, config = self.cri.run_pod(handler, share_pid=share_pid, cgroup_parent=f"/{self.ctrd.cgroup_parent}")
        # the line printed last: the CRI log is read once it holds it
        return self.cri.run_container(pod, config, matrix.IMAGE, ["sh", "-c", f"{matrix.SCRIPT}; echo {END}"], END,
                                      **kw)


ROWS = {"containerd-1.7": (1, 7), "containerd-2": (2, 0)}


@pytest.fixture(scope="module", params=sorted(ROWS))
def pods(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pods]:
    base = tmp_path_factory.mktemp("cri")
    if request.param == "containerd-2":
        place, version = built_containerd()
    else:
        place, version = place_with_cdi_containerd(request, base)
    assert version[:2] >= ROWS[request.param], version
    cards = Cards(base / "cards")
    ctrd: Optional[CriContainerd] = None
    cri: Optional[CRI] = None
    try:  # what was started is stopped whichever step fails
        config = cri_config(place, base, cards)
        ctrd = CriContainerd(place, base / "containerd", config, env=[f"XPU_CDI_SPEC_DIRS={cards.spec_dir}"])
        logs = base / "logs"
        logs.mkdir()
        cri = CRI(f"unix://{ctrd.address}", logs)
        yield Pods(ctrd, cri, cards, version)
    finally:
        if cri is not None:
            cri.close()
        if ctrd is not None:
            ctrd.stop()
        cards.close()


def test_runtime_version(pods: Pods) -> None:
    """The CRI endpoint is the containerd of the row (the one `containerd --version` names)."""
    v = pods.cri.version()
    assert v.runtime_name == "containerd" and matrix.release_of(v.runtime_version) == pods.version


def test_cdi_devices(pods: Pods) -> None:
    """CDI_devices, as kubelet passes a device plugin's cdi_devices: containerd's CDI injects."""
    check_cards(pods.run(cdi_devices=["kunlunxin.com/xpu=3"]), [3])


def test_cdi_devices_default_handler(pods: Pods) -> None:
    """The same through the plain runc handler: containerd's own CDI, no binary of ours."""
    check_cards(pods.run(handler="", cdi_devices=["kunlunxin.com/xpu=2", "kunlunxin.com/xpu=7"]), [2, 7])


def test_annotation(pods: Pods) -> None:
    """A device plugin's cdi.k8s.io/ annotation (containerd 1.7 and 2.x read it when CDI is on)."""
    check_cards(pods.run(annotations={"cdi.k8s.io/xpu-cdi-test": "kunlunxin.com/xpu=5"}), [5])


def test_cdi_devices_and_annotation(pods: Pods) -> None:
    """Both at once, overlapping: every card once (containerd's CDI and the wrapper both see
    card 5; the node and the driver mount are not doubled)."""
    out = pods.run(cdi_devices=["kunlunxin.com/xpu=1", "kunlunxin.com/xpu=5"],
                   annotations={"cdi.k8s.io/xpu-cdi-test": "kunlunxin.com/xpu=5,kunlunxin.com/xpu=6"})
    check_cards(out, [1, 5, 6])
    assert sum(f" {matrix.DRIVER} " in ln for ln in out.splitlines()) == 1, out


def test_selection_env(pods: Pods) -> None:
    """The device plugin's selection variable: only the xpu handler (the wrapper) reads it."""
    check_cards(pods.run(env={matrix.selection_env(): "0,4"}), [0, 4])


def test_nothing_asked(pods: Pods) -> None:
    check_cards(pods.run(), [])


def test_hook_handler(pods: Pods) -> None:
    """The hook route: a handler whose base runtime spec registers xpu-cdi-hook (prestart)."""
    check_cards(pods.run(handler="xpu-hook", env={matrix.selection_env(): "6"}), [6])


def test_shared_pid_namespace_prestart_hook(pods: Pods) -> None:
    """shareProcessNamespace: true with the hook handler (prestart: a host pid): cards arrive."""
    check_cards(pods.run(handler="xpu-hook", share_pid=True, env={matrix.selection_env(): "2"}), [2])


def test_shared_pid_namespace_cdi(pods: Pods) -> None:
    """shareProcessNamespace: true (pid namespace per pod), CDI_devices: the cards arrive.  The
    spec's update-ldcache runs as a createContainer hook whose state pid is the container's pid in
    the pod's pid namespace: the hook must not look the container up through /proc/<pid>."""
    check_cards(pods.run(share_pid=True, cdi_devices=["kunlunxin.com/xpu=3"]), [3])


def test_shared_pid_namespace_wrapper(pods: Pods) -> None:
    """shareProcessNamespace: true, the xpu handler's selection variable: the cards arrive."""
    check_cards(pods.run(share_pid=True, env={matrix.selection_env(): "2"}), [2])


def test_doctor(pods: Pods) -> None:
    """doctor, run where containerd runs, with the config it runs: 1.7 with CDI on, the
    xpu handler in place, the specs in a dir it reads."""
    checks = matrix.doctor(pods.ctrd.place, pods.cards, "--containerd-config", str(pods.ctrd.config_path))
    release = ".".join(map(str, pods.version))
    assert f"containerd {release} (CDI up to " in checks["runtimes"]["found"], checks["runtimes"]
    for name in ("containerd-cdi", "containerd-handler"):
        assert checks[name]["status"] == "ok", checks[name]


def test_highest_cdi_version_is_doctors(pods: Pods) -> None:
    """The highest cdiVersion this containerd loads, measured, is the one doctor's table gives."""
    loaded = []
    for v in matrix.CDI_VERSIONS:
        try:
            pods.run(handler="", cdi_devices=[f"{matrix.version_kind(v)}=1"])
            loaded.append(v)
        except grpc.RpcError:
            pass
    matrix.check_highest("containerd", pods.version, loaded)


@pytest.mark.parametrize("cards", [["3"], ["1", "4", "6"]])
def test_device_plugin_allocate_through_cri(pods: Pods, tmp_path: Path, cards: list) -> None:
    """The whole Kubernetes chain but the scheduler: `xpu-cdi device-plugin` registers with a fake
    kubelet, answers Allocate, and its answer goes to containerd's CRI as kubelet hands it over --
    ``cdi_devices`` as ``CDI_devices``, the ``cdi.k8s.io/`` annotation as a container annotation, both
    at once -- through the plain runc handler: the container has exactly the allocated cards."""
    plugin_dir = dpnode.short_dir()
    k = kubeletkit.FakeKubelet(plugin_dir)
    proc = kubeletkit.PluginProcess("pypi", [*pods.cards.host.cli_roots, "--profile", "kunlunxin",
                                             "--profiles-dir", "/nonexistent", "--plugin-dir", str(plugin_dir),
                                             "--spec-dir", str(pods.cards.spec_dir), "--status-file",
                                             str(tmp_path / "st.json"), "--uevents", "none"],
                                    tmp_path / "plugin.log")
    try:
        assert k.wait_registered().resource_name == pods.cards.kind
        resp = k.allocate(cards).container_responses[0]
        names = [d.name for d in resp.cdi_devices]
        assert names == [f"{pods.cards.kind}={c}" for c in cards]
        assert not resp.devices and not resp.envs, resp  # CDI only: no host paths, no env
        assert list(resp.annotations.values()) == [",".join(names)], resp.annotations
        check_cards(pods.run(handler="", cdi_devices=names, annotations=dict(resp.annotations)),
                    [int(c) for c in cards])
    finally:
        proc.stop()
        k.stop()
        shutil.rmtree(plugin_dir, ignore_errors=True)
