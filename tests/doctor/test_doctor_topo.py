"""Doctor check of the cards' PCIe placement and links."""

from __future__ import annotations

import pytest

from support import fakehost
from support.doctornode import Node, worst

pytestmark = pytest.mark.privileged


class TestTopologyCheck:
    def test_two_switch_groups_ok_with_tip(self, node: Node) -> None:
        """8 cards under two switches: ok, naming the groups, with the --preferred tip."""
        node.kunlunxin()
        _code, res = node.doctor()
        r = worst(res, "topology")
        assert r["status"] == "ok" and "2 switch group(s) [0-3] [4-7] on 2 NUMA node(s)" in r["found"]
        assert "--preferred" in r["fix"]

    def test_degraded_link_warns(self, node: Node) -> None:
        """A card running at x8 of x16: warn naming it; the fix says reseat."""
        host = node.kunlunxin()
        fakehost.set_link(host, 6, width=8)
        _code, res = node.doctor()
        r = worst(res, "topology")
        assert r["status"] == "warn" and "/dev/xpu6 x8 of x16" in r["found"] and "reseat" in r["fix"]

    def test_no_sysfs_warns(self, node: Node) -> None:
        """Without sysfs PCI facts the placement is unknown: warn naming --sysfs-root."""
        node.kunlunxin(sysfs=False)
        _code, res = node.doctor()
        r = worst(res, "topology")
        assert r["status"] == "warn" and "no PCI address" in r["found"] and "--sysfs-root" in r["fix"]

    def test_switchless_ascend(self, node: Node) -> None:
        """Ascend cards on their own root ports (sysfs parent present): no switch, one group per card."""
        node.ascend(parent=True)
        _code, res = node.doctor()
        assert "no PCIe switch (each on its own port) [0] [1] [2] [3]" in worst(res, "topology")["found"]

    def test_ascend_without_parent_is_unknown_not_a_warning(self, node: Node) -> None:
        """A real Ascend host (davinciN without a sysfs parent): topology unknown, said as such, no warning."""
        node.ascend()
        _code, res = node.doctor()
        r = worst(res, "topology")
        assert r["status"] == "ok" and "topology unknown" in r["found"] and "DCMI" in r["found"]
