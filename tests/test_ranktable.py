"""The rank table's format (src/xpu_cdi/ranktable.py) against the vendor's documented examples
(tests/data/vectors/ranktable.json) and its rules: status, order, rank ids, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xpu_cdi import ranktable
from xpu_cdi.ranktable import Device, Member

VECTORS = json.loads((Path(__file__).parent / "data/vectors/ranktable.json").read_text())["cases"]


def member(doc: dict) -> Member:
    return Member(index=doc["index"], server_id=doc["server_id"], host_ip=doc.get("host_ip", ""),
                  container_ip=doc.get("container_ip", ""), super_pod_id=doc.get("super_pod_id", ""),
                  hardware_type=doc.get("hardware_type", ""),
                  devices=tuple(Device(d[0], d[1], d[2] if len(d) > 2 else "") for d in doc["devices"]))


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"].split(",")[0] for c in VECTORS])
def test_vendor_examples(case: dict) -> None:
    members = [member(m) for m in case["members"]]
    table = ranktable.build(members, case["size"], need_pod_ips=case["completed_needs_pod_ips"])
    assert table.doc == case["want"]
    assert json.loads(table.dumps()) == case["want"]
    assert table.completed
    # the members in another order make the same table
    assert ranktable.build(members[::-1], case["size"], case["completed_needs_pod_ips"]).doc == case["want"]


def m(index: int, pod_ip: str = "", ids=(0, 1), server: str = "10.0.0.1") -> Member:
    return Member(index, server, tuple(Device(i, f"29.{index}.0.{i + 1}") for i in ids), host_ip=server,
                  container_ip=pod_ip)


def test_initializing_until_every_member_has_its_pod_ip() -> None:
    t = ranktable.build([m(1, "10.1.0.2")], 2)
    assert t.doc["status"] == "initializing" and not t.completed
    assert t.doc["server_count"] == "1"
    # a member's rank ids are its own, whoever else is known
    assert [d["rank_id"] for d in t.doc["server_list"][0]["device"]] == ["2", "3"]
    t = ranktable.build([m(0), m(1, "10.1.0.2")], 2)
    assert t.doc["status"] == "initializing"
    assert "container_ip" not in t.doc["server_list"][0]
    t = ranktable.build([m(0, "10.1.0.1"), m(1, "10.1.0.2")], 2)
    assert t.completed
    assert [s["container_ip"] for s in t.doc["server_list"]] == ["10.1.0.1", "10.1.0.2"]
    assert [d["rank_id"] for s in t.doc["server_list"] for d in s["device"]] == ["0", "1", "2", "3"]


def test_devices_by_physical_id_and_strings_only() -> None:
    t = ranktable.build([m(0, "10.1.0.1", ids=(5, 4, 7, 6))], 1)
    devices = t.doc["server_list"][0]["device"]
    assert [d["device_id"] for d in devices] == ["4", "5", "6", "7"]
    assert [d["rank_id"] for d in devices] == ["0", "1", "2", "3"]

    def strings(v) -> bool:
        if isinstance(v, dict):
            return all(strings(x) for x in v.values())
        if isinstance(v, list):
            return all(strings(x) for x in v)
        return isinstance(v, str)
    assert strings(t.doc)


def test_super_pods_only_when_every_npu_has_a_super_device_id() -> None:
    a = Member(0, "10.0.0.1", (Device(0, "29.0.0.1", "100"), Device(1, "29.0.0.2", "101")), super_pod_id="1",
               container_ip="10.1.0.1")
    b = Member(1, "10.0.0.2", (Device(0, "29.0.1.1", "200"), Device(1, "29.0.1.2", "201")), super_pod_id="0",
               container_ip="10.1.0.2")
    t = ranktable.build([a, b], 2)
    assert t.doc["version"] == "1.2"
    assert t.doc["super_pod_list"] == [{"super_pod_id": "0", "server_list": [{"server_id": "10.0.0.2"}]},
                                       {"super_pod_id": "1", "server_list": [{"server_id": "10.0.0.1"}]}]
    c = Member(1, "10.0.0.2", (Device(0, "29.0.1.1"), Device(1, "29.0.1.2")), container_ip="10.1.0.2")
    t = ranktable.build([a, c], 2)
    assert t.doc["version"] == "1.0" and "super_pod_list" not in t.doc
    assert all("super_device_id" not in d for s in t.doc["server_list"] for d in s["device"])


@pytest.mark.parametrize("members,size,why", [
    ([m(0), m(0)], 2, "two members have rank index 0"),
    ([m(2)], 2, "out of range"),
    ([m(0), m(1, ids=(0, 1, 2))], 2, "different numbers of NPUs"),
    ([m(0, ids=())], 1, "no NPU"),
    ([m(0, ids=(1, 1))], 1, "repeat"),
    ([m(0, server="")], 1, "server id"),
    ([m(0, server="x" * 65)], 1, "server id"),
    ([m(0, pod_ip="10.1.0.300")], 1, "pod IP"),
    ([Member(0, "n", (Device(0, "not-an-ip"),))], 1, "device IP"),
])
def test_refused(members, size, why) -> None:
    with pytest.raises(ValueError, match=why):
        ranktable.build(members, size)


def test_empty_job_is_initializing() -> None:
    t = ranktable.build([], 2)
    assert t.doc == {"status": "initializing", "version": "1.0", "server_count": "0", "server_list": []}
