"""Doctor check of the NPUs' interconnect facts: RoCE addresses in /etc/hccn.conf, whole HCCS domains."""

from __future__ import annotations

from typing import List

import pytest

from support import fakehost
from support.doctornode import Node, worst

pytestmark = pytest.mark.privileged


def found(res: list) -> List[str]:
    return [r["status"] + " " + r["found"] for r in res if r["check"] == "interconnect"]


class TestInterconnectCheck:
    def test_a_910_server_ok(self, node: Node) -> None:
        """8 NPUs of a 910 with hccn.conf: ok, two rings of 4, every address."""
        node.ascend(cards=8, pci_device="0xd801", hccn=True)
        _code, res = node.doctor()
        assert found(res) == ["ok ascend: 8 NPU(s): 2 HCCS domain(s) of 4 [0-3] [4-7]; RoCE addresses for all 8 "
                              "in /etc/hccn.conf"], res

    def test_no_hccn_conf_is_ok_with_a_tip(self, node: Node) -> None:
        node.ascend(cards=16)
        _code, res = node.doctor()
        r = worst(res, "interconnect")
        assert r["status"] == "ok" and "2 HCCS domain(s) of 8 [0-7] [8-15]" in r["found"], r
        assert "multi-server job needs" in r["fix"], r

    def test_unknown_server_shape_is_said(self, node: Node) -> None:
        node.ascend(cards=4)
        _code, res = node.doctor()
        assert "HCCS domains unknown (no domain rule for 4 Ascend910B NPUs" in worst(res, "interconnect")["found"]

    def test_two_npus_one_address_fails(self, node: Node) -> None:
        host = node.ascend(cards=8, hccn=True)
        text = fakehost.hccn_conf(8).replace("address_6=192.168.1.16", "address_6=192.168.1.13")
        host.path("/etc/hccn.conf").write_text(text)
        code, res = node.doctor()
        r = worst(res, "interconnect")
        assert code == 1 and r["status"] == "fail", res
        assert "NPUs 3, 6 share the RoCE address 192.168.1.13" in r["found"] and "hccn_tool" in r["fix"]

    def test_missing_address_and_bad_line_warn(self, node: Node) -> None:
        host = node.ascend(cards=8, hccn=True)
        host.path("/etc/hccn.conf").write_text(fakehost.hccn_conf(8, skip=(2, 3)) + "address_7=10.0.0.x\n")
        _code, res = node.doctor()
        got = found(res)
        assert any(g.startswith("warn ascend: /etc/hccn.conf: line 31: address_7='10.0.0.x' is not an IP") for g in got)
        assert "warn ascend: no RoCE address for NPU(s) 2-3 in /etc/hccn.conf" in got, got

    def test_a_missing_npu_splits_its_ring(self, node: Node) -> None:
        """davinci5 gone from a 910 (its PCI function still on the bus): ring 1 has 3 of 4."""
        host = node.ascend(cards=8, pci_device="0xd801", hccn=True)
        host.remove_card(5)
        _code, res = node.doctor()
        assert "warn ascend: HCCS domain 1 has 3 of 4 NPUs (NPU(s) 5 missing): a job that needs the whole domain " \
               "cannot run here" in found(res), found(res)

    def test_kunlunxin_not_checked(self, node: Node) -> None:
        node.kunlunxin()
        _code, res = node.doctor()
        assert found(res) == []
