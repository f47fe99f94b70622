"""Fixtures of the device-plugin tests: a fake 8-card node with its specs, a
kubelet directory, the daemon on either Python stack, and a fake kubelet."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

import fakehost  # noqa: E402
import kubeletkit  # noqa: E402

from xpu_cdi.cli import main  # noqa: E402


@dataclass
class Node:
    """A fake host, its spec dir, kubelet's plugin dir and the plugin's status file."""

    host: fakehost.FakeHost
    spec_dir: Path
    plugin_dir: Path
    status: Path

    def generate(self, *extra: str) -> None:
        res = CliRunner().invoke(main, ["generate", *self.host.cli_roots, "--spec-dir", str(self.spec_dir), *extra])
        assert res.exit_code == 0, res.output

    def args(self, *extra: str) -> List[str]:
        return [*self.host.cli_roots, "--plugin-dir", str(self.plugin_dir), "--spec-dir", str(self.spec_dir),
                "--status-file", str(self.status), "--uevents", "none", "--health-interval", "0.5", *extra]


def numa_nodes(root: Path, count: int) -> None:
    """/sys/devices/system/node/node<N>: the NUMA nodes the fake host has."""
    for n in range(count):
        (root / "sys" / "devices" / "system" / "node" / f"node{n}").mkdir(parents=True, exist_ok=True)


@pytest.fixture
def node(tmp_path: Path, host_root: Path) -> Iterator[Node]:
    """An 8-card Kunlunxin node (two switches, NUMA 0 and 1) with its spec written by `generate`."""
    host = fakehost.kunlunxin(host_root, cards=8)
    numa_nodes(host_root, 2)
    plugin_dir = tmp_path / "kubelet"
    plugin_dir.mkdir()
    n = Node(host, tmp_path / "cdi", plugin_dir, tmp_path / "run" / "device-plugin.json")
    n.generate()
    yield n


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
def plugin(node: Node, stack: str, kubelet: kubeletkit.FakeKubelet, tmp_path: Path) -> Iterator[kubeletkit.PluginProcess]:
    p = kubeletkit.PluginProcess(stack, node.args(), tmp_path / "plugin.log")
    yield p
    p.stop()
