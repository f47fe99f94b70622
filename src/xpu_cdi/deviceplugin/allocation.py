"""The answers to ``GetPreferredAllocation`` and ``Allocate``, as plain data.

Kept apart from gRPC so that the rules are tested without a server:

* preferred: the topology code of ``xpu-cdi topology --preferred``
  (:func:`xpu_cdi.allocate.preferred`: same PCIe switch, then root port, then
  NUMA node), honouring kubelet's ``must_include_deviceIDs``;
* allocate: each ID must be one the specs define and Healthy now, else the
  whole request fails naming every bad ID (kubelet then fails the pod with
  that message, instead of a container that starts without its card).  The
  answer is :func:`.response.allocate_response`'s for the configured
  strategies: CDI devices only, never host device paths (the spec is the one
  description of what a card needs, and the runtime applies it).
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence

from ..topology import allocate as _allocate
from ..errors import AllocationError, SelectionError
from ..node.inventory import SpecCard
from . import response
from ..node import sharing


def preferred(cards: Mapping[str, SpecCard], available: Sequence[str], must_include: Sequence[str],
              size: int) -> List[str]:
    """The IDs kubelet should give one container, or ``[]`` (kubelet then chooses itself).

    IDs kubelet offers that no spec defines are left out (they cannot be
    allocated); when what is left cannot make *size*, the answer is ``[]``.
    """
    offered = [a for a in dict.fromkeys(available) if a in cards]
    must = [m for m in dict.fromkeys(must_include) if m in offered]
    if size <= 0 or size > len(offered) or len(must) > size:
        return []
    try:
        return _allocate.preferred([cards[a].topo() for a in offered], offered, size, must)
    except SelectionError:
        return []


def check(kind: str, cards: Mapping[str, SpecCard], unhealthy: Mapping[str, str], ids: Sequence[str]) -> None:
    """Raise :class:`AllocationError` naming every ID that is unknown or Unhealthy."""
    unknown = [i for i in ids if i not in cards]
    sick = [i for i in ids if i in cards and unhealthy.get(i)]
    problems = []
    if unknown:
        have = ", ".join(cards) or "none"
        problems.append(f"unknown device ID(s) {', '.join(map(repr, unknown))} for {kind} (the specs define: "
                        f"{have}; a stale kubelet checkpoint or a spec rewritten with other names)")
    if sick:
        problems.append("; ".join(f"device {i!r} is Unhealthy: {unhealthy[i]}" for i in sick))
    if not ids:
        problems.append(f"no device IDs in the request for {kind}")
    if problems:
        raise AllocationError("; ".join(problems))


def shared_cards(plan: Optional[sharing.Replicated], resource: str, ids: Sequence[str],
                 cards: Mapping[str, SpecCard]) -> List[str]:
    """The card IDs behind kubelet's IDs: replicas mapped to their cards when *plan* time-slices the kind.

    Raises:
        AllocationError: more than one replica where the plan refuses that.
    """
    if plan is None:
        return list(ids)
    try:
        return sharing.to_cards(plan, resource, ids, cards)
    except ValueError as err:
        raise AllocationError(str(err)) from None


def plugin_name(kind: str) -> str:
    """The plugin part of the ``cdi.k8s.io/`` annotation key: short, one per kind (``kunlunxin.xpu``)."""
    vendor, _sep, cls = kind.partition("/")
    return f"{vendor.split('.')[0]}.{cls}"


def container_response(kind: str, cards: Mapping[str, SpecCard], unhealthy: Mapping[str, str], ids: Sequence[str],
                       strategies: Sequence[str], env_var: Optional[str]) -> Dict[str, object]:
    """One ``ContainerAllocateResponse`` as a dict: ``cdi_devices``, ``annotations``, ``envs``.

    Raises:
        AllocationError: unknown or Unhealthy IDs, or ``envvar`` asked where
            the kind has no selection variable or the IDs are not card indices.
    """
    check(kind, cards, unhealthy, ids)
    indices: Optional[List[str]] = None
    if "envvar" in strategies:
        if not env_var:
            raise AllocationError(f"strategy envvar: {kind} has no selection variable in its hook index "
                                  f"(spec not written by xpu-cdi generate?): use cdi-cri or cdi-annotations")
        if any(cards[i].index is None for i in ids):
            raise AllocationError(f"strategy envvar: device(s) {', '.join(i for i in ids if cards[i].index is None)} "
                                  f"have no card index: use cdi-cri or cdi-annotations")
        indices = [str(cards[i].index) for i in ids]
    try:
        return response.allocate_response(kind, ids, strategies, plugin_name(kind), env_var or "", indices)
    except SelectionError as err:  # a name the runtimes would refuse: kubelet fails the pod saying so
        raise AllocationError(str(err)) from err
