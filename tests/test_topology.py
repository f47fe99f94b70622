"""Topology: sysfs PCIe placement, preferred allocation, labels, annotations, the CLI."""

from __future__ import annotations

import itertools
import json
import random
import re
from pathlib import Path
from typing import Any, Dict, List

import pytest
from click.testing import CliRunner

from support import fakehost
from xpu_cdi import topology
from xpu_cdi.topology import allocate
from xpu_cdi.cdi import validate
from xpu_cdi.cli import main
from xpu_cdi.errors import SelectionError
from xpu_cdi.generate import profile
from xpu_cdi.generate.discover import Roots, discover

pytestmark = pytest.mark.privileged
# Kubernetes qualified names (label and annotation keys): optional DNS-subdomain prefix, then a name
KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                 r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def read(host: fakehost.FakeHost, name: str = "kunlunxin") -> List[topology.TopoCard]:
    r = str(host.root)
    view = discover(profile.load_all([])[name], Roots(r, r, r))
    return topology.cards(view, r)


def cost(topo: List[Any], names: List[str]) -> int:
    by = {c.name: c for c in topo}
    return sum(allocate.distance(by[a], by[b]) for a, b in itertools.combinations(names, 2))


def config_space(port_type: int, with_pm: bool = True) -> bytes:
    """256 bytes of PCI config space with a capability list ending in a PCIe capability."""
    cfg = bytearray(256)
    cfg[0x06] = 0x10  # status: capabilities list
    cfg[0x34] = 0x40
    if with_pm:
        cfg[0x40:0x42] = bytes([0x01, 0x50])  # power management, next at 0x50
    pcie = 0x50 if with_pm else 0x40
    cfg[pcie:pcie + 4] = bytes([0x10, 0x00, (port_type << 4) | 0x2, 0x00])
    return bytes(cfg)


class TestRead:
    def test_eight_card_server(self, xpu_host: fakehost.FakeHost) -> None:
        """Each card gets its PCI address, NUMA node, switch upstream port and root port."""
        topo = read(xpu_host)
        assert [c.name for c in topo] == [str(i) for i in range(8)]
        for c in topo:
            assert (c.pci, c.numa_node, c.switch, c.root_port) == (
                xpu_host.pci[c.index], xpu_host.numa[c.index], xpu_host.switch[c.index], xpu_host.root_port[c.index])
            assert c.path == f"/dev/xpu{c.index}" and c.kind == "kunlunxin.com/xpu"

    def test_groups_by_switch(self, xpu_host: fakehost.FakeHost) -> None:
        """Two switches of four: two groups, in index order."""
        assert [[c.name for c in g] for g in topology.groups(read(xpu_host))] == [["0", "1", "2", "3"],
                                                                                  ["4", "5", "6", "7"]]

    def test_ascend_placement_is_unknown_not_guessed(self, npu_host: fakehost.FakeHost) -> None:
        """The Ascend driver registers davinciN without a parent: no PCI address, NUMA node or switch is
        invented (the NPUs' PCI functions are in sysfs, but nothing says which node is which), and the
        reason names the documented source."""
        topo = read(npu_host, "ascend")
        assert [(c.pci, c.numa_node, c.switch) for c in topo] == [(None, None, None)] * 4
        assert all("dcmi_get_device_pcie_info_v2" in c.unknown for c in topo)
        assert topo[0].to_dict()["topology"] == "unknown"

    def test_cards_on_root_ports_have_no_switch(self, host_root: Path) -> None:
        """Ascend cards straight on root ports (a driver that did register a parent): switch null,
        one group each."""
        npu_host = fakehost.ascend(host_root, 4, parent=True)
        topo = read(npu_host, "ascend")
        assert [c.switch for c in topo] == [None] * 4
        assert [c.root_port for c in topo] == [npu_host.root_port[i] for i in range(4)]
        assert len(topology.groups(topo)) == 4

    def test_port_type_from_config_space(self, tmp_path: Path) -> None:
        """The PCIe capability is found by walking the capability list."""
        f = tmp_path / "sys/bus/pci/devices/0000:01:00.0/config"
        fakehost.write(f, "")
        f.write_bytes(config_space(topology.UPSTREAM_PORT))
        assert topology.port_type(str(tmp_path), "0000:01:00.0") == topology.UPSTREAM_PORT
        f.write_bytes(config_space(topology.DOWNSTREAM_PORT, with_pm=False))
        assert topology.port_type(str(tmp_path), "0000:01:00.0") == topology.DOWNSTREAM_PORT
        f.write_bytes(bytes(64))  # no capability list (what non-root readers see beyond 64 bytes)
        assert topology.port_type(str(tmp_path), "0000:01:00.0") is None

    def test_config_space_beats_the_shape(self, host_root: Path) -> None:
        """A card with its own PCIe-to-PCI bridge behind a switch: port types find the real upstream port."""
        host = fakehost.kunlunxin(host_root, cards=1, sysfs=False)
        chain = ["pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"]
        card_dir = fakehost._pci_device(host_root, chain, "0x1d22", "0x3684", 0)
        fakehost._class_dev(host_root, card_dir, "xpu", "xpu0", fakehost.XPU_MAJOR, 0)
        bridges = {"0000:01:00.0": topology.UPSTREAM_PORT, "0000:02:00.0": topology.DOWNSTREAM_PORT,
                   "0000:03:00.0": 0x7}  # 0x7: PCIe-to-PCI bridge
        assert read(host)[0].switch == "0000:03:00.0"  # the shape alone guesses wrong here
        for addr, kind in bridges.items():
            (host_root / f"sys/bus/pci/devices/{addr}/config").write_bytes(config_space(kind))
        topo = read(host)
        assert topo[0].switch == "0000:01:00.0" and topo[0].root_port == "0000:00:01.0"

    def test_link_attributes(self, host_root: Path) -> None:
        """Link speed and width are read; a narrower link than the maximum is 'degraded'."""
        host = fakehost.xpu_layout(host_root, [(0, 0, 0), (0, 0, 0)])
        fakehost.set_link(host, 1, width=4)
        topo = read(host)
        assert dict(topo[0].link)["current_link_width"] == "16" and topology.degraded(topo[0]) is None
        assert topology.degraded(topo[1]) == "x4 of x16"


