"""topology: where the cards sit, links that run below their maximum, and
how multi-card jobs should pick cards (seed report: slow jobs whose cards
sat under different PCIe switches)."""

from __future__ import annotations

from typing import List

from .. import topology
from .context import Context
from .result import Result, ok, warn


def check_topology(ctx: Context) -> List[Result]:
    """topology: PCI facts known for every card; no degraded links; the switch groups."""
    out = []
    for st in ctx.states:
        if st.view is None:
            continue
        cards = topology.cards(st.view, ctx.opts.roots.sysfs)
        name = st.profile.name
        unknown = [c.path for c in cards if not c.pci]
        if unknown and st.profile.topology_unknown:
            out.append(ok("topology", f"{name}: topology unknown: {st.profile.topology_unknown}",
                          "schedule multi-card jobs by the vendor's own topology (HCCS/PCIe via npu-smi); "
                          "xpu-cdi never guesses card placement"))
            continue
        if unknown:
            out.append(warn("topology", f"{name}: sysfs has no PCI address for {', '.join(unknown)}: "
                                        f"PCIe switch and NUMA placement unknown",
                            "check --sysfs-root (sysfs is read from <root>/sys) and that the driver registers "
                            "its nodes in sysfs (/sys/dev/char/MAJ:MIN/device)"))
            continue
        slow = [f"{c.path} {topology.degraded(c)}" for c in cards if topology.degraded(c)]
        if slow:
            out.append(warn("topology", f"{name}: PCIe link below its maximum: {'; '.join(slow)}",
                            "reseat the card or check the slot/riser and BIOS link settings: a degraded link "
                            "slows every job that uses the card"))
        groups = topology.groups(cards)
        shape = " ".join(f"[{topology.compress([c.name for c in g])}]" for g in groups)
        numas = len({c.numa_node for c in cards})
        tip = ("multi-card jobs are fastest within one group: have the device plugin's GetPreferredAllocation "
               "use `xpu-cdi topology --preferred N --available ...`, or label nodes with "
               "`xpu-cdi topology --labels`") if len(groups) > 1 else ""
        what = f"{len(groups)} switch group(s) {shape}" if any(c.switch for c in cards) else \
            f"no PCIe switch (each on its own port) {shape}"
        out.append(ok("topology", f"{name}: {len(cards)} card(s) in {what} on {numas} NUMA node(s)", tip))
    return out
