"""The devices DRA claims have on this node beyond whole cards: shares of a card, vNPUs.

Read from the DRA driver's checkpoints (``<kubelet plugins dir>/<driver>/checkpoint.json``,
:mod:`xpu_cdi.node.checkpoint`): every prepared device whose CDI names include a claim-scoped
one (``k8s.<driver>/claim=<claim uid>-<suffix>``, :mod:`xpu_cdi.node.claimspec`) is a series of
its own, with its claim, its share id and memory where the driver recorded them, and the
container holding it: the one kubelet's PodResources lists with that claim-scoped name.
A checkpoint of an earlier boot is stale (its claims are gone) and skipped.
"""

from __future__ import annotations

import dataclasses
import glob
import os
from dataclasses import dataclass
from typing import Dict, List, Optional

from ..node import checkpoint, claimspec
from ..node.podresources import Holder, Listing


@dataclass(frozen=True)
class ClaimDevice:
    driver: str
    claim_namespace: str
    claim: str
    device: str  # the device's name in the driver's ResourceSlice
    cdi: str  # its claim-scoped CDI name
    card: str = ""  # the whole card's qualified CDI name, when the entry names one (a share)
    share_id: str = ""
    memory: Optional[int] = None  # bytes, where the driver recorded them
    holder: Optional[Holder] = None


def read(plugins_dir: str, boot: str) -> List[ClaimDevice]:
    """Every claim-scoped device the checkpoints under *plugins_dir* record for this *boot*."""
    out: List[ClaimDevice] = []
    for path in sorted(glob.glob(os.path.join(glob.escape(plugins_dir), "*", checkpoint.NAME))):
        driver = os.path.basename(os.path.dirname(path))
        try:
            claims, written_on = checkpoint.read(path)
        except (OSError, ValueError):
            continue  # the driver says so in its log and Event; doctor names it
        if written_on != boot:
            continue
        own = claimspec.kind(driver) + "="
        for c in claims.values():
            for d in c.devices:
                for name in (n for n in d.cdi if n.startswith(own)):
                    card = next((n for n in d.cdi if not n.startswith(own)), "")
                    out.append(ClaimDevice(driver, c.namespace, c.name, d.device, name, card, d.share_id,
                                           d.memory if d.memory is not None and d.memory >= 0 else None))
    return out


def with_holders(devices: List[ClaimDevice], listing: Listing) -> List[ClaimDevice]:
    """*devices*, each with the first container (namespace, pod, container order) kubelet lists it for."""
    by_name: Dict[str, List[Holder]] = {}
    for holder, name in listing.cdi_devices:
        by_name.setdefault(name, []).append(holder)
    out = []
    for d in devices:
        held = sorted(set(by_name.get(d.cdi, ())), key=lambda h: (h.namespace, h.pod, h.container))
        out.append(dataclasses.replace(d, holder=held[0] if held else None))
    return out
