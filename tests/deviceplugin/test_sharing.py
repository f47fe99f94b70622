"""Time-slicing replicas (``sharing.timeSlicing``): the setting, the IDs, Allocate's mapping and the
preferred allocation, as plain data; then the daemon against the fake kubelet (both Python stacks)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, Iterator

import grpc
import pytest
import yaml
from click.testing import CliRunner

from support import kubeletkit
from support.dpnode import Node
from xpu_cdi.cli import main
from xpu_cdi.deviceplugin import allocation, config
from xpu_cdi.node import sharing
from xpu_cdi.node.inventory import SpecCard as Card
from xpu_cdi.errors import ConfigError
from xpu_cdi.exporter import holders
from xpu_cdi.node.podresources import Holder, Listing

XPU = "kunlunxin.com/xpu"


def setting(**ts: Any) -> Dict[str, Any]:
    return {"sharing": {"timeSlicing": {"resources": [{"name": XPU, "replicas": 4}], **ts}}}


def settings(data: Dict[str, Any], resource_names: Any = None) -> config.Settings:
    values = config.from_mapping(data, "config file 'dp.yaml'")
    if resource_names:
        values["resource_names"] = resource_names
    return replace(config.Settings(), **values)


class TestSetting:
    def test_defaults_keep_the_name(self) -> None:
        s = settings(setting())
        plan = s.replication(XPU)
        assert plan is not None and plan.replicas == 4 and not plan.fail_requests_greater_than_one
        assert s.resource(XPU) == XPU
        assert s.replication("huawei.com/npu") is None and s.resource("huawei.com/npu") == "huawei.com/npu"

    def test_rename_by_default_and_explicit_rename(self) -> None:
        assert settings(setting(renameByDefault=True)).resource(XPU) == XPU + ".shared"
        data = setting(renameByDefault=True)
        data["sharing"]["timeSlicing"]["resources"][0]["rename"] = "kunlunxin.com/xpu-ts"
        assert settings(data).resource(XPU) == "kunlunxin.com/xpu-ts"

    def test_names_the_resource_name_or_the_kind(self) -> None:
        """An entry may name the kind's --resource-name or the kind itself."""
        data = setting()
        data["sharing"]["timeSlicing"]["resources"][0]["name"] = "kunlunxin.com/p800"
        s = settings(data, {XPU: "kunlunxin.com/p800"})
        assert s.replication(XPU) is not None and s.resource(XPU) == "kunlunxin.com/p800"
        assert settings(setting(), {XPU: "kunlunxin.com/p800"}).replication(XPU) is not None

    @pytest.mark.parametrize("bad, says", [
        ({"timeSlicing": {"resources": [{"name": XPU, "replicas": 1}]}}, "replicas: 1 is less than the minimum of 2"),
        ({"timeSlicing": {"resources": [{"name": XPU, "replicas": "4"}]}}, "replicas: '4' is not of type 'integer'"),
        ({"timeSlicing": {"resources": []}}, "should be non-empty"),
        ({"timeSlicing": {"resources": [{"name": "gpu", "replicas": 2}]}}, "name: 'gpu' does not match"),
        ({"timeSlicing": {"resources": [{"name": XPU, "replicas": 2, "devices": [0]}]}}, "devices: 'all' was expected"),
        ({"timeSlicing": {"failRequestsGreaterThanOne": "yes", "resources": [{"name": XPU, "replicas": 2}]}},
         "failRequestsGreaterThanOne: 'yes' is not of type 'boolean'"),
        ({"mps": {}}, "'mps' was unexpected"),
        ({"timeSlicing": {"resources": [{"name": XPU, "replicas": 2}, {"name": XPU, "replicas": 3}]}},
         "names 'kunlunxin.com/xpu' twice"),
    ])
    def test_bad_value_is_one_line(self, bad: Any, says: str) -> None:
        with pytest.raises(ConfigError) as err:
            config.from_mapping({"sharing": bad}, "config file 'dp.yaml'")
        msg = str(err.value)
        assert msg.startswith("config file 'dp.yaml': sharing: ") and says in msg and "\n" not in msg, msg


CARDS = {str(i): Card(str(i), XPU, ()) for i in range(3)}


class TestIds:
    def test_replica_ids_and_split(self) -> None:
        assert sharing.replica_ids(["0", "1"], 2) == ["0::0", "0::1", "1::0", "1::1"]
        assert sharing.split("0000:3b:00.0::3") == ("0000:3b:00.0", 3)
        assert sharing.split("0000:3b:00.0") == ("0000:3b:00.0", None)
        assert sharing.split("::3") == ("::3", None)

    def test_allocate_maps_replicas_to_cards_once(self) -> None:
        plan = sharing.Replicated(XPU, 4)
        assert allocation.shared_cards(plan, XPU, ["1::0", "1::3", "2::1"], CARDS) == ["1", "2"]
        assert allocation.shared_cards(None, XPU, ["1", "2"], CARDS) == ["1", "2"]

    def test_a_replica_past_the_count_stays_unknown(self) -> None:
        ids = allocation.shared_cards(sharing.Replicated(XPU, 4), XPU, ["1::4", "7::0"], CARDS)
        assert ids == ["1::4", "7::0"]
        with pytest.raises(allocation.AllocationError, match=r"unknown device ID\(s\) '1::4', '7::0'"):
            allocation.check(XPU, CARDS, {}, ids)

    def test_fail_requests_greater_than_one(self) -> None:
        plan = sharing.Replicated(XPU, 4, None, True)
        assert allocation.shared_cards(plan, XPU, ["2::1"], CARDS) == ["2"]
        with pytest.raises(allocation.AllocationError) as err:
            allocation.shared_cards(plan, XPU, ["0::0", "1::0"], CARDS)
        assert f"request for '{XPU}: 2' too large" in str(err.value)


