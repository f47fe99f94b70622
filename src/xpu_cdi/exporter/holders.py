"""Which container holds each card: kubelet's listing matched to the cards the specs define.

* **Device-plugin devices** come as ``(resource name, device IDs)``.  A
  resource is a kind's when it is named after the kind (our plugin's
  default) or when the IDs kubelet lists as allocatable for it are that
  kind's cards (``--resource-name huawei.com/npu=huawei.com/Ascend910``, or
  a vendor's plugin).  An ID is a card's when it is the card's CDI name (our
  plugin's IDs), the card's index, or one of the profile's selection aliases
  followed by the index (``Ascend910-3``, the IDs of Huawei's plugin), or the
  card's fully qualified CDI name (``kunlunxin.com/xpu=2``, what some vendors'
  plugins report).
* **DRA claims** come as fully qualified CDI device names
  (``kunlunxin.com/xpu=3``); ``<kind>=all`` is every card of the kind.

A replica of a time-sliced card (``<card>::<n>``) is its card's.  A card two
containers share (a shared claim, time-slicing replicas) is labelled with the first of
them in (namespace, pod, container) order.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ..cdi import names
from ..errors import SelectionError
from ..node.sharing import split as split_replica
from ..node.inventory import SpecCard
from ..node.podresources import Holder, Listing

CardKey = Tuple[str, str]  # (kind, CDI device name)


def _by_id(kind: str, cards: Dict[str, SpecCard], aliases: Sequence[str], device_id: str) -> Optional[SpecCard]:
    if device_id in cards:
        return cards[device_id]
    if "=" in device_id:  # a fully qualified CDI name: this kind's card, or none
        try:
            qualified_kind, name = names.parse_qualified(device_id)
        except SelectionError:
            return None
        return cards.get(name) if qualified_kind == kind else None
    card, replica = split_replica(device_id)
    if replica is not None:  # a time-slicing replica (<card>::<n>) is its card's
        return _by_id(kind, cards, aliases, card)
    digits = device_id
    for prefix in aliases:
        if device_id.startswith(prefix):
            digits = device_id[len(prefix):]
            break
    if digits.isdigit():
        return next((c for c in cards.values() if c.index == int(digits)), None)
    return None


def resource_kinds(kinds: Dict[str, Dict[str, SpecCard]], aliases: Dict[str, Sequence[str]],
                   allocatable: Iterable[Tuple[str, Sequence[str]]]) -> Dict[str, str]:
    """resource name -> kind: each kind under its own name, and every resource whose allocatable IDs
    all name cards of one kind."""
    out = {kind: kind for kind in kinds}
    for resource, ids in allocatable:
        if resource in out or not ids:
            continue
        owners = {kind for kind, cards in kinds.items()
                  if all(_by_id(kind, cards, aliases.get(kind, ()), i) is not None for i in ids)}
        if len(owners) == 1:
            out[resource] = owners.pop()
    return out


def assign(kinds: Dict[str, Dict[str, SpecCard]], aliases: Dict[str, Sequence[str]],
           listing: Listing) -> Dict[CardKey, Holder]:
    """(kind, card) -> the container holding it, for every held card."""
    found: Dict[CardKey, List[Holder]] = {}
    by_resource = resource_kinds(kinds, aliases, listing.allocatable)
    for holder, resource, ids in listing.devices:
        kind = by_resource.get(resource)
        if kind is None:
            continue
        for device_id in ids:
            card = _by_id(kind, kinds[kind], aliases.get(kind, ()), device_id)
            if card is not None:
                found.setdefault((kind, card.id), []).append(holder)
    for holder, qualified in listing.cdi_devices:
        try:
            kind, name = names.parse_qualified(qualified)
        except SelectionError:
            continue
        cards = kinds.get(kind) or {}
        for card in (cards.values() if name == "all" else [cards[name]] if name in cards else []):
            found.setdefault((kind, card.id), []).append(holder)
    return {key: sorted(set(hs), key=lambda h: (h.namespace, h.pod, h.container))[0] for key, hs in found.items()}
