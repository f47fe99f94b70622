"""doctor's device-plugin checks (the "0 cards" chain) and the env-selection setting.

The registered case runs the real ``xpu-cdi device-plugin`` against the fake
kubelet of tests/deviceplugin (stubs from the upstream proto, tests/support/kubeproto.py).
"""

from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path
from typing import Iterator, List

import pytest

from support.doctornode import Node, checks, worst

from support import dpnode
from support import kubeletkit

pytestmark = pytest.mark.privileged  # mknod of the fake cards


@pytest.fixture
def kdir() -> Iterator[Path]:
    """kubelet's directory; short, for unix socket paths."""
    d = dpnode.short_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def sockets() -> Iterator[List[socket.socket]]:
    made: List[socket.socket] = []
    yield made
    for s in made:
        s.close()


def bind(path: Path, made: List[socket.socket]) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    made.append(s)


def plugin_args(node: Node, kdir: Path, *extra: str) -> List[str]:
    return ["--plugin-dir", str(kdir), "--plugin-status-file", str(node.tmp / "st.json"),
            "--node-config", str(node.tmp / "config.yaml"), *extra]


def test_not_a_kubernetes_node(node: Node) -> None:
    node.kunlunxin(cards=2)
    node.generate()
    _code, res = node.doctor(*plugin_args(node, node.tmp / "absent"))
    assert worst(res, "plugin-kubelet")["status"] == "ok" and not checks(res, "plugin-registered")
    assert "not a Kubernetes node" in checks(res, "plugin-kubelet")[0]["found"]


def test_no_kubelet_and_no_plugin(node: Node, kdir: Path) -> None:
    """kubelet.sock missing, nothing advertises the cards: both named, with the fix."""
    node.kunlunxin(cards=2)
    node.generate()
    code, res = node.doctor(*plugin_args(node, kdir))
    assert code == 1
    assert "kubelet.sock is missing" in worst(res, "plugin-kubelet")["found"]
    r = worst(res, "plugin-registered")
    assert r["status"] == "fail" and "node shows 0 of them" in r["found"] and "xpu-cdi device-plugin" in r["fix"]


def test_registered_plugin_and_undefined_ids(node: Node, kdir: Path, tmp_path: Path) -> None:
    """A running plugin: registered, socket, every advertised ID defined; against another spec dir,
    the advertised IDs are named as undefined (pods would fail with 'unresolvable CDI devices')."""
    host = node.kunlunxin(cards=4)
    node.generate()
    kubelet = kubeletkit.FakeKubelet(kdir)
    proc = kubeletkit.PluginProcess("pypi", [*host.cli_roots, "--plugin-dir", str(kdir), "--spec-dir",
                                             str(node.spec_dir), "--status-file", str(node.tmp / "st.json"),
                                             "--uevents", "none"], tmp_path / "plugin.log")
    try:
        kubelet.wait_registered()
        registered = False
        for _ in range(50):
            _code, res = node.doctor(*plugin_args(node, kdir))
            if worst(res, "plugin-registered")["status"] == "ok":
                registered = True
                break
            time.sleep(0.1)
        assert registered, res
        assert worst(res, "plugin-kubelet")["status"] == "ok"
        assert worst(res, "plugin-socket")["status"] == "ok"
        assert "advertises 4 device(s), all defined by a spec, all Healthy" in worst(res, "plugin-devices")["found"]
        node.spec_dir = tmp_path / "other-cdi"  # doctor reads another dir than the plugin and the runtime
        node.spec_dir.mkdir()
        _code, res = node.doctor(*plugin_args(node, kdir))
        r = worst(res, "plugin-devices")
        assert r["status"] == "fail" and "advertises 0, 1, 2, 3, which no spec" in r["found"]
        # a plugin runs and the node config is absent: env selection is still accepted
        assert worst(res, "env-selection")["status"] == "fail"
    finally:
        proc.stop()
        kubelet.stop()


class TestEnvSelection:
    def test_plugin_and_default_config_fails(self, node: Node, kdir: Path, sockets: List[socket.socket]) -> None:
        node.kunlunxin(cards=1)
        node.generate()
        bind(kdir / "kubelet.sock", sockets)
        bind(kdir / "vendor-xpu.sock", sockets)  # another vendor's plugin
        _code, res = node.doctor(*plugin_args(node, kdir))
        r = worst(res, "env-selection")
        assert r["status"] == "fail" and "vendor-xpu.sock" in r["found"] and "CXPU_VISIBLE_DEVICES=all" in r["found"]
        assert "accept-env-selection-when-unprivileged: false" in r["fix"]
        (node.tmp / "config.yaml").write_text("accept-env-selection-when-unprivileged: false\n")
        _code, res = node.doctor(*plugin_args(node, kdir))
        assert worst(res, "env-selection")["status"] == "ok"

    @pytest.mark.parametrize("text, status, needle", [
        ("accept-env-selection-when-unprivileged: no-thanks\n", "fail", "must be true or false"),
        ("[1, 2]\n", "fail", "expected a mapping"),
        ("a: [\n", "fail", "not valid YAML"),
        ("accept-env-selection-when-unprivileged: true\ncolour: blue\n", "warn", "unknown setting(s) colour"),
    ])
    def test_config_problems(self, node: Node, kdir: Path, text: str, status: str, needle: str) -> None:
        node.kunlunxin(cards=1)
        node.generate()
        (node.tmp / "config.yaml").write_text(text)
        _code, res = node.doctor(*plugin_args(node, kdir))
        r = worst(res, "env-selection")
        assert r["status"] == status and needle in r["found"]


def test_time_sliced_plugin_says_so(node: Node, kdir: Path, tmp_path: Path) -> None:
    """A plugin with sharing.timeSlicing: doctor names the cards (not the replicas) and their replicas."""
    host = node.kunlunxin(cards=2)
    node.generate()
    cfg = tmp_path / "dp.yaml"
    cfg.write_text("sharing: {timeSlicing: {resources: [{name: kunlunxin.com/xpu, replicas: 3}]}}\n")
    kubelet = kubeletkit.FakeKubelet(kdir)
    proc = kubeletkit.PluginProcess("pypi", [*host.cli_roots, "--plugin-dir", str(kdir), "--spec-dir",
                                             str(node.spec_dir), "--status-file", str(node.tmp / "st.json"),
                                             "--uevents", "none", "--config", str(cfg)], tmp_path / "plugin.log")
    try:
        assert len(kubelet.wait_for(lambda: kubelet.latest(), message="a device list")) == 6

        def found() -> str:
            _code, res = node.doctor(*plugin_args(node, kdir))
            return worst(res, "plugin-devices")["found"] if checks(res, "plugin-devices") else ""
        text = kubelet.wait_for(lambda: (lambda t: t if "replicas" in t else None)(found()),
                                message="doctor naming the replicas")
        assert "advertises 2 device(s), all defined by a spec, each as 3 time-slicing replicas" in text, text
    finally:
        proc.stop()
        kubelet.stop()
