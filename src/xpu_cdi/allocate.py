"""Choosing cards for one job (a device plugin's ``GetPreferredAllocation``).

Multi-card jobs pay for every PCIe level their traffic climbs: same switch
is best, then the same root port, then the same NUMA node, and crossing the
inter-socket link is worst.  Works on :class:`~xpu_cdi.topology.TopoCard`
or on the dicts ``xpu-cdi topology --json`` prints, so a plugin written in
any language can feed the same data back.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import SelectionError

# Exact search is used while the number of candidate sets stays this small
# (every 16-card server); beyond it a greedy fill gives the same answer on
# tree-shaped topologies.
EXACT_LIMIT = 20000

CardLike = Union[Any, Mapping[str, Any]]  # a TopoCard or its to_dict()


def _get(card: CardLike, key: str) -> Any:
    return card.get(key) if isinstance(card, Mapping) else getattr(card, key)


def distance(a: CardLike, b: CardLike) -> int:
    """How many levels of the tree traffic between two cards climbs.

    0 the same card; 1 the same switch; 2 the same root port; 3 the same
    NUMA node; 4 across the inter-socket link.
    """
    if _get(a, "name") == _get(b, "name"):
        return 0
    if _get(a, "switch") and _get(a, "switch") == _get(b, "switch"):
        return 1
    if _get(a, "root_port") and _get(a, "root_port") == _get(b, "root_port"):
        return 2
    if _get(a, "numa_node") == _get(b, "numa_node"):
        return 3
    return 4


def _name_order(name: str) -> Tuple[int, Any]:
    return (0, int(name)) if name.isdigit() else (1, name)


def preferred(devices: Sequence[CardLike], available: Optional[Sequence[str]], size: int) -> List[str]:
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

    Returns:
        The chosen names, sorted.

    Raises:
        SelectionError: *size* is not between 1 and the number available, or
            *available* names a card not in *devices*.
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
    cands = [by_name[n] for n in names]
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

    if math.comb(len(cands), size) <= EXACT_LIMIT:
        best = min(itertools.combinations(range(len(cands)), size), key=score)
    else:
        best = min((_greedy(seed, dist, size, cands, sizes) for seed in range(len(cands))), key=score)
    return [names[i] for i in sorted(best)]


def _levels(card: CardLike) -> List[Tuple[int, Any]]:
    """The groups a card belongs to, innermost first (switch, root port, NUMA node)."""
    out: List[Tuple[int, Any]] = []
    if _get(card, "switch"):
        out.append((1, _get(card, "switch")))
    if _get(card, "root_port"):
        out.append((2, _get(card, "root_port")))
    out.append((3, _get(card, "numa_node")))
    return out


def _greedy(seed: int, dist: List[List[int]], size: int, cands: Sequence[CardLike],
            sizes: Dict[Tuple[int, Any], int]) -> Tuple[int, ...]:
    """Grow a set from *seed*, always adding the closest card; on a tie, the one in the bigger group."""
    pick = [seed]
    acc = list(dist[seed])
    rest = set(range(len(cands))) - {seed}
    while len(pick) < size:
        nxt = min(rest, key=lambda i: (acc[i], [-sizes[k] for k in _levels(cands[i])], i))
        pick.append(nxt)
        rest.discard(nxt)
        for i in rest:
            acc[i] += dist[nxt][i]
    return tuple(sorted(pick))
