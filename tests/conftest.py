"""Shared fixtures: fake host trees (cleaned up even on failure), a CLI runner
and the repository paths.  Real-runtime fixtures live in tests/support/runtimes.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner

from support import devdirs
from support import fakehost

# the fixtures of the helper package (tests/support, importable through pyproject's pythonpath)
pytest_plugins = ["support.runtimes", "support.hookkit", "support.matrix", "support.upstream"]

REPO = Path(__file__).resolve().parent.parent
IS_ROOT = os.geteuid() == 0


def pytest_configure(config: pytest.Config) -> None:
    """Fake device nodes need a filesystem without nodev: where the temp dir is nodev (a
    stock Debian 13 host's /tmp), pytest's base temp dir moves to one that allows them.
    xdist workers inherit the controller's."""
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        base = devdirs.pytest_basetemp()
        if base is not None:
            config.option.basetemp = str(base)


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    if IS_ROOT:
        return
    skip = pytest.mark.skip(reason="needs root: mknod of fake device nodes, mounts and namespaces")
    for item in items:
        if "privileged" in item.keywords or "runtime" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def host_root(tmp_path: Path) -> Iterator[Path]:
    """An empty directory for a fake host, removed (with its nodes) afterwards."""
    root = tmp_path / "host"
    root.mkdir()
    yield root
    fakehost.remove_tree(root)


@pytest.fixture
def xpu_host(host_root: Path) -> "fakehost.FakeHost":
    """A fake 8-card Kunlunxin P800 host."""
    return fakehost.kunlunxin(host_root, cards=8)


@pytest.fixture
def npu_host(host_root: Path) -> "fakehost.FakeHost":
    """A fake 4-NPU Ascend 910B host."""
    return fakehost.ascend(host_root, cards=4)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()
