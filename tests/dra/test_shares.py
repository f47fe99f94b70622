"""Capacity-shared cards (DRA consumable capacity): the --share-capacity policy against the API
server's rules, the slice's device entry, claims with shareIDs, and the driver through kubelet's
stubs: several claims on one card, each its own claim-scoped spec telling its share, removed on
unprepare, kept across a restart, rebuilt after a reboot, orphans removed at start."""

from __future__ import annotations

import json
import os
import uuid

import grpc
import pytest

from xpu_cdi.cdi import registry, validate
from xpu_cdi.dra import claims, shares, slices
from xpu_cdi.node import checkpoint, claimspec
from xpu_cdi.node.prepared import PreparedClaim, PreparedClaims, PreparedDevice
from xpu_cdi.errors import ClaimError, ConfigError

from test_driver import DRIVER, Kubelet, started

GI = 1 << 30
POLICY = "kunlunxin.com/xpu:default=32Gi,step=32Gi,memory=96Gi"
CLAIM_KIND = claimspec.kind(DRIVER)


def share(device: str, memory: str = "32Gi", request: str = "xpu", share_id: str = "") -> dict:
    return {"request": request, "driver": DRIVER, "pool": "n1", "device": device,
            "shareID": share_id or str(uuid.uuid4()), "consumedCapacity": {"memory": memory}}


class TestPolicy:
    @pytest.mark.parametrize("text, value", [("32Gi", 32 * GI), ("1500M", 1500 * 10**6), ("7", 7), ("2k", 2000)])
    def test_quantities(self, text: str, value: int) -> None:
        assert shares.parse_quantity(text) == value

    @pytest.mark.parametrize("text", ["1.5Gi", "1e3", "-1", "32GB", ""])
    def test_refused_quantities(self, text: str) -> None:
        with pytest.raises(ValueError):
            shares.parse_quantity(text)

    @pytest.mark.parametrize("value, text", [(32 * GI, "32Gi"), (1536 << 20, "1536Mi"), (1500, "1500"),
                                             (96 * GI, "96Gi"), (1 << 40, "1Ti"), (0, "0")])
    def test_formatted_as_the_api_server_writes_back(self, value: int, text: str) -> None:
        assert shares.format_quantity(value) == text

    def test_parse(self) -> None:
        got = shares.parse([POLICY])
        assert got == {"kunlunxin.com/xpu": shares.Policy(default=32 * GI, step=32 * GI, memory=96 * GI)}

    @pytest.mark.parametrize("value, says", [
        ("kunlunxin.com/xpu", "write KIND:default"), ("xpu:default=1Gi", "write KIND:default"),
        ("kunlunxin.com/xpu:step=1Gi", "default is required"), ("kunlunxin.com/xpu:default=1Gi,cores=2", "'cores=2'"),
        ("kunlunxin.com/xpu:default=1.5Gi", "not a whole quantity"), ("kunlunxin.com/xpu:default=0", "more than 0"),
        ("kunlunxin.com/xpu:default=1Gi,default=2Gi", "given once")])
    def test_parse_refuses_in_one_line(self, value: str, says: str) -> None:
        with pytest.raises(ConfigError) as err:
            shares.parse([value])
        assert says in str(err.value) and "\n" not in str(err.value)

    @pytest.mark.parametrize("policy, why", [
        (shares.Policy(default=32 * GI, step=32 * GI), ""),
        (shares.Policy(default=8 * GI), ""),
        (shares.Policy(default=200 * GI), "not within"),
        (shares.Policy(default=40 * GI, step=32 * GI), "min + n*step"),
        (shares.Policy(default=8 * GI, min=16 * GI), "outside min..max"),
        (shares.Policy(default=8 * GI, min=4 * GI, max=200 * GI), "min <= max"),
        (shares.Policy(default=64 * GI, step=64 * GI), "min + step within")])
    def test_problems_are_the_api_servers(self, policy: shares.Policy, why: str) -> None:
        got = policy.problem(96 * GI)
        assert (why in got) if why else got == ""

    def test_capacity_entry(self) -> None:
        assert shares.Policy(default=32 * GI, step=32 * GI).capacity(96 * GI) == {
            "value": "96Gi", "requestPolicy": {"default": "32Gi", "validRange": {"min": "32Gi", "step": "32Gi"}}}
        assert shares.Policy(default=GI, min=GI, max=8 * GI).capacity(96 * GI)["requestPolicy"] == {
            "default": "1Gi", "validRange": {"min": "1Gi", "max": "8Gi"}}
        assert shares.Policy(default=GI).capacity(4 * GI) == {"value": "4Gi", "requestPolicy": {"default": "1Gi"}}

    def test_env_names_the_card(self) -> None:
        assert shares.env("a-b.c", 5, 9) == ["XPU_CDI_MEMORY_LIMIT_A_B_C=5", "XPU_CDI_MEMORY_TOTAL_A_B_C=9"]


