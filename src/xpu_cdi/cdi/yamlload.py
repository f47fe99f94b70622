"""YAML for spec and profile files, with the limits a JSON reader has by nature.

YAML anchors let a few hundred bytes expand into a tree of billions of
nodes ("billion laughs") or into a cycle, and deep nesting exhausts the
parser's recursion; the schema check or any walk over such a document
would then hang or crash.  :func:`load` refuses all three with a
``yaml.YAMLError``, which every caller already reports as "not valid YAML".
"""

from __future__ import annotations

from typing import Any, Dict, List, Set, Tuple

import yaml

MAX_NODES = 2_000_000  # a 4096-card spec is ~150,000 nodes; readers cap files at 16 MiB anyway


def load(data: "bytes | str") -> Any:
    """``yaml.safe_load`` (libyaml when available) with aliases and depth bounded.

    Raises:
        yaml.YAMLError: invalid YAML, nesting too deep, aliases that expand
            past :data:`MAX_NODES` nodes, or a recursive alias.
    """
    try:
        doc = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except RecursionError:
        raise yaml.YAMLError("nesting too deep") from None
    tree_size(doc)
    return doc


def tree_size(doc: Any, limit: int = MAX_NODES) -> int:
    """Nodes of *doc* counted as a tree (shared subtrees once per use), without recursion.

    Raises:
        yaml.YAMLError: over *limit*, or *doc* contains itself.
    """
    sizes: Dict[int, int] = {}
    in_progress: Set[int] = set()
    stack: List[Tuple[Any, bool]] = [(doc, False)]
    while stack:
        node, done = stack.pop()
        if not isinstance(node, (list, dict)):
            continue
        key = id(node)
        kids = list(node.values()) if isinstance(node, dict) else node
        if done:
            in_progress.discard(key)
            total = 1 + sum(sizes.get(id(k), 1) for k in kids)
            if total > limit:
                raise yaml.YAMLError(f"aliases expand to more than {limit} nodes")
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if key in in_progress:
            raise yaml.YAMLError("a recursive alias (an anchor used inside itself)")
        in_progress.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in kids)
    return sizes.get(id(doc), 1)
