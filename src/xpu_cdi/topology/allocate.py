"""Choosing cards for one job (a device plugin's ``GetPreferredAllocation``).

Multi-card jobs pay for every PCIe level their traffic climbs: same switch
is best, then the same root port, then the same NUMA node, and crossing the
inter-socket link is bad.  Worst is leaving the card's interconnect domain
(``hccs_domain``: Ascend's HCCS ring or mesh, :mod:`xpu_cdi.interconnect`):
a 910's rings cannot talk over HCCS at all, a 16-NPU 910B's two domains of 8
only through PCIe.  Works on :class:`~xpu_cdi.topology.TopoCard`
or on the dicts ``xpu-cdi topology --json`` prints, so a plugin written in
any language can feed the same data back.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import SelectionError

# Exact search is used while the number of candidate sets stays this small
# (every 16-card server); beyond it a greedy fill gives the same answer on
# tree-shaped topologies.
EXACT_LIMIT = 20000

CardLike = Union[Any, Mapping[str, Any]]  # a TopoCard or its to_dict()


def _get(card: CardLike, key: str) -> Any:
    return card.get(key) if isinstance(card, Mapping) else getattr(card, key, None)


def distance(a: CardLike, b: CardLike) -> int:
    """How many levels of the tree traffic between two cards climbs.

    0 the same card; 1 the same switch; 2 the same root port; 3 the same
    NUMA node; 4 across the inter-socket link; 5 across interconnect domains.
    """
    if _get(a, "name") == _get(b, "name"):
        return 0
    if _get(a, "hccs_domain") is not None and _get(a, "hccs_domain") != _get(b, "hccs_domain"):
        return 5
    if _get(a, "switch") and _get(a, "switch") == _get(b, "switch"):
        return 1
    if _get(a, "root_port") and _get(a, "root_port") == _get(b, "root_port"):
        return 2
    if _get(a, "numa_node") == _get(b, "numa_node"):
        return 3
    return 4


def _name_order(name: str) -> Tuple[int, Any]:
    return (0, int(name)) if name.isdigit() else (1, name)


def preferred(devices: Sequence[CardLike], available: Optional[Sequence[str]], size: int,
              must_include: Sequence[str] = ()) -> List[str]:
    """The best *size* cards for one job, for ``GetPreferredAllocation``.

    Same switch first, then same root port, then same NUMA node; when no
    group is big enough, the set with the fewest crossings (the smallest sum
    of pairwise :func:`distance`).  Ties go to the set that leaves the fewest
    free cards stranded in the groups it touches (big groups stay whole for
    big jobs), then to the lowest names.  Deterministic.

    Args:
        devices: every card (``TopoCard`` or the dicts ``topology --json`` prints).
        available: names of the free cards; None means all of them.
        size: how many cards the job needs.
        must_include: cards the answer must hold (kubelet's ``must_include_deviceIDs``,
            e.g. cards a container already has); they must be available.

    Returns:
        The chosen names, sorted.

    Raises:
        SelectionError: *size* is not between 1 and the number available, or
            *available* names a card not in *devices*, or *must_include* names
            more than *size* cards or one not available.
    """
    by_name = {str(_get(d, "name")): d for d in devices}
    if available is None:
        names = sorted(by_name, key=_name_order)
    else:
        unknown = [a for a in available if a not in by_name]
        if unknown:
            raise SelectionError(f"available card {unknown[0]!r} is not one of the cards found "
                                 f"({', '.join(sorted(by_name, key=_name_order))})")
        names = sorted(set(available), key=_name_order)
    if not 1 <= size <= len(names):
        raise SelectionError(f"cannot choose {size} card(s) from the {len(names)} available: "
                             f"ask for 1 to {len(names)}")
    must = sorted({str(m) for m in must_include}, key=_name_order)
    missing = [m for m in must if m not in names]
    if missing:
        raise SelectionError(f"card {missing[0]!r} must be included but is not available")
    if len(must) > size:
        raise SelectionError(f"{len(must)} cards must be included but only {size} are asked for")
    cands = [by_name[n] for n in names]
    fixed = tuple(names.index(m) for m in must)
    dist = [[distance(a, b) for b in cands] for a in cands]
    sizes: Dict[Tuple[int, Any], int] = {}
    for c in cands:
        for level in _levels(c):
            sizes[level] = sizes.get(level, 0) + 1

    def score(pick: Sequence[int]) -> Tuple[int, int, Tuple[int, ...]]:
        cost = sum(dist[i][j] for i, j in itertools.combinations(pick, 2))
        used: Dict[Tuple[int, Any], int] = {}
        for i in pick:
            for level in _levels(cands[i]):
                used[level] = used.get(level, 0) + 1
        stranded = sum(sizes[k] - n for k, n in used.items())
        return cost, stranded, tuple(pick)

    rest = [i for i in range(len(cands)) if i not in fixed]
    if math.comb(len(rest), size - len(fixed)) <= EXACT_LIMIT:
        best = min((tuple(sorted(fixed + extra)) for extra in itertools.combinations(rest, size - len(fixed))),
                   key=score)
    else:
        seeds = [fixed] if fixed else [(seed,) for seed in range(len(cands))]
        best = min((_greedy(seed, dist, size, cands, sizes) for seed in seeds), key=score)
    return [names[i] for i in sorted(best)]


def _levels(card: CardLike) -> List[Tuple[int, Any]]:
    """The groups a card belongs to, innermost first (switch, root port, NUMA node, interconnect domain)."""
    out: List[Tuple[int, Any]] = []
    if _get(card, "switch"):
        out.append((1, _get(card, "switch")))
    if _get(card, "root_port"):
        out.append((2, _get(card, "root_port")))
    out.append((3, _get(card, "numa_node")))
    if _get(card, "hccs_domain") is not None:
        out.append((4, _get(card, "hccs_domain")))
    return out


def _greedy(seed: Tuple[int, ...], dist: List[List[int]], size: int, cands: Sequence[CardLike],
            sizes: Dict[Tuple[int, Any], int]) -> Tuple[int, ...]:
    """Grow a set from the *seed* cards, always adding the closest card; on a tie, the one in the bigger group."""
    pick = list(seed)
    acc = [sum(dist[s][i] for s in seed) for i in range(len(cands))]
    rest = set(range(len(cands))) - set(seed)
    while len(pick) < size:
        nxt = min(rest, key=lambda i: (acc[i], [-sizes[k] for k in _levels(cands[i])], i))
        pick.append(nxt)
        rest.discard(nxt)
        for i in rest:
            acc[i] += dist[nxt][i]
    return tuple(sorted(pick))
