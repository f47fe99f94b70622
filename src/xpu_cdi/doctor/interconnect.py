"""interconnect: what multi-server and multi-card jobs need of the NPUs' links (docs/training.md):
each NPU a RoCE address of its own in /etc/hccn.conf, and every HCCS domain whole."""

from __future__ import annotations

from typing import List

from .. import interconnect, topology
from .context import Context
from .result import Result, fail, ok, warn


def check_interconnect(ctx: Context) -> List[Result]:
    """interconnect: no NPU without an address, no address twice, no domain short of NPUs."""
    out: List[Result] = []
    for st in ctx.states:
        prof = st.profile
        if st.view is None or not (prof.device_ip_file or prof.domains):
            continue
        host = interconnect.read(prof, [c.index for c in st.view.cards], ctx.opts.roots.sysfs,
                                 ctx.opts.roots.driver)
        name, conf = prof.name, prof.device_ip_file
        problems = len(out)
        if host.problems:
            out.append(warn("interconnect", f"{name}: {conf}: " + "; ".join(host.problems),
                            f"fix the lines: one key_<id>=<address> per line, as `hccn_tool -i <id> -ip -s "
                            f"address A netmask M` writes them; HCCL reads {conf} the same way"))
        for ip, cards in sorted(interconnect.duplicates(host).items()):
            out.append(fail("interconnect", f"{name}: NPUs {', '.join(map(str, cards))} share the RoCE address {ip} "
                                            f"({conf})",
                            "give each NPU its own address (`hccn_tool -i <id> -ip -s address A netmask M`): "
                            "HCCL's ranks reach each NPU at its address"))
        missing = [i for i, link in sorted(host.cards.items())  # a vNPU's id (past the server's NPUs) has none
                   if not link.device_ip and not (host.server_cards and i >= host.server_cards)]
        if host.source and missing:
            out.append(warn("interconnect", f"{name}: no RoCE address for NPU(s) {_ids(missing)} "
                                            f"in {conf}",
                            "set it: `hccn_tool -i <id> -ip -s address A netmask M` (and -gateway -s): a "
                            "multi-server job cannot use an NPU without one"))
        for domain, cards in sorted(interconnect.split_domains(host).items()):
            first = domain * host.domain_size
            gone = [i for i in range(first, first + host.domain_size) if i not in cards]
            out.append(warn("interconnect", f"{name}: HCCS domain {domain} has {len(cards)} of {host.domain_size} NPUs "
                                            f"(NPU(s) {_ids(gone)} missing): a job that "
                                            f"needs the whole domain cannot run here",
                            "check the missing NPUs (`npu-smi info`, dmesg); a card that died splits its ring"))
        if len(out) > problems:
            continue
        members = host.domain_members()
        shape = (f"{len(members)} HCCS domain(s) of {host.domain_size} " +
                 " ".join(f"[{_ids(m)}]" for m in members.values())) if members else \
            f"HCCS domains unknown ({host.why_no_domains})" if host.why_no_domains else "no HCCS domain rule"
        addresses = f"RoCE addresses for all {len(host.cards)} in {conf}" if host.source else \
            f"no {conf}: no RoCE addresses"
        tip = "" if host.source else f"fine on one server; a multi-server job needs each NPU's address in {conf}"
        out.append(ok("interconnect", f"{name}: {len(host.cards)} NPU(s): {shape}; {addresses}", tip))
    return out


def _ids(cards: List[int]) -> str:
    return topology.compress([str(i) for i in cards])
