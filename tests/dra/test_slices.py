"""ResourceSlice building: names, attributes, capacity, taints, chunking, generation, and what counts as a change."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from support import fakehost
from xpu_cdi.node import inventory as dp_devices
from xpu_cdi import driverversion
from xpu_cdi.dra import slices
from xpu_cdi.generate import profile as _profile


def info(name: str, **kw) -> slices.DeviceInfo:
    return slices.DeviceInfo(name=name, cdi=f"kunlunxin.com/xpu={name}", **kw)


class TestNames:
    @pytest.mark.parametrize("cdi, label", [("3", "3"), ("0000:3b:00.0", "0000-3b-00-0"), ("Card_A", "card-a")])
    def test_device_name_is_a_dns_label(self, cdi: str, label: str) -> None:
        assert slices.device_name(cdi) == label

    def test_unlabelable_name_is_hashed(self) -> None:
        name = slices.device_name("x" * 80)
        assert name.startswith("dev-") and len(name) <= 63

    def test_colliding_labels_get_suffixes(self) -> None:
        out = slices.by_name([info("a-b"), slices.DeviceInfo(name="a-b", cdi="k/x=a:b")])
        assert list(out) == ["a-b", "a-b-2"] and out["a-b-2"].cdi == "k/x=a:b"

    @pytest.mark.parametrize("text, want", [("5.0.21\n", "5.0.21"), ("Version=24.1.rc2", "24.1.0-rc2"),
                                            ("version:5.0.21.13", "5.0.21+13"), ("v2.3", "2.3.0"),
                                            ("no version", ""), ("07.01.002", "7.1.2")])
    def test_semver(self, text: str, want: str) -> None:
        assert driverversion.semver(text) == want


def generated(host: fakehost.FakeHost, host_root: Path, profile_name: str) -> tuple:
    """The fake host's spec written by ``xpu-cdi generate`` and read back: (profile, kinds)."""
    from click.testing import CliRunner
    from xpu_cdi.cli import main

    spec_dir = host_root / "cdi"
    res = CliRunner().invoke(main, ["generate", *host.cli_roots, "--spec-dir", str(spec_dir)])
    assert res.exit_code == 0, res.output
    profile = _profile.load_all()[profile_name]
    kinds, problems = dp_devices.load([str(spec_dir)], {profile.kind: profile.name}, str(host_root))
    assert not problems
    return profile, kinds


