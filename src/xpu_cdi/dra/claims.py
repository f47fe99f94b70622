"""From a ResourceClaim read from the API server to what NodePrepareResources answers.

Pure functions: the claim as JSON, this driver's name and pool, the cards
the specs define now and who holds which card, in; the devices to answer
with (CDI names of the static specs, ``kunlunxin.com/xpu=3``), or one line
saying why not, out.  A share of a card (consumable capacity, :mod:`.shares`)
also carries its ``shareID`` and memory: the daemon adds the claim-scoped CDI
device that tells the container its share.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

from ..errors import ClaimError
from ..node.prepared import PreparedDevice
from . import shares
from .slices import DeviceInfo


def check_claim(claim: Mapping[str, Any], uid: str) -> None:
    """Refuse a claim that is not the one kubelet means (replaced: another uid) or not allocated."""
    meta = claim.get("metadata") or {}
    where = f"{meta.get('namespace', '?')}/{meta.get('name', '?')}"
    if meta.get("uid") != uid:
        raise ClaimError(f"claim {where} was replaced: its uid is now {meta.get('uid')}, kubelet asked for {uid}")
    if not (claim.get("status") or {}).get("allocation"):
        raise ClaimError(f"claim {where} is not allocated")


def our_results(claim: Mapping[str, Any], driver: str) -> List[Mapping[str, Any]]:
    """The allocation results of *claim* that name *driver*."""
    devices = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
    return [r for r in devices.get("results") or [] if r.get("driver") == driver]


def prepare(claim: Mapping[str, Any], driver: str, pool: str, devices: Mapping[str, DeviceInfo],
            in_use: Mapping[Tuple[str, str], str]) -> List[PreparedDevice]:
    """The devices to hand out for *claim*, one entry per card (its requests merged).

    Args:
        claim: the ResourceClaim (checked with :func:`check_claim` first).
        driver: this driver's name; results of other drivers are theirs.
        pool: this node's pool name.
        devices: slice device name -> the card, as the specs define them now.
        in_use: ``(pool, device)`` -> uid of another claim prepared with it.

    Raises:
        ClaimError: a result on another pool, a card this node no longer
            has, or a card another claim holds whole (admin access excepted;
            shares of one card are the scheduler's to count).
    """
    uid = (claim.get("metadata") or {}).get("uid", "")
    merged: Dict[Tuple[str, str], PreparedDevice] = {}
    for r in our_results(claim, driver):
        name, request = str(r.get("device", "")), str(r.get("request", "")).split("/")[0]
        share = str(r.get("shareID") or "")
        if r.get("pool") != pool:
            raise ClaimError(f"device {name} was allocated from pool {r.get('pool')!r}, but this node's pool is "
                             f"{pool!r}: the claim belongs to another node")
        card = devices.get(name)
        if card is None:
            raise ClaimError(f"device {name} is not on this node any more (no CDI spec defines it: run "
                             f"`xpu-cdi generate`); the claim must be allocated again")
        if share and card.share is None:
            raise ClaimError(f"device {name} was allocated as a share ({share}), but this driver no longer shares "
                             f"it (--share-capacity): the claim must be allocated again")
        holder = in_use.get((pool, name))
        if holder and holder != uid and not r.get("adminAccess"):
            raise ClaimError(f"device {name} is prepared for claim {holder}, still in use: refusing to share it")
        entry = merged.setdefault((name, share), PreparedDevice([], pool, name, [card.cdi]))
        if share:
            memory = shares.consumed(r)
            if memory <= 0:
                raise ClaimError(f"device {name} share {share} has no consumedCapacity.{shares.CAPACITY}: the API "
                                 f"server does not serve consumable capacity (DRAConsumableCapacity off?)")
            entry.share_id, entry.memory, entry.total = share, memory, shares.parse_quantity(card.memory)
        if request and request not in entry.requests:
            entry.requests.append(request)
    return list(merged.values())