def shared_info(name: str) -> slices.DeviceInfo:
    return slices.DeviceInfo(name=name, cdi=f"kunlunxin.com/xpu={name}", memory="96Gi",
                             share=shares.Policy(default=32 * GI, step=32 * GI))


def test_slice_entry_of_a_shared_card() -> None:
    entry = slices.device_entry(shared_info("0"), DRIVER)
    assert entry["allowMultipleAllocations"] is True and entry["attributes"]["type"] == {"string": "share"}
    assert entry["capacity"] == {"memory": shares.Policy(default=32 * GI, step=32 * GI).capacity(96 * GI)}
    # what the API server gives back compares equal: nothing to republish
    assert slices.content([shared_info("0")], DRIVER, {}) == slices.published_content(
        [{"metadata": {"name": "n1-kunlunxin.com-0"}, "spec": {"devices": [json.loads(json.dumps(entry))]}}])


def claim_of(uid: str, results: list) -> dict:
    return {"metadata": {"uid": uid, "namespace": "ns", "name": uid},
            "status": {"allocation": {"devices": {"results": results}}}}


class TestClaims:
    devices = {"0": shared_info("0"), "1": slices.DeviceInfo(name="1", cdi="kunlunxin.com/xpu=1")}

    def test_shares_of_one_card_are_not_holds(self) -> None:
        r = share("0", share_id="11111111-2222-3333-4444-555555555555")
        got = claims.prepare(claim_of("u2", [r]), DRIVER, "n1", self.devices, {})
        assert got == [PreparedDevice(["xpu"], "n1", "0", ["kunlunxin.com/xpu=0"], r["shareID"], 32 * GI, 96 * GI)]
        cp = PreparedClaims("b", {"u2": PreparedClaim("ns", "u2", got)})
        assert cp.devices_in_use() == {}
        claims.prepare(claim_of("u3", [share("0")]), DRIVER, "n1", self.devices, cp.devices_in_use("u3"))

    def test_a_card_held_whole_is_not_shared(self) -> None:
        with pytest.raises(ClaimError, match="prepared for claim u1"):
            claims.prepare(claim_of("u2", [share("0")]), DRIVER, "n1", self.devices, {("n1", "0"): "u1"})

    def test_a_share_of_a_card_no_longer_shared_is_refused(self) -> None:
        with pytest.raises(ClaimError, match="no longer shares"):
            claims.prepare(claim_of("u2", [share("1")]), DRIVER, "n1", self.devices, {})

    def test_a_share_without_consumed_capacity_is_refused(self) -> None:
        r = share("0")
        del r["consumedCapacity"]
        with pytest.raises(ClaimError, match="consumedCapacity"):
            claims.prepare(claim_of("u2", [r]), DRIVER, "n1", self.devices, {})


def claim_specs(node) -> dict:
    return claimspec.listed(str(node.spec_dir), DRIVER)


def env_of(node, uid: str) -> list:
    with open(claim_specs(node)[uid]) as f:
        spec = json.load(f)
    assert validate.problems(spec) == []
    return [e for d in spec["devices"] for e in d["containerEdits"]["env"]]


