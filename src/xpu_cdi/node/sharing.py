"""Time-slicing: each card advertised as N replicas, in NVIDIA k8s-device-plugin's config shape.

The device plugin's config file takes (validated by ``schemas/sharing.schema.json``)::

    sharing:
      timeSlicing:
        renameByDefault: false            # true: advertise <name>.shared
        failRequestsGreaterThanOne: true  # a container asking for 2+ replicas is refused
        resources:
          - {name: huawei.com/npu, replicas: 4, rename: huawei.com/npu.shared}

A replica's device ID is ``<card>::<n>`` (n from 0); Allocate maps replicas back to their
cards, each card once; the preferred allocation takes the least-shared card first.
Nothing is isolated between the containers of one card (docs/sharing.md).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from .. import schema_files

SCHEMA = "sharing.schema.json"
SEP = "::"
SHARED_SUFFIX = ".shared"  # NVIDIA's DefaultSharedResourceNameSuffix


@dataclass(frozen=True)
class Replicated:
    """How one resource's cards are shared."""

    name: str  # the resource (or CDI kind) the entry names
    replicas: int
    rename: Optional[str] = None
    fail_requests_greater_than_one: bool = False


@dataclass(frozen=True)
class TimeSlicing:
    """The ``sharing.timeSlicing`` setting."""

    resources: Tuple[Replicated, ...] = ()

    def for_kind(self, kind: str, resource: str) -> Optional[Replicated]:
        """The entry naming *kind*'s resource (or the kind itself), if any."""
        return next((r for r in self.resources if r.name in (resource, kind)), None)


def parse(value: Any) -> TimeSlicing:
    """The setting from the config file's ``sharing:`` value.

    Raises:
        ValueError: one line: the first schema violation, or a resource named twice.
    """
    problems = schema_files.errors(SCHEMA, value)
    if problems:
        raise ValueError(problems[0])
    ts = value["timeSlicing"]
    by_default = bool(ts.get("renameByDefault", False))
    fail = bool(ts.get("failRequestsGreaterThanOne", False))
    out: List[Replicated] = []
    for r in ts["resources"]:
        if any(o.name == r["name"] for o in out):
            raise ValueError(f"timeSlicing.resources names {r['name']!r} twice")
        rename = r.get("rename") or (r["name"] + SHARED_SUFFIX if by_default else None)
        out.append(Replicated(r["name"], int(r["replicas"]), rename, fail))
    return TimeSlicing(tuple(out))


def replica_id(card: str, n: int) -> str:
    return f"{card}{SEP}{n}"


def split(device_id: str) -> Tuple[str, Optional[int]]:
    """``("3", 1)`` for ``"3::1"``; ``(device_id, None)`` for an ID that is no replica's."""
    card, sep, n = device_id.rpartition(SEP)
    if sep and card and n.isdigit():
        return card, int(n)
    return device_id, None


def card_of(device_id: str) -> str:
    return split(device_id)[0]


def replica_ids(cards: Iterable[str], replicas: int) -> List[str]:
    """Every replica of every card, card by card."""
    return [replica_id(c, n) for c in cards for n in range(replicas)]


def to_cards(plan: Replicated, resource: str, ids: Sequence[str], known: Iterable[str]) -> List[str]:
    """The cards behind the replica IDs of one container, each once, in order.

    An ID that is no replica of a known card is passed through unchanged, so that the
    allocation check names it as unknown.

    Raises:
        ValueError: failRequestsGreaterThanOne and more than one replica asked.
    """
    if plan.fail_requests_greater_than_one and len(ids) > 1:
        raise ValueError(f"request for '{resource}: {len(ids)}' too large: {resource} is time-sliced "
                         f"(failRequestsGreaterThanOne) and a container may ask for 1 replica, which gives "
                         f"shared access to one card, not a larger share: ask for 1")
    cards = set(known)
    out: List[str] = []
    for i in ids:
        card, n = split(i)
        target = card if n is not None and n < plan.replicas and card in cards else i
        if target not in out:
            out.append(target)
    return out


def preferred(replicas: int, available: Sequence[str], must_include: Sequence[str], size: int) -> List[str]:
    """Replica IDs for one container: the must-include ones, then, one at a time, a replica of the
    card with the fewest replicas taken (by others and by this pick), ties in offer order; ``[]``
    when *size* cannot be met."""
    offered = list(dict.fromkeys(available))
    must = [m for m in dict.fromkeys(must_include) if m in offered]
    if size <= 0 or size > len(offered) or len(must) > size:
        return []
    free = Counter(card_of(a) for a in offered)
    taken: Dict[str, int] = {c: max(replicas - n, 0) for c, n in free.items()}
    picked = Counter(card_of(m) for m in must)
    queues: Dict[str, List[Tuple[int, str]]] = {}  # card -> its offered replicas left, in offer order
    for pos, a in enumerate(offered):
        if a not in must:
            queues.setdefault(card_of(a), []).append((pos, a))
    for q in queues.values():
        q.reverse()  # popped from the end: first offered first
    out = list(must)
    while len(out) < size:
        card = min((c for c in queues if queues[c]),
                   key=lambda c: (taken[c] + picked[c], picked[c], queues[c][-1][0]))
        picked[card] += 1
        out.append(queues[card].pop()[1])
    return out
