"""Fixtures of the doctor tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.doctornode import Node


@pytest.fixture
def node(tmp_path: Path, host_root: Path) -> Node:
    """A fake node; the host tree is built by the test (``node.kunlunxin()``) and removed afterwards."""
    return Node(tmp_path, host_root)
