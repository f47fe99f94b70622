"""``resource-naming``: one resource per CDI kind (``kind``, the default) or per card model
(``model``), named as the vendor's own plugin names it (the profile's ``dra.models``
``resource``: ``huawei.com/Ascend310P``, ``huawei.com/Ascend910``), so that manifests and
quotas written for that plugin work as they are (docs/device-plugin.md, "Resource names").

The daemon serves one plugin per *unit*: the kind's cards, or in ``model`` naming the cards
of each model resource (keyed by that resource name).  A card whose model is unknown, or has
no resource of its own, stays under the kind's resource name.  A static vNPU is served under its
template's resource whatever the naming (mind-cluster's names, :mod:`.vnpunames`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional

if TYPE_CHECKING:  # the settings import this module: no inventory code on --probe's path
    from ..node.inventory import KindSet

KIND, MODEL = "kind", "model"
NAMINGS = (KIND, MODEL)


def split(kinds: Dict[str, "KindSet"], naming: str, profile_named: Callable[[Optional[str]], Any],
          sysfs_root: str, vnpus: Optional[Dict[str, Dict[str, str]]] = None) -> Dict[str, "KindSet"]:
    """The units to serve: *kinds* as they are (``kind``), or each kind's cards by model resource; in
    both, the static vNPUs of *vnpus* (kind -> card id -> resource name, :mod:`.vnpunames`) apart,
    each under its template's resource."""
    vnpus = vnpus or {}
    if naming != MODEL and not any(vnpus.values()):
        return kinds
    from .. import cardmodel

    out: Dict[str, "KindSet"] = {}
    for kind, ks in kinds.items():
        profile = profile_named(ks.profile) if naming == MODEL else None
        for cid, card in ks.cards.items():
            key = vnpus.get(kind, {}).get(cid)
            if key is None and naming == MODEL:
                model = cardmodel.of_card(profile, sysfs_root, card.pci)
                key = model.resource if model is not None and model.resource else None
            key = key or kind
            if key not in out:
                out[key] = dataclasses.replace(ks, cards={})
            out[key].cards[cid] = card
    return out
