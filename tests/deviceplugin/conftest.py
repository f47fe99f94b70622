"""Fixtures of the device-plugin tests: a fake 8-card node with its specs, a
kubelet directory, the daemon on either Python stack, and a fake kubelet."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import pytest


from support import fakehost
from support import kubeletkit
from support.dpnode import FLOOR, Node, numa_nodes, short_dir


@pytest.fixture
def node(tmp_path: Path, host_root: Path) -> Iterator[Node]:
    """An 8-card Kunlunxin node (two switches, NUMA 0 and 1) with its spec written by `generate`."""
    host = fakehost.kunlunxin(host_root, cards=8)
    numa_nodes(host_root, 2)
    plugin_dir = short_dir()
    n = Node(host, tmp_path / "cdi", plugin_dir, tmp_path / "run" / "device-plugin.json")
    n.generate()
    yield n
    shutil.rmtree(plugin_dir, ignore_errors=True)


@pytest.fixture(params=["pypi", "debian"])
def stack(request: pytest.FixtureRequest) -> str:
    """Which grpcio/protobuf the daemon runs on: the venv's (PyPI) or Debian's."""
    kubeletkit.stack_python(request.param)  # skips, saying why, when that stack is not installed
    return str(request.param)


@pytest.fixture
def kubelet(node: Node) -> Iterator[kubeletkit.FakeKubelet]:
    k = kubeletkit.FakeKubelet(node.plugin_dir)
    yield k
    k.stop()


@pytest.fixture
def plugin(node: Node, stack: str, kubelet: kubeletkit.FakeKubelet,
           tmp_path: Path) -> Iterator[kubeletkit.PluginProcess]:
    yield from plugin_process(stack, node.args(), tmp_path)


@pytest.fixture
def evented_plugin(node: Node, stack: str, kubelet: kubeletkit.FakeKubelet,
                   tmp_path: Path) -> Iterator[kubeletkit.PluginProcess]:
    """The daemon polling only every 30 s: for the tests that time its reaction to an event."""
    yield from plugin_process(stack, node.args("--health-interval", FLOOR), tmp_path)


def plugin_process(stack: str, args: list, tmp_path: Path) -> Iterator[kubeletkit.PluginProcess]:
    p = kubeletkit.PluginProcess(stack, args, tmp_path / "plugin.log")
    yield p
    p.stop()
    print(f"the plugin's log:\n{p.text()}")  # pytest shows it when the test failed
