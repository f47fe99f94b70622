"""YAML for spec, profile and settings files, with the limits a JSON reader has by nature.

YAML anchors let a few hundred bytes expand into a tree of billions of
nodes ("billion laughs") or into a cycle, and deep nesting exhausts the
parser's recursion; the schema check, any walk over such a document or
an error message quoting it would then hang, crash or fill the memory.
:func:`load` refuses all three with a ``yaml.YAMLError``, which every caller
already reports as "not valid YAML" (the bounds: :mod:`xpu_cdi.bounded`).
"""

from __future__ import annotations

from typing import Any

import yaml

from ..bounded import MAX_DEPTH, MAX_NODES, check_tree
from ..errors import InputError


def load(data: "bytes | str", max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> Any:
    """``yaml.safe_load`` (libyaml when available) with aliases and depth bounded.

    Raises:
        yaml.YAMLError: invalid YAML, nesting deeper than *max_depth*, aliases
            that expand past *max_nodes* nodes, or a recursive alias.
    """
    try:
        doc = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except RecursionError:
        raise yaml.YAMLError(f"nested deeper than {max_depth} levels") from None
    try:
        check_tree(doc, max_depth, max_nodes)
    except InputError as err:
        raise yaml.YAMLError(str(err)) from None
    return doc