def test_three_shares_on_one_card_each_its_spec(dra_node, kube) -> None:
    d = started(dra_node, kube, shares=shares.parse([POLICY]))
    (s,) = kube.slices.values()
    assert all(x["allowMultipleAllocations"] for x in s["spec"]["devices"])
    uids = [str(uuid.uuid4()) for _ in range(3)]
    for n, uid in enumerate(uids):
        kube.add_claim("ns", f"c{n}", uid, [share("0")])
    try:
        k = Kubelet(grpc, dra_node.settings.registry_dir)
        got = k.prepare(*[("ns", f"c{n}", uid) for n, uid in enumerate(uids)])
        for n, uid in enumerate(uids):
            (dev,) = got.claims[uid].devices
            assert got.claims[uid].error == "" and dev.device_name == "0"
            assert dev.share_id == kube.claims[("ns", f"c{n}")]["status"]["allocation"]["devices"]["results"][0][
                "shareID"]
            static, own = dev.cdi_device_ids
            assert static == "kunlunxin.com/xpu=0" and own.startswith(f"{CLAIM_KIND}={uid}-0-")
            assert env_of(dra_node, uid) == [f"XPU_CDI_MEMORY_LIMIT_0={32 * GI}", f"XPU_CDI_MEMORY_TOTAL_0={96 * GI}"]
        reg = registry.load([str(dra_node.spec_dir)])
        assert not reg.problems and sum(dev.kind == CLAIM_KIND for dev in reg.devices.values()) == 3
        assert sorted(d.drivers["kunlunxin.com/xpu"].devices) == ["0", "1", "2", "3"]  # no claim device is a card
        k.unprepare(("ns", "c0", uids[0]))
        assert sorted(claim_specs(dra_node)) == sorted(uids[1:])
    finally:
        d.close()
    d = started(dra_node, kube, shares=shares.parse([POLICY]))  # a restart keeps the shares and their specs
    try:
        cp = json.loads(open(checkpoint.path_in(os.path.join(dra_node.settings.plugins_dir, DRIVER))).read())
        assert sorted(cp["claims"]) == sorted(uids[1:])
        assert {dev["memory"] for c in cp["claims"].values() for dev in c["devices"]} == {32 * GI}
        assert sorted(claim_specs(dra_node)) == sorted(uids[1:])
        k = Kubelet(grpc, dra_node.settings.registry_dir)
        k.unprepare(*[("ns", f"c{n}", uid) for n, uid in enumerate(uids)])
        assert claim_specs(dra_node) == {}
    finally:
        d.close()


def test_orphan_spec_removed_and_reboot_rebuilds_shares(dra_node, kube) -> None:
    orphan = str(uuid.uuid4())
    claimspec.write(str(dra_node.spec_dir), DRIVER, orphan, [("0-x", {"env": ["A=1"]})], {})
    d = started(dra_node, kube, shares=shares.parse([POLICY]))
    kept = str(uuid.uuid4())
    kube.add_claim("ns", "kept", kept, [share("2", memory="64Gi")])
    try:
        assert claim_specs(dra_node) == {}
        assert any(f"{orphan}.json names no prepared claim: removed" in line for line in dra_node.logs)
        assert Kubelet(grpc, dra_node.settings.registry_dir).prepare(("ns", "kept", kept)).claims[kept].error == ""
    finally:
        d.close()
    os.unlink(claim_specs(dra_node)[kept])  # a reboot empties /var/run/cdi
    dra_node.boot.write_text("boot-2\n")
    d = started(dra_node, kube, shares=shares.parse([POLICY]))
    try:
        assert env_of(dra_node, kept)[0] == f"XPU_CDI_MEMORY_LIMIT_2={64 * GI}"
        cp = json.loads(open(checkpoint.path_in(os.path.join(dra_node.settings.plugins_dir, DRIVER))).read())
        (dev,) = cp["claims"][kept]["devices"]
        assert dev["memory"] == 64 * GI and dev["cdi"][1].startswith(f"{CLAIM_KIND}={kept}-2-")
    finally:
        d.close()


def test_a_card_of_unknown_memory_is_published_whole(dra_node, kube) -> None:
    d = started(dra_node, kube, shares=shares.parse(["kunlunxin.com/xpu:default=32Gi"]))
    try:
        (s,) = kube.slices.values()
        assert not any(x.get("allowMultipleAllocations") for x in s["spec"]["devices"])
        assert sum("not shared by capacity (first 0): its memory is unknown" in line for line in dra_node.logs) == 1
    finally:
        d.close()


def test_two_shares_of_one_card_in_a_claim_told_their_sum(dra_node, kube) -> None:
    """Two requests of one claim on card 1 (32Gi + 64Gi): one XPU_CDI_MEMORY_LIMIT_1, the sum, in both
    share devices, so the container never gets the variable twice with two values."""
    d = started(dra_node, kube, shares=shares.parse([POLICY]))
    uid = str(uuid.uuid4())
    kube.add_claim("ns", "two", uid, [share("1", request="a"), share("1", memory="64Gi", request="b")])
    try:
        got = Kubelet(grpc, dra_node.settings.registry_dir).prepare(("ns", "two", uid)).claims[uid]
        assert got.error == "" and len(got.devices) == 2
        assert env_of(dra_node, uid) == [f"XPU_CDI_MEMORY_LIMIT_1={96 * GI}", f"XPU_CDI_MEMORY_TOTAL_1={96 * GI}"] * 2
    finally:
        d.close()
