"""Static vNPUs (made by an admin with ``npu-smi set -t create-vnpu``) under the resource names
mind-cluster's ascend-device-plugin gives them: ``huawei.com/Ascend310P-2c``, ``-4c.3cpu``,
``huawei.com/Ascend910-5c.1cpu.16g`` (mind-cluster ``component/ascend-common/devmanager/common``:
``templateName2DeviceType`` in ``utils.go``, the suffixes in ``constants.go``, and
``GetVNPUTypeByTemplate``: ``Ascend310P`` for a 310P chip, ``Ascend910`` for the 910, 910B and A3).
Manifests and quotas written for that plugin work as they are (docs/device-plugin.md).

A vNPU's node says nothing of its template: the vendor's tool does, ``npu-smi info -t info-vnpu
-i CARD -c CHIP`` for the chip the vNPU was carved from (``npu-smi info -m`` gives the card and
chip of each phy id).  A vNPU whose template cannot be learned, or has no name in that table, is
not offered (one line says why): under a wrong name a pod would get the wrong share of a chip.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from .. import partitions
from ..node.vnpu import Tool
from ..errors import ClaimError
from ..node import carved
from ..node.inventory import KindSet

#: template -> the suffix of its resource name (mind-cluster ``templateName2DeviceType``)
SUFFIX = {
    "vir01": "1c", "vir02": "2c", "vir02_1c": "2c.1cpu", "vir03_1c_8g": "3c.1cpu.8g", "vir04": "4c",
    "vir04_3c": "4c.3cpu", "vir04_3c_ndvpp": "4c.3cpu.ndvpp", "vir04_4c_dvpp": "4c.4cpu.dvpp",
    "vir05_1c_8g": "5c.1cpu.8g", "vir05_1c_16g": "5c.1cpu.16g", "vir06_1c_16g": "6c.1cpu.16g", "vir08": "8c",
    "vir10_3c_16g": "10c.3cpu.16g", "vir10_3c_16g_nm": "10c.3cpu.16g.ndvpp", "vir10_3c_32g": "10c.3cpu.32g",
    "vir10_4c_16g_m": "10c.4cpu.16g.dvpp", "vir12_3c_32g": "12c.3cpu.32g", "vir16": "16c",
}


def family(model: str) -> Optional[str]:
    """The first part of the name for a chip of partition-data *model* (``310P``, ``910B3``, ``910_93 ...``)."""
    if model.startswith("310P"):
        return "Ascend310P"
    if model.startswith("910"):
        return "Ascend910"
    return None


def resource_name(domain: str, model: str, template: str) -> Optional[str]:
    """``<domain>/<family>-<suffix>``, or None where mind-cluster gives the chip or template no name."""
    fam, suffix = family(model), SUFFIX.get(template)
    return f"{domain}/{fam}-{suffix}" if fam and suffix else None


class Namer:
    """Each static vNPU's resource name, learned from the tool once per vNPU id (a template changes only by
    a destroy and a create, which removes the node: the id leaves the specs and is forgotten)."""

    def __init__(self, tool: Callable[[str], Tool]) -> None:
        self.tool = tool  # the partition data's tool name -> the tool
        self.known: Dict[int, str] = {}

    def names(self, ks: KindSet, parts: Optional[partitions.Partitions]) -> Tuple[Dict[str, str], List[str]]:
        """Card id -> resource name of every vNPU card of *ks*; one line per vNPU left unnamed."""
        vnpus = carved.parents(ks, parts)
        if not vnpus or parts is None:
            return {}, []
        ids = {cid: int(ks.cards[cid].index or 0) for cid in vnpus}  # parents() keeps indexed cards only
        self.known = {i: n for i, n in self.known.items() if i in ids.values()}
        missing = sorted({vnpus[cid] for cid, i in ids.items() if i not in self.known})
        why = self._learn(ks.kind.partition("/")[0], parts, missing) if missing else {}
        out, lines = {}, []
        for cid, i in ids.items():
            if i in self.known:
                out[cid] = self.known[i]
            else:
                reason = why.get(i) or why.get(-1 - vnpus[cid]) or f"{parts.tool} info -t info-vnpu does not list it"
                lines.append(f"{ks.kind}={cid}: vNPU {i} not offered: {reason}")
        return out, lines

    def _learn(self, domain: str, parts: partitions.Partitions, phys: List[int]) -> Dict[int, str]:
        """Learn the names of the vNPUs of chips *phys*; why some are not named: by vNPU id, or by
        ``-1 - phy id`` for a whole chip."""
        tool = self.tool(parts.tool)
        why: Dict[int, str] = {}
        try:
            chips = tool.chips(phys)
        except ClaimError as err:
            return {-1 - phy: f"its template is unknown: {err}" for phy in phys}
        for phy in phys:
            chip = chips.get(phy)
            if chip is None:
                why[-1 - phy] = f"{parts.tool} info -m lists no chip of phy id {phy}"
                continue
            try:
                listed = tool.vnpus(chip.card, chip.chip)
            except ClaimError as err:
                why[-1 - phy] = f"its template is unknown: {err}"
                continue
            model = parts.chip(chip.name)
            for vnpu_id, template in listed:
                name = resource_name(domain, model.model if model else chip.name, template)
                if name is None:
                    why[vnpu_id] = f"mind-cluster names no resource for template {template} on a {chip.name} chip"
                else:
                    self.known[vnpu_id] = name
        return why