class TestPreferred:
    def test_whole_switch_when_free(self, xpu_host: fakehost.FakeHost) -> None:
        """4 cards with everything free: the first switch, all four."""
        assert topology.preferred(read(xpu_host), None, 4) == ["0", "1", "2", "3"]

    def test_the_switch_that_is_whole(self, xpu_host: fakehost.FakeHost) -> None:
        """Card 3 busy: the four under the other switch."""
        assert topology.preferred(read(xpu_host), ["0", "1", "2", "4", "5", "6", "7"], 4) == ["4", "5", "6", "7"]

    def test_least_crossing_otherwise(self, xpu_host: fakehost.FakeHost) -> None:
        """No switch has 4 free: three from one switch and one from the other (fewest crossings)."""
        topo = read(xpu_host)
        avail = ["0", "1", "2", "4", "5", "6"]
        got = topology.preferred(topo, avail, 4)
        best = min(cost(topo, list(s)) for s in itertools.combinations(avail, 4))
        assert cost(topo, got) == best and got == ["0", "1", "2", "4"]

    def test_small_jobs_keep_whole_switches(self, xpu_host: fakehost.FakeHost) -> None:
        """2 cards with one switch partly used: taken from it, so the whole switch stays free."""
        topo = read(xpu_host)
        assert topology.preferred(topo, ["0", "1", "2", "3", "5", "6"], 2) == ["5", "6"]
        assert topology.preferred(topo, ["0", "1", "2", "4", "5", "6", "7"], 3) == ["0", "1", "2"]

    def test_json_dicts_work_too(self, xpu_host: fakehost.FakeHost) -> None:
        """A plugin feeding back `topology --json` gets the same answer."""
        dicts = [c.to_dict() for c in read(xpu_host)]
        assert topology.preferred(dicts, ["1", "2", "3", "4", "5", "6", "7"], 4) == ["4", "5", "6", "7"]

    def test_bad_requests(self, xpu_host: fakehost.FakeHost) -> None:
        """Too many cards, or an unknown name, is a SelectionError naming the problem."""
        topo = read(xpu_host)
        with pytest.raises(SelectionError, match="cannot choose 3 card"):
            topology.preferred(topo, ["0", "1"], 3)
        with pytest.raises(SelectionError, match="'9'"):
            topology.preferred(topo, ["0", "9"], 1)

    def test_numa_node_before_crossing(self, host_root: Path) -> None:
        """16 cards, two switches per NUMA node: 8 cards come from one NUMA node."""
        layout = [(n, 0, s) for n in (0, 1) for s in (0, 1) for _ in range(4)]
        topo = read(fakehost.xpu_layout(host_root, layout))
        assert topology.preferred(topo, None, 8) == [str(i) for i in range(8)]
        avail = [str(i) for i in range(16) if i not in (0, 9)]
        # 6 from NUMA node 0 (3 + 4 free): 2 + 4 crosses fewer pairs (8) than 3 + 3 (9)
        assert topology.preferred(topo, avail, 6) == ["1", "2", "4", "5", "6", "7"]

    @pytest.mark.parametrize("exact", [True, False])
    def test_random_loads_stay_in_one_switch_when_possible(self, host_root: Path, exact: bool,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
        """Exact search and the greedy fill both keep a job in one switch whenever one has room."""
        if not exact:
            monkeypatch.setattr(allocate, "EXACT_LIMIT", 0)
        layout = [(n, 0, s) for n in (0, 1) for s in (0, 1) for _ in range(4)]
        topo = read(fakehost.xpu_layout(host_root, layout))
        rng = random.Random(6)
        for _ in range(60):
            avail = sorted(rng.sample([c.name for c in topo], rng.randint(2, 16)), key=int)
            size = rng.randint(1, min(4, len(avail)))
            got = topology.preferred(topo, avail, size)
            assert got == topology.preferred(topo, list(reversed(avail)), size)  # deterministic
            switches = {c.switch: sum(1 for a in avail if topo[int(a)].switch == c.switch) for c in topo}
            if max(switches.values()) >= size:
                assert len({topo[int(n)].switch for n in got}) == 1, (avail, size, got)


class TestLabels:
    def test_eight_card_labels(self, xpu_host: fakehost.FakeHost) -> None:
        """The labels of the 8-card server, all valid keys and values."""
        labels, notes = topology.labels(read(xpu_host))
        assert labels == {"xpu-cdi.io/xpu.count": "8", "xpu-cdi.io/xpu.numa-nodes": "2",
                          "xpu-cdi.io/xpu.switches": "2", "xpu-cdi.io/xpu.max-switch-group": "4",
                          "xpu-cdi.io/xpu.switch-groups": "0-3_4-7"} and notes == []
        for key, value in labels.items():
            assert KEY.match(key) and topology.label_value_problem(value) == ""

    def test_compress(self) -> None:
        """Runs become a-b; singles stay; items join with dots."""
        assert topology.compress(["0", "1", "2", "5", "7", "8"]) == "0-2.5.7-8"

    def test_long_value_left_out_with_a_note(self) -> None:
        """A switch-groups value over 63 characters is dropped, with a note, never emitted invalid."""
        topo = [topology.TopoCard(name=str(i), kind="a.com/xpu", index=i, path=f"/dev/xpu{i}",
                                  pci=f"0000:{i:02x}:00.0") for i in range(0, 80, 2)]
        labels, notes = topology.labels(topo)
        assert "xpu-cdi.io/xpu.switch-groups" not in labels and "longer than 63" in notes[0]
        assert all(topology.label_value_problem(v) == "" for v in labels.values())


class TestWithTopology:
    @pytest.mark.parametrize("strategies", [["index"], ["index", "pci"]])
    def test_generate_annotates_devices(self, xpu_host: fakehost.FakeHost, runner: CliRunner,
                                        strategies: List[str]) -> None:
        """generate --with-topology: 0.6.0, valid, each card name annotated with its placement."""
        args = ["generate", *xpu_host.cli_roots, "--with-topology", "-o", "-", "--hook-path", "/usr/bin/h"]
        for s in strategies:
            args += ["--device-name-strategy", s]
        res = runner.invoke(main, args)
        assert res.exit_code == 0, res.output
        spec = json.loads(res.stdout)
        assert spec["cdiVersion"] == "0.6.0" and validate.problems(spec) == []
        devices: Dict[str, Any] = {d["name"]: d for d in spec["devices"]}
        assert "annotations" not in devices["all"]
        for i in range(8):
            want = {"xpu-cdi.io/pci": xpu_host.pci[i], "xpu-cdi.io/numa-node": str(xpu_host.numa[i]),
                    "xpu-cdi.io/switch": xpu_host.switch[i], "xpu-cdi.io/root-port": xpu_host.root_port[i]}
            names = [str(i)] + ([xpu_host.pci[i]] if "pci" in strategies else [])
            for name in names:
                assert devices[name]["annotations"] == want
                assert all(KEY.match(k) for k in want)

    def test_help_says_0_6_0(self, runner: CliRunner) -> None:
        """The option's help warns that it raises cdiVersion to 0.6.0."""
        out = " ".join(runner.invoke(main, ["generate", "--help"]).output.split())
        assert "--with-topology" in out and "0.6.0" in out.split("--with-topology", 1)[1].split("--", 1)[0]


class TestCommand:
    def test_human_output_grouped(self, xpu_host: fakehost.FakeHost, runner: CliRunner) -> None:
        """Text: kind line, then NUMA node, then switch with its cards."""
        out = runner.invoke(main, ["topology", *xpu_host.cli_roots]).output.splitlines()
        assert out[0] == "kunlunxin.com/xpu: 8 card(s), 2 NUMA node(s), 2 PCIe switch(es)"
        assert out[1] == "  NUMA node 0"
        assert out[2] == "    switch 0000:01:00.0 (root port 0000:00:01.0): card(s) 0-3"
        assert "    switch 0000:81:00.0 (root port 0000:80:01.0): card(s) 4-7" in out

    def test_json_shape(self, npu_host: fakehost.FakeHost, runner: CliRunner) -> None:
        """--json: a list of cards with at least name, path, pci, numa_node, switch."""
        cards = json.loads(runner.invoke(main, ["topology", *npu_host.cli_roots, "--json"]).stdout)
        assert [c["name"] for c in cards] == ["0", "1", "2", "3"]
        for c in cards:
            assert {"name", "path", "pci", "numa_node", "switch"} <= set(c)
            assert c["switch"] is None and c["path"].startswith("/dev/davinci")
            assert (c["pci"], c["numa_node"], c["topology"]) == (None, None, "unknown")

    def test_ascend_human_output_says_unknown(self, npu_host: fakehost.FakeHost, runner: CliRunner) -> None:
        """The human form names the kind, its cards and why the topology is unknown: no invented groups."""
        res = runner.invoke(main, ["topology", *npu_host.cli_roots])
        assert res.exit_code == 0
        assert res.stdout.startswith("huawei.com/npu: 4 card(s), topology unknown: the Ascend driver registers")
        assert "switch" not in res.stdout

    def test_ascend_labels_claim_no_topology(self, npu_host: fakehost.FakeHost, runner: CliRunner) -> None:
        """--labels for cards sysfs cannot place: the count and topology=unknown, no NUMA or switch guess."""
        res = runner.invoke(main, ["topology", *npu_host.cli_roots, "--labels"])
        assert res.exit_code == 0
        assert res.stdout.splitlines() == ["xpu-cdi.io/npu.count=4", "xpu-cdi.io/npu.topology=unknown"]

    def test_a_failing_profile_is_skipped_with_status_4(self, host_root: Path, runner: CliRunner) -> None:
        """Kunlunxin cards plus a half-loaded Ascend: the Kunlunxin topology is printed, the Ascend failure is
        one line on stderr, the exit status says a profile failed."""
        host = fakehost.kunlunxin(host_root, cards=2)
        fakehost.ascend(host_root, cards=1, manager=False)
        res = runner.invoke(main, ["topology", *host.cli_roots])
        assert res.exit_code == 4 and res.stdout.startswith("kunlunxin.com/xpu: 2 card(s)")
        assert "skipped: profile 'ascend'" in res.stderr

    def test_labels_and_preferred(self, xpu_host: fakehost.FakeHost, runner: CliRunner) -> None:
        """--labels prints key=value lines; --preferred prints the chosen names."""
        labels = runner.invoke(main, ["topology", *xpu_host.cli_roots, "--labels"]).stdout.splitlines()
        assert "xpu-cdi.io/xpu.switch-groups=0-3_4-7" in labels
        res = runner.invoke(main, ["topology", *xpu_host.cli_roots, "--preferred", "4", "--available", "0-2,4-7"])
        assert res.exit_code == 0 and res.stdout.strip() == "4,5,6,7"

    def test_ascend_preferred_in_one_hccs_ring(self, host_root: Path, runner: CliRunner) -> None:
        """A 910 server (two rings of 4): --json says each NPU's ring; with NPU 1 taken, --preferred 4 is the
        other ring whole, as the device plugin answers kubelet."""
        host = fakehost.kunpeng_npu_server(host_root, 8, pci_device="0xd801")
        cards = json.loads(runner.invoke(main, ["topology", *host.cli_roots, "--json"]).stdout)
        assert [c["hccs_domain"] for c in cards] == [0, 0, 0, 0, 1, 1, 1, 1]
        res = runner.invoke(main, ["topology", *host.cli_roots, "--preferred", "4", "--available", "0,2-7"])
        assert res.exit_code == 0 and res.stdout.strip() == "4,5,6,7", res.output

    def test_usage_errors(self, xpu_host: fakehost.FakeHost, runner: CliRunner) -> None:
        """--available needs --preferred (usage, 2); too many cards is exit 1 with the reason."""
        assert runner.invoke(main, ["topology", *xpu_host.cli_roots, "--available", "0"]).exit_code == 2
        res = runner.invoke(main, ["topology", *xpu_host.cli_roots, "--preferred", "9"])
        assert res.exit_code == 1 and "cannot choose 9" in res.stderr
