"""Shipped vendor data: the profiles here and the sharing templates in ``partitions/``.

The YAML files are the source; each directory's ``builtin.json`` holds their documents by name
(``scripts/render-profiles.py`` writes it, a test compares), so that generate and the node
daemons read the shipped data without a YAML parser.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any, Callable, Dict, List

DIR = os.path.dirname(os.path.abspath(__file__))  # not importlib.resources: ~10 ms and 0.8 MiB


def yaml_names(directory: str) -> List[str]:
    """The names of the YAML files in *directory*, sorted."""
    return sorted(n[:-5] for n in os.listdir(directory) if n.endswith(".yaml"))


def render_json(directory: str, load: Callable[[str], Any]) -> str:
    """What *directory*'s ``builtin.json`` must hold: each YAML file's document (by *load*) by name."""
    docs = {}
    for name in yaml_names(directory):
        with open(os.path.join(directory, f"{name}.yaml"), encoding="utf-8") as f:
            docs[name] = load(f.read())
    return json.dumps(docs, indent=1, ensure_ascii=False) + "\n"


@functools.lru_cache(maxsize=None)  # package data does not change under a process; read it once
def documents(directory: str) -> Dict[str, Any]:
    """*directory*'s ``builtin.json``: the documents by name (shared: callers must not change them)."""
    with open(os.path.join(directory, "builtin.json"), "rb") as f:
        return json.loads(f.read())
