"""The field reports (seeds), replayed on fake nodes: for each, doctor fails
exactly the check that names the cause, and its fix says what to do."""

from __future__ import annotations

import os

import pytest

from support.doctornode import Node, Results, worst

pytestmark = pytest.mark.privileged


def failing(res: Results) -> set:
    return {r["check"] for r in res if r["status"] == "fail"}


def healthy(node: Node, **kw: object) -> Node:
    node.kunlunxin(**kw)  # type: ignore[arg-type]
    node.generate()
    node.containerd_config()
    return node


@pytest.mark.parametrize("vendor", ["kunlunxin", "ascend"])
def test_seed_healthy_node_is_all_ok(node: Node, vendor: str) -> None:
    """The baseline of every scenario: a well set-up node passes everything, exit 0."""
    getattr(node, vendor)()
    node.generate()
    node.containerd_config()
    code, res = node.doctor("--runtimeclass", str(node.runtimeclass("xpu")))
    assert code == 0 and {r["status"] for r in res} == {"ok"}, [r for r in res if r["status"] != "ok"]
    assert {r["check"] for r in res} >= {"driver", "device-nodes", "device-permissions", "control-nodes",
                                         "driver-files", "driver-file-owners", "spec-files", "spec-valid",
                                         "spec-version", "spec-fresh", "spec-conflicts", "spec-paths",
                                         "containerd-cdi", "containerd-handler", "hook", "runtimeclass",
                                         "topology"}


def test_seed_no_driver_zero_cards(node: Node) -> None:
    """'The node reports 0 cards': cards in the slots, driver not loaded (no nodes)."""
    host = node.kunlunxin()
    for p in list(host.nodes):
        host.path(p).unlink()
    node.containerd_config()
    code, res = node.doctor()
    assert code == 1 and failing(res) == {"driver"}
    r = worst(res, "driver")
    assert "8 accelerator PCI function(s)" in r["found"] and "no card nodes" in r["found"]
    assert "driver is not loaded" in r["fix"] and "xpu-cdi generate" in r["fix"]


def test_seed_spec_missing(node: Node) -> None:
    """'Pod Running but /dev/xpu0 missing' because no spec was ever generated."""
    node.kunlunxin()
    node.containerd_config()
    code, res = node.doctor()
    assert code == 1 and failing(res) == {"spec-files"}
    assert "xpu-cdi generate" in worst(res, "spec-files")["fix"]


def test_seed_spec_stale_after_card_disappears(node: Node) -> None:
    """A card dropped off the bus after generate: the spec still lists it."""
    healthy(node).host.remove_card(3)  # type: ignore[union-attr]
    code, res = node.doctor()
    assert code == 1 and failing(res) == {"spec-fresh", "spec-paths"}
    r = worst(res, "spec-fresh")
    assert "devices no longer present: 3" in r["found"] and "xpu-cdi generate" in r["fix"]
    assert worst(res, "driver")["status"] == "warn"  # 7 nodes for 8 PCI devices


@pytest.mark.parametrize("release, check", [("1.6.20", "hook"), ("1.7.20", "containerd-cdi")])
def test_seed_containerd_without_cdi_and_without_hook(node: Node, release: str, check: str) -> None:
    """containerd with no CDI (1.6) or CDI off (1.7), and no xpu handler or hook: nothing injects."""
    node.kunlunxin()
    node.generate()
    node.containerd_config(cdi=None, handler=None)
    code, res = node.doctor(versions=(f"containerd={release}",))
    assert code == 1 and failing(res) == {check}
    assert "xpu-cdi runtime configure --runtime containerd" in worst(res, check)["fix"]


def test_seed_runtimeclass_handler_mismatch(node: Node) -> None:
    """RuntimeClass handler 'xpu-runtime' while containerd's handler is 'xpu'."""
    code, res = healthy(node).doctor("--runtimeclass", str(node.runtimeclass("xpu-runtime")))
    assert code == 1 and failing(res) == {"runtimeclass"}
    assert "set handler: xpu" in worst(res, "runtimeclass")["fix"]


def test_seed_non_root_owned_library_dir(node: Node) -> None:
    """The driver's library dir was unpacked by a user (uid 1000 owns /usr/local/xpu)."""
    healthy(node)
    os.chown(node.root / "usr/local/xpu", 1000, 1000)
    code, res = node.doctor()
    assert code == 1 and failing(res) == {"driver-file-owners"}
    r = worst(res, "driver-file-owners")
    assert "'/usr/local/xpu-5.0.21' is owned by uid 1000" in r["found"] and "chown -R root:root" in r["fix"]
