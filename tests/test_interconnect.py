"""Interconnect facts: /etc/hccn.conf read as CANN reads it, the HCCS domain rules per model and
server size, and the checks doctor makes of them (no address, a shared address, a split ring)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import fakehost
from xpu_cdi import interconnect
from xpu_cdi.generate import profile as _profile


@pytest.fixture(scope="module")
def ascend():
    return _profile.load_all([])["ascend"]


class TestHccnConf:
    def test_fake_server_file_reads_back(self) -> None:
        """What the fake server writes is what hccn_tool leaves: address, netmask, gateway per physical id."""
        parsed, problems = interconnect.parse_hccn(fakehost.hccn_conf(8))
        assert not problems
        assert sorted(parsed) == list(range(8))
        assert parsed[3] == {"address": "192.168.1.13", "netmask": "255.255.255.0",
                             "netdetect": "192.168.1.1", "gateway": "192.168.1.1"}

    def test_key_must_start_its_line_and_unknown_keys_are_ignored(self) -> None:
        parsed, problems = interconnect.parse_hccn(" address_0=10.0.0.1\n#address_1=10.0.0.2\n"
                                                   "tls_enable_2=0\naddress_3=10.0.0.4\n")
        assert parsed == {3: {"address": "10.0.0.4"}} and not problems

    @pytest.mark.parametrize("line, why", [("address_0=10.0.0.1=2", "more than one '='"),
                                           ("address_0=10.0.0.300", "not an IP address"),
                                           ("netmask_0=", "not an IP address")])
    def test_bad_lines_are_named_and_not_taken(self, line: str, why: str) -> None:
        parsed, problems = interconnect.parse_hccn(line + "\n")
        assert parsed == {} and len(problems) == 1 and why in problems[0] and "line 1" in problems[0]

    def test_first_line_of_a_key_wins(self) -> None:
        parsed, problems = interconnect.parse_hccn("address_0=10.0.0.1\naddress_0=10.0.0.9\n")
        assert parsed[0]["address"] == "10.0.0.1" and "given again" in problems[0]

    def test_ipv6_only_where_no_ipv4(self) -> None:
        parsed, _ = interconnect.parse_hccn("IPv6address_0=fd00::1\naddress_1=10.0.0.2\nIPv6address_1=fd00::2\n")
        assert parsed[0]["address"] == "fd00::1" and parsed[1]["address"] == "10.0.0.2"


class TestDomains:
    @pytest.mark.parametrize("cards, pci, size, domains", [
        (8, "0xd801", 4, [0, 0, 0, 0, 1, 1, 1, 1]),      # 910: two rings of 4
        (4, "0xd801", 4, [0, 0, 0, 0]),                  # a 4-NPU 910 server: one ring
        (8, "0xd802", 8, [0] * 8),                       # Atlas 800T A2: one domain of 8
        (16, "0xd802", 8, [0] * 8 + [1] * 8),            # A+X: two domains of 8
    ])
    def test_rules_per_model_and_server(self, host_root: Path, ascend, cards: int, pci: str, size: int,
                                        domains: list) -> None:
        fakehost.kunpeng_npu_server(host_root, cards, pci_device=pci)
        host = interconnect.read(ascend, range(cards), str(host_root), str(host_root))
        assert host.domain_size == size and host.server_cards == cards
        assert [host.cards[i].domain for i in range(cards)] == domains
        assert host.domains == len(set(domains)) and not interconnect.split_domains(host)
        assert [host.cards[i].device_ip for i in range(cards)] == [f"192.168.1.{10 + i}" for i in range(cards)]
        assert host.source == "/etc/hccn.conf" and not host.problems

    @pytest.mark.parametrize("cards, pci", [(4, "0xd802"), (2, "0xd801"), (4, "0xd500")])
    def test_other_servers_get_no_domain(self, host_root: Path, ascend, cards: int, pci: str) -> None:
        """A server size or model without a rule (PCIe cards, 310P) is never guessed."""
        fakehost.ascend(host_root, cards, pci_device=pci)
        host = interconnect.read(ascend, range(cards), str(host_root), str(host_root))
        assert host.domain_size == 0 and all(link.domain is None for link in host.cards.values())
        assert host.why_no_domains.startswith("no domain rule for")

    def test_a_missing_npu_splits_its_domain(self, host_root: Path, ascend) -> None:
        """davinci5 gone from an 8-NPU 910 (its PCI function still there): ring 1 has 3 of 4."""
        fakehost.kunpeng_npu_server(host_root, 8, pci_device="0xd801")
        host = interconnect.read(ascend, [0, 1, 2, 3, 4, 6, 7], str(host_root), str(host_root))
        assert interconnect.split_domains(host) == {1: [4, 6, 7]}

    def test_no_file_no_addresses(self, host_root: Path, ascend) -> None:
        fakehost.ascend(host_root, 8)
        host = interconnect.read(ascend, range(8), str(host_root), str(host_root))
        assert host.source == "" and all(not link.device_ip for link in host.cards.values())
        assert host.domain_size == 8  # the domains do not need the file

    def test_duplicates_and_missing(self, host_root: Path, ascend) -> None:
        fakehost.kunpeng_npu_server(host_root, 8)
        text = fakehost.hccn_conf(8, skip=(2,)).replace("address_5=192.168.1.15", "address_5=192.168.1.14")
        (host_root / "etc/hccn.conf").write_text(text)
        host = interconnect.read(ascend, range(8), str(host_root), str(host_root))
        assert interconnect.duplicates(host) == {"192.168.1.14": [4, 5]}
        assert host.cards[2].device_ip == ""

    def test_profile_without_interconnect(self, host_root: Path) -> None:
        fakehost.kunlunxin(host_root, 2)
        host = interconnect.read(_profile.load_all([])["kunlunxin"], [0, 1], str(host_root), str(host_root))
        assert host.domain_size == 0 and host.source == "" and host.cards[0] == interconnect.CardLink()
