"""How a node's cards reach each other and other servers: each card's RoCE address and its
interconnect domain, read from where the vendor keeps them (the profile's ``interconnect``).

* **Device IPs**: Ascend keeps each NPU's RoCE address in ``/etc/hccn.conf``, one
  ``key_<physical id>=value`` line per setting (``address_0=192.168.100.101``,
  ``netmask_0=``, ``gateway_0=``, ``netdetect_0=``; ``IPv6address_0=`` for IPv6), as
  ``hccn_tool -i <id> -ip -s`` writes it.  Read as CANN's own readers do (hicann/hixl
  ``GetDeviceIp``): a key at the start of its line, one ``=``, a valid address; the first
  line of a key wins.  davinciN's N is the physical id.
* **Domains**: the profile's rules (``model``, ``size``, ``servers``): on a server whose
  PCI functions of that model number one of ``servers``, card ``i`` is in domain
  ``i // size``.  Any other server (a PCIe card host, a model without a rule) gets no
  domain: never guessed.

What the DRA driver publishes (``deviceIP``, ``hccsDomain``), the labels, the exporter's
info metric, the device plugin's preferred allocation and doctor read; pure but for
:func:`read`, which reads the file and sysfs.
"""

from __future__ import annotations

import re
import socket
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from . import cardmodel
from .hostfs import host_path
from .model import Profile

MAX_FILE = 1 << 16  # a 16-NPU hccn.conf is ~1.5 KiB
_LINE = re.compile(r"^(address|IPv6address|netmask|gateway|netdetect)_(\d{1,3})=(.*)$")


class CardLink(NamedTuple):
    """One card's interconnect facts ("" / None where unknown)."""

    device_ip: str = ""
    netmask: str = ""
    gateway: str = ""
    domain: Optional[int] = None


class HostLinks(NamedTuple):
    """What a node says about its cards' interconnect."""

    cards: Dict[int, CardLink]  # card index (physical id) -> its facts
    source: str = ""  # the device-IP file read, "" when the profile names none or it is absent
    domain_size: int = 0  # cards per domain, 0 when no rule holds
    domains: int = 0  # how many domains the server has
    model: str = ""
    server_cards: int = 0  # the model's PCI functions on the host
    problems: Tuple[str, ...] = ()  # lines of the file that were not taken, and why
    why_no_domains: str = ""

    def domain_members(self) -> Dict[int, List[int]]:
        """Domain -> the indices of the cards present in it."""
        out: Dict[int, List[int]] = {}
        for index, link in sorted(self.cards.items()):
            if link.domain is not None:
                out.setdefault(link.domain, []).append(index)
        return out


def parse_hccn(text: str) -> Tuple[Dict[int, Dict[str, str]], List[str]]:
    """``/etc/hccn.conf`` text -> {physical id: {"address": .., "netmask": .., ...}}, and a line per problem.

    An IPv6address is used as the address only where the card has no IPv4 one (as hixl does).
    """
    out: Dict[int, Dict[str, str]] = {}
    problems: List[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        m = _LINE.match(line)
        if not m:
            continue
        key, index, value = m.group(1), int(m.group(2)), m.group(3).strip()
        if "=" in value:
            problems.append(f"line {number}: {line!r} has more than one '=' (expected {key}_{index}=<address>)")
            continue
        if not _is_ip(value):
            problems.append(f"line {number}: {key}_{index}={value!r} is not an IP address")
            continue
        entry = out.setdefault(index, {})
        if key in entry:
            problems.append(f"line {number}: {key}_{index} given again (the first, {entry[key]}, is used)")
            continue
        entry[key] = value
    for entry in out.values():
        if "address" not in entry and "IPv6address" in entry:
            entry["address"] = entry["IPv6address"]
    return out, problems


def _is_ip(text: str) -> bool:
    """An IPv4 or IPv6 address as inet_pton reads it (CANN's own check)."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, text)
            return True
        except (OSError, ValueError):
            continue
    return False


def domain_rule(profile: Profile, sysfs_root: str) -> Tuple[int, str, int, str]:
    """(domain size, model name, server cards, why none) for this host: size 0 when no rule holds."""
    if not profile.domains:
        return 0, "", 0, ""
    found = cardmodel.host_models(profile, sysfs_root)
    if len(found) != 1:
        return 0, "", 0, ("the host's NPUs are of several models" if found else
                          "no PCI function of a model the profile lists")
    (model, count), = found.values()
    for rule in profile.domains:
        if rule.model == model.name and count in rule.servers:
            return rule.size, model.name, count, ""
    known = [f"{r.model} x{'/'.join(map(str, r.servers))}" for r in profile.domains]
    return 0, model.name, count, (f"no domain rule for {count} {model.name} NPUs "
                                  f"(the profile knows {', '.join(known)})")


def links(indices: Iterable[int], hccn: Optional[Dict[int, Dict[str, str]]], size: int,
          server_cards: int = 0) -> Dict[int, CardLink]:
    """The facts of each card index from the parsed file (None: no file) and the domain size (0: none);
    an index that is no physical id of a *server_cards* server (a vNPU's id) gets no domain."""
    out = {}
    for i in sorted(set(indices)):
        entry = (hccn or {}).get(i, {})
        physical = size and (not server_cards or 0 <= i < server_cards)
        out[i] = CardLink(entry.get("address", ""), entry.get("netmask", ""),
                          entry.get("gateway", ""), i // size if physical else None)
    return out


def read(profile: Optional[Profile], indices: Iterable[int], sysfs_root: str, driver_root: str) -> HostLinks:
    """The interconnect facts of the cards *indices* of *profile*'s kind on this host."""
    indices = list(indices)
    if profile is None or not (profile.device_ip_file or profile.domains):
        return HostLinks(links(indices, None, 0))
    hccn: Optional[Dict[int, Dict[str, str]]] = None
    problems: List[str] = []
    source = ""
    if profile.device_ip_file:
        path = host_path(driver_root, profile.device_ip_file)
        try:
            with open(path, errors="replace") as f:
                text = f.read(MAX_FILE)
        except FileNotFoundError:
            text = None
        except OSError as err:
            text = None
            problems.append(f"cannot read {profile.device_ip_file}: {err.strerror}")
        if text is not None:
            source = profile.device_ip_file
            hccn, problems = parse_hccn(text)
    size, model, count, why = domain_rule(profile, sysfs_root)
    cards = links(indices, hccn, size, count)
    domains = -(-count // size) if size else 0
    return HostLinks(cards, source, size, domains, model, count, tuple(problems), why)


def duplicates(host: HostLinks) -> Dict[str, List[int]]:
    """Each device IP that more than one card has -> those cards."""
    seen: Dict[str, List[int]] = {}
    for index, link in sorted(host.cards.items()):
        if link.device_ip:
            seen.setdefault(link.device_ip, []).append(index)
    return {ip: cards for ip, cards in seen.items() if len(cards) > 1}


def split_domains(host: HostLinks) -> Dict[int, List[int]]:
    """Each domain that has fewer cards present than its size -> the cards it has (a ring split)."""
    if not host.domain_size:
        return {}
    members = host.domain_members()
    full = {d: members.get(d, []) for d in range(host.domains)}
    return {d: cards for d, cards in full.items() if len(cards) < host.domain_size}
