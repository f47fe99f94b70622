"""One rule for the device plugin and the DRA driver: a chip with any vNPU carved is not offered whole.

An Ascend vNPU (``/dev/vdavinci<id>``) is part of a chip (``/dev/davinci<phy id>``): handing the
chip to one pod and a vNPU of it to another would give two pods the same cores.  Which chip a
vNPU id belongs to is the profile's partition data (:meth:`xpu_cdi.partitions.Partitions.vnpu_parent`:
ids ``100 + 16 * phy id`` onwards, mind-cluster's numbering; docs/vendors.md).  A profile without
partition data is left as it is.
"""

from __future__ import annotations

import dataclasses
from typing import AbstractSet, Dict, List, Optional, Tuple

from .. import partitions
from .inventory import KindSet


def parents(ks: KindSet, parts: Optional[partitions.Partitions]) -> Dict[str, int]:
    """Card id -> the physical id of its chip, for every card of *ks* that is a vNPU."""
    if parts is None:
        return {}
    out = {}
    for card in ks.cards.values():
        if card.index is not None:
            phy = parts.vnpu_parent(card.index)
            if phy is not None:
                out[card.id] = phy
    return out


def withhold(ks: KindSet, parts: Optional[partitions.Partitions],
             own: AbstractSet[int] = frozenset()) -> Tuple[KindSet, List[str]]:
    """*ks* less every chip with a vNPU carved, and less the vNPUs of ids *own* (the DRA driver's,
    made for claims: offered through their templates, not as cards); one line per chip withheld."""
    vnpus = parents(ks, parts)
    carved: Dict[int, List[str]] = {}
    for cid, phy in vnpus.items():
        if ks.cards[cid].index not in own:
            carved.setdefault(phy, []).append(cid)
    keep, lines = {}, []
    for cid, card in ks.cards.items():
        if cid in vnpus:
            if card.index not in own:
                keep[cid] = card
        elif card.index in carved:
            lines.append(f"{ks.kind}={cid}: not offered whole: vNPU(s) {', '.join(carved[card.index])} carved "
                         f"from it")
        else:
            keep[cid] = card
    if len(keep) == len(ks.cards):
        return ks, lines
    return dataclasses.replace(ks, cards=keep), lines


def withhold_all(kinds: Dict[str, KindSet],
                 own: AbstractSet[int] = frozenset()) -> Tuple[Dict[str, KindSet], List[str]]:
    """:func:`withhold` for every kind, with its profile's shipped partition data."""
    out, lines = {}, []
    for kind, ks in kinds.items():
        out[kind], said = withhold(ks, partitions.builtin(ks.profile) if ks.profile else None, own)
        lines += said
    return out, lines
