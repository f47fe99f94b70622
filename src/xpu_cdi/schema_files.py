"""Access to the JSON schemas shipped in ``schemas/`` (package ``xpu_cdi.schemas``)."""

from __future__ import annotations

import functools
import json
import os
from typing import Any, Dict


# not pathlib: it brings urllib.parse and ipaddress, ~0.8 MiB of a node daemon that never reads a schema
SOURCE_TREE_SCHEMAS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                   "schemas")


@functools.lru_cache(maxsize=None)
def load(name: str) -> Dict[str, Any]:
    """Return the parsed schema ``schemas/<name>``."""
    from importlib import resources  # lazy: it costs `generate` ~10 ms, only validation needs it

    try:
        text = resources.files("xpu_cdi.schemas").joinpath(name).read_text(encoding="utf-8")
    except ModuleNotFoundError:  # run from a source tree (PYTHONPATH=src): schemas/ sits beside src/
        with open(os.path.join(SOURCE_TREE_SCHEMAS, name), encoding="utf-8") as f:
            text = f.read()
    data: Dict[str, Any] = json.loads(text)
    return data


def errors(schema_name: str, instance: Any) -> list:
    """All schema violations of *instance*, as ``"at <path>: <message>"`` lines."""
    import jsonschema  # lazy: only the CLI side validates

    validator = jsonschema.Draft202012Validator(load(schema_name))
    out = []
    for err in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path)):
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        out.append(f"at {where.lstrip('.') or '(top)'}: {err.message}")
    return out
