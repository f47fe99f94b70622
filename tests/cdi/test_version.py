"""Minimum cdiVersion by content, per the table runtimes enforce."""

from __future__ import annotations

from typing import Any, Dict

import pytest

from xpu_cdi.cdi import version


def spec(devices: Any = None, edits: Any = None, kind: str = "example.com/acc", **top: Any) -> Dict[str, Any]:
    s: Dict[str, Any] = {"cdiVersion": "", "kind": kind,
                         "devices": devices or [{"name": "a", "containerEdits": {"env": ["A=1"]}}]}
    if edits is not None:
        s["containerEdits"] = edits
    s.update(top)
    return s


@pytest.mark.parametrize("s, want", [
    (spec(), "0.3.0"),
    (spec(edits={"mounts": [{"hostPath": "/a", "containerPath": "/a", "type": "bind"}]}), "0.4.0"),
    (spec(devices=[{"name": "0", "containerEdits": {"env": ["A=1"]}}]), "0.5.0"),
    (spec(edits={"deviceNodes": [{"path": "/dev/a", "hostPath": "/h/dev/a"}]}), "0.5.0"),
    (spec(annotations={"a": "b"}), "0.6.0"),
    (spec(devices=[{"name": "a", "annotations": {"a": "b"}, "containerEdits": {"env": ["A=1"]}}]), "0.6.0"),
    (spec(kind="example.com/a.b"), "0.6.0"),
    (spec(edits={"additionalGids": [5]}), "0.7.0"),
    (spec(edits={"additionalGids": []}), "0.3.0"),
    (spec(edits={"intelRdt": {"closID": "x"}}), "0.7.0"),
    (spec(edits={"intelRdt": {"enableMonitoring": True}}), "1.1.0"),
    (spec(edits={"netDevices": [{"hostInterfaceName": "eth0", "name": "net0"}]}), "1.1.0"),
])
def test_minimum(s: Dict[str, Any], want: str) -> None:
    """The first matching rule from the top decides; otherwise 0.3.0."""
    assert version.minimum(s) == want


@pytest.mark.parametrize("runtime, release, want", [
    ("podman", (4, 3, 1), "0.5.0"),
    ("containerd", (1, 6, 20), ""),
    ("containerd", (1, 7, 0), "0.5.0"),
    ("containerd", (1, 7, 12), "0.6.0"),
    ("containerd", (1, 7, 27), "0.8.0"),
    ("containerd", (2, 2, 1), "1.1.0"),
    ("crio", (1, 28, 3), "0.6.0"),
    ("docker", (24, 0, 0), ""),
    ("docker", (27, 1, 0), "0.7.0"),
    ("nosuch", (1, 0, 0), ""),
])
def test_runtime_max(runtime: str, release: tuple, want: str) -> None:
    """Highest cdiVersion each runtime release loads ("" = no CDI)."""
    assert version.runtime_max(runtime, release) == want


def test_parse() -> None:
    """Versions parse to tuples; a 'v' prefix is not a version."""
    assert version.parse("0.5.0") == (0, 5, 0)
    with pytest.raises(ValueError):
        version.parse("v0.5.0")