class TestPreferred:
    def test_spreads_across_cards(self) -> None:
        avail = sharing.replica_ids(CARDS, 4)
        got = sharing.preferred(4, avail, [], 3)
        assert sorted(sharing.card_of(g) for g in got) == ["0", "1", "2"]
        six = sharing.preferred(4, avail, [], 6)
        assert Counter(sharing.card_of(g) for g in six) == {"0": 2, "1": 2, "2": 2}

    def test_least_shared_first(self) -> None:
        """Card 0 has 3 replicas taken, card 1 one, card 2 none: the next picks go 2, then 1/2."""
        avail = ["0::3", "1::1", "1::2", "1::3"] + sharing.replica_ids(["2"], 4)
        assert sharing.card_of(sharing.preferred(4, avail, [], 1)[0]) == "2"
        got = [sharing.card_of(g) for g in sharing.preferred(4, avail, [], 3)]
        assert Counter(got) == {"2": 2, "1": 1}

    def test_must_include_and_impossible_sizes(self) -> None:
        avail = sharing.replica_ids(CARDS, 2)
        got = sharing.preferred(2, avail, ["0::1"], 2)
        assert got[0] == "0::1" and sharing.card_of(got[1]) != "0"
        assert sharing.preferred(2, avail, [], 7) == [] and sharing.preferred(2, avail, [], 0) == []


def test_exporter_labels_a_replica_with_its_card() -> None:
    """kubelet lists replica IDs; the holder is the card's."""
    a, b = Holder("default", "a", "c"), Holder("default", "b", "c")
    listing = Listing(devices=[(a, XPU + ".shared", ["1::0"]), (b, XPU + ".shared", ["1::2"])],
                      allocatable=[(XPU + ".shared", sharing.replica_ids(CARDS, 4))], cdi_devices=[])
    got = holders.assign({XPU: CARDS}, {}, listing)
    assert got == {(XPU, "1"): a}


@pytest.mark.privileged
def test_cli_refuses_a_bad_setting_in_one_line(node: Node, tmp_path: Path) -> None:
    """`xpu-cdi device-plugin --config` with replicas 0: exit non-zero, one line naming the file and the key."""
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml.safe_dump({"sharing": {"timeSlicing": {"resources": [{"name": XPU, "replicas": 0}]}}}))
    res = CliRunner().invoke(main, ["device-plugin", *node.args("--config", str(cfg))])
    lines = res.output.strip().splitlines()
    assert res.exit_code != 0 and len(lines) == 1, res.output
    assert f"config file {str(cfg)!r}: sharing: at timeSlicing.resources[0].replicas: 0 is less than the " \
           "minimum of 2" in lines[0], res.output


# -- the daemon against the fake kubelet ----------------------------------------------------------------------

@pytest.fixture
def shared(node: Node, stack: str, tmp_path: Path) -> Iterator[kubeletkit.FakeKubelet]:
    """The plugin with 4 replicas per card, renamed by default, refusing requests over 1."""
    cfg = tmp_path / "dp.yaml"
    cfg.write_text(yaml.safe_dump(setting(renameByDefault=True, failRequestsGreaterThanOne=True)))
    k = kubeletkit.FakeKubelet(node.plugin_dir)
    p = kubeletkit.PluginProcess(stack, node.args("--config", str(cfg)), tmp_path / "p.log")
    try:
        yield k
    finally:
        p.stop()
        k.stop()
        print(f"the plugin's log:\n{p.text()}")


def status_of(node: Node) -> Any:
    """The kind's entry in the plugin's status file, once written."""
    return node.status_kinds().get(XPU)


@pytest.mark.privileged
def test_replicas_through_the_kubelet_api(node: Node, shared: kubeletkit.FakeKubelet) -> None:
    """Registered as <kind>.shared; 32 replica IDs for 8 cards, each with its card's NUMA node; Allocate of
    one replica names its card; two replicas in one container are refused with the plugin's line."""
    k = shared
    assert k.wait_registered().resource_name == XPU + ".shared"
    devs = k.wait_for(lambda: k.latest(), message="a device list")
    assert sorted(devs) == sorted(sharing.replica_ids([str(i) for i in range(8)], 4))
    assert all(devs[f"{i}::{n}"] == devs[f"{i}::0"] for i in range(8) for n in range(4))
    c = k.allocate(["5::2"]).container_responses[0]
    assert [d.name for d in c.cdi_devices] == [f"{XPU}=5"]
    with pytest.raises(grpc.RpcError) as err:
        k.allocate(["5::2", "5::3"])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"request for '{XPU}.shared: 2' too large" in err.value.details()
    entry = k.wait_for(lambda: status_of(node), message="the status file naming the kind")
    assert entry["replicas"] == 4 and entry["devices"] == [str(i) for i in range(8)], entry
    pb2 = k.pb2
    req = pb2.PreferredAllocationRequest(container_requests=[pb2.ContainerPreferredAllocationRequest(
        available_deviceIDs=sorted(devs), allocation_size=8)])
    ids = list(k.plugin().GetPreferredAllocation(req, timeout=kubeletkit.HANG).container_responses[0].deviceIDs)
    assert sorted(sharing.card_of(i) for i in ids) == [str(i) for i in range(8)]