class TestDescribe:
    def test_fake_p800_host(self, host_root: Path) -> None:
        """Attributes read from the fake host's sysfs and driver files match what the host is built with."""
        host = fakehost.kunlunxin(host_root, cards=8)
        for n in range(2):
            (host_root / f"sys/devices/system/node/node{n}").mkdir(parents=True, exist_ok=True)
        profile, kinds = generated(host, host_root, "kunlunxin")
        version = driverversion.read_driver_version(profile, str(host_root), str(host_root))
        assert version == fakehost.XRE_VERSION
        infos = [slices.describe(c, profile, str(host_root), str(host_root), str(host_root), version)
                 for c in kinds["kunlunxin.com/xpu"].cards.values()]
        for i, d in enumerate(infos):
            attrs = slices.attributes(d)
            assert attrs["index"] == {"int": i} and attrs["model"] == {"string": "P800"}
            assert attrs["resource.kubernetes.io/pciBusID"] == {"string": host.pci[i]}
            assert attrs["pcieSwitch"] == {"string": host.switch[i]}
            assert attrs["numaNode"] == {"int": host.numa[i]} == attrs["resource.kubernetes.io/numaNode"]
            assert attrs["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:00" if i < 4 else "pci0000:80"}
            assert attrs["driverVersion"] == {"version": "5.0.21"}
            assert "uuid" not in attrs and "capacity" not in slices.device_entry(d, "kunlunxin.com")
            entry = slices.entries([d], "kunlunxin.com", {})[0]  # no vNPUs: nothing of theirs on a card
            assert entry["attributes"]["type"] == {"string": "chip"} and "template" not in entry["attributes"]

    def test_fake_910b_ax_server_interconnect(self, host_root: Path) -> None:
        """A 16-NPU 910B server: each NPU's hccsDomain (two of 8) and deviceIP (its hccn.conf line), and
        every device within the API's 32 attributes and capacities (carved kinds' keys counted)."""
        from xpu_cdi import interconnect

        host = fakehost.kunpeng_npu_server(host_root, 16)
        profile, kinds = generated(host, host_root, "ascend")
        cards = list(kinds["huawei.com/npu"].cards.values())
        links = interconnect.read(profile, [c.index for c in cards], str(host_root), str(host_root))
        infos = [slices.describe(c, profile, str(host_root), str(host_root), str(host_root), "24.1.0",
                                 links.cards[c.index]) for c in cards]
        for d in infos:
            attrs = slices.attributes(d)
            assert attrs["hccsDomain"] == {"int": d.index // 8}
            assert attrs["deviceIP"] == {"string": f"192.168.1.{10 + d.index}"}
            assert attrs["model"] == {"string": "Ascend910B"}
        entries = slices.entries(infos + [info("v", template="vir02", parent="0", memory="16Gi")],
                                 "huawei.com", {})
        assert all(len(e["attributes"]) + len(e.get("capacity", {})) <= slices.MAX_ATTRIBUTES for e in entries)

    def test_unknown_model_falls_back_to_the_profile_name(self, host_root: Path) -> None:
        fakehost.kunlunxin(host_root, cards=1)
        (host_root / "sys/bus/pci/devices/0000:03:00.0/device").write_text("0x9999\n")
        profile = _profile.load_all()["kunlunxin"]
        card = dp_devices.SpecCard("0", profile.kind, (), index=0, pci="0000:03:00.0")
        assert slices.describe(card, profile, str(host_root), str(host_root), str(host_root)).model == "kunlunxin"


class TestBuild:
    def test_one_pool_generation_and_owner(self) -> None:
        out = slices.build("kunlunxin.com", "n1", [info("0"), info("1")], {}, 7, node_uid="u-1")
        (s,) = out
        assert s["metadata"]["name"] == "n1-kunlunxin.com-0"
        assert s["metadata"]["ownerReferences"][0] == {"apiVersion": "v1", "kind": "Node", "name": "n1",
                                                       "uid": "u-1", "controller": True}
        assert s["spec"]["pool"] == {"name": "n1", "generation": 7, "resourceSliceCount": 1}
        assert s["spec"]["nodeName"] == "n1" and s["spec"]["driver"] == "kunlunxin.com"
        assert [d["name"] for d in s["spec"]["devices"]] == ["0", "1"]

    def test_at_most_128_per_slice_64_with_taints(self) -> None:
        devs = [info(str(i)) for i in range(300)]
        out = slices.build("k.com", "n", devs, {}, 1)
        assert [len(s["spec"]["devices"]) for s in out] == [128, 128, 44]
        assert {s["spec"]["pool"]["resourceSliceCount"] for s in out} == {3}
        tainted = slices.build("k.com", "n", devs, {"5": "gone"}, 1)
        assert [len(s["spec"]["devices"]) for s in tainted] == [64] * 4 + [44]

    def test_no_cards_is_one_empty_slice(self) -> None:
        (s,) = slices.build("k.com", "n", [], {}, 1)
        assert s["spec"]["devices"] == [] and s["spec"]["pool"]["resourceSliceCount"] == 1

    def test_unhealthy_card_carries_a_noschedule_taint(self) -> None:
        (s,) = slices.build("kunlunxin.com", "n", [info("0"), info("1")], {"1": "/dev/xpu1 is missing"}, 1)
        assert "taints" not in s["spec"]["devices"][0]
        assert s["spec"]["devices"][1]["taints"] == [{"key": "kunlunxin.com/unhealthy", "effect": "NoSchedule"}]

    def test_evicting_card_carries_a_noexecute_taint(self) -> None:
        (s,) = slices.build("kunlunxin.com", "n", [info("0"), info("1"), info("2")], {"1": "gone", "2": "gone"}, 1,
                            evicting={"2", "0"})  # a healthy card named evicting is not tainted
        assert [d.get("taints") for d in s["spec"]["devices"]] == [
            None, [{"key": "kunlunxin.com/unhealthy", "effect": "NoSchedule"}],
            [{"key": "kunlunxin.com/unhealthy", "effect": "NoExecute"}]]

    def test_time_added_kept_for_the_same_taint_only(self) -> None:
        devs = [info("0"), info("1")]
        have = {s["metadata"]["name"]: s for s in slices.build("k.com", "n", devs, {"0": "x", "1": "x"}, 1)}
        for dev in next(iter(have.values()))["spec"]["devices"]:
            dev["taints"][0]["timeAdded"] = f"2026-12-07T20:0{dev['name']}:00Z"
        want = slices.build("k.com", "n", devs, {"0": "x", "1": "x"}, 2, evicting={"1"})
        slices.keep_time_added(want, have)
        assert [d["taints"][0].get("timeAdded") for d in want[0]["spec"]["devices"]] == ["2026-12-07T20:00:00Z", None]

    def test_memory_capacity_where_known(self) -> None:
        entry = slices.device_entry(info("0", memory="96Gi"), "k.com")
        assert entry["capacity"] == {"memory": {"value": "96Gi"}}


class TestContent:
    def test_published_equals_built_despite_server_fields(self) -> None:
        devs = [info("0", index=0), info("1", index=1)]
        built = slices.build("k.com", "n", devs, {"1": "x"}, 3)
        back = copy.deepcopy(built)
        back[0]["spec"]["devices"][1]["taints"][0]["timeAdded"] = "2026-01-01T00:00:00Z"
        assert slices.published_content(back) == slices.content(devs, "k.com", {"1": "x"})

    def test_health_change_is_a_content_change(self) -> None:
        devs = [info("0")]
        assert slices.content(devs, "k.com", {}) != slices.content(devs, "k.com", {"0": "gone"})
        assert slices.content(devs, "k.com", {"0": "gone"}) != slices.content(devs, "k.com", {"0": "gone"}, {"0"})
