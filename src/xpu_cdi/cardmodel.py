"""Which model a card is: the profile's ``dra.models`` entry for its PCI device id.

A card whose node has a PCI function (Kunlunxin) is looked up by that
function's ``device`` file.  A card without one (Ascend's davinciN: no
parent device) gets the host's model when every PCI function of the
profile's vendor that names a listed model names the same one; on a host
mixing models such a card's model is unknown (never guessed from PCI order).
What the DRA driver's ``model`` attribute, the node labels and the device
plugin's per-model resource names read (docs/vendors.md).
"""

from __future__ import annotations

import os
from typing import Dict, Optional, Tuple

from .hostfs import host_path, read_head
from .model import CardModel, Profile

PCI_DEVICES = "/sys/bus/pci/devices"


def by_pci(profile: Profile, sysfs_root: str, pci: str) -> Optional[CardModel]:
    """The model of the PCI function *pci*, or None when its device id is not listed."""
    dev = read_head(host_path(sysfs_root, f"{PCI_DEVICES}/{pci}/device"), 16).lower()
    return next((m for m in profile.models if m.pci_device == dev), None)


def host_models(profile: Profile, sysfs_root: str) -> Dict[str, Tuple[CardModel, int]]:
    """Model name -> (model, how many PCI functions of the vendor are that model) on this host."""
    if not profile.models or not profile.pci_vendor:
        return {}
    top = host_path(sysfs_root, PCI_DEVICES)
    try:
        names = sorted(os.listdir(top))
    except OSError:
        return {}
    vendor = profile.pci_vendor.lower()
    found: Dict[str, Tuple[CardModel, int]] = {}
    for name in names:
        if read_head(os.path.join(top, name, "vendor"), 16).lower() != vendor:
            continue
        model = by_pci(profile, sysfs_root, name)
        if model is not None:
            found[model.name] = (model, found.get(model.name, (model, 0))[1] + 1)
    return found


def host_model(profile: Profile, sysfs_root: str) -> Optional[CardModel]:
    """The one model all of the vendor's listed PCI functions on this host are, or None (none, or several)."""
    found = host_models(profile, sysfs_root)
    return next(iter(found.values()))[0] if len(found) == 1 else None


def of_card(profile: Optional[Profile], sysfs_root: str, pci: Optional[str]) -> Optional[CardModel]:
    """The model of a card (its PCI function, else the host's single model), or None."""
    if profile is None or not profile.models:
        return None
    return by_pci(profile, sysfs_root, pci) if pci else host_model(profile, sysfs_root)
