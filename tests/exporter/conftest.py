"""Fixtures of the exporter's tests: a fake node with both kinds, and kubelet's PodResources API."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import pytest

from support.exporternode import Node, make_node, short_dir


@pytest.fixture
def node(tmp_path: Path, host_root: Path) -> Node:
    """8 Kunlunxin cards + 8 Ascend NPUs, specs generated, fake xpu-smi and npu-smi."""
    return make_node(host_root, tmp_path)


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    d = short_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def kubelet(sock_dir: Path) -> Iterator["object"]:
    from support.podresourceskit import FakePodResources

    k = FakePodResources(sock_dir / "kubelet.sock")
    yield k
    k.stop()
