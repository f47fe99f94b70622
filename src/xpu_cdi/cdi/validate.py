"""Check a CDI spec the way runtimes will: our strict schema
(``schemas/cdi-spec.schema.json``) plus the reference library's semantic
rules that no schema expresses (version vs content, names, env form)."""

from __future__ import annotations

from typing import Any, Dict, List

from .. import schema_files
from . import names, version

SCHEMA = "cdi-spec.schema.json"


def problems(spec: Any) -> List[str]:
    """Every problem with *spec*, one line each (empty when it is valid)."""
    try:
        out = schema_files.errors(SCHEMA, spec)
    except RecursionError:  # jsonschema descends recursively; no real spec nests this deep
        return ["nested too deeply to check (no CDI spec has more than a few levels)"]
    if not isinstance(spec, dict):
        return out or ["expected an object at the top"]
    kind = spec.get("kind")
    if isinstance(kind, str):
        p = names.kind_problem(kind)
        if p:
            out.append(p)
        elif len(kind.partition("/")[0]) < 2 or len(kind.partition("/")[2]) < 2:
            out.append(f"kind {kind!r}: released CDI libraries crash on a one-character vendor or class")
    ver = spec.get("cdiVersion")
    if isinstance(ver, str):
        out += _version_problems(spec, ver, well_formed=not out)
    seen = set()
    for dev in _list(spec.get("devices")):
        if isinstance(dev, dict) and isinstance(dev.get("name"), str):
            if dev["name"] in seen:
                out.append(f"device {dev['name']!r} defined twice")
            seen.add(dev["name"])
            p = names.name_problem(dev["name"])
            if p:
                out.append(p)
    for where, edits in _all_edits(spec):
        out += _edit_problems(where, edits)
    return list(dict.fromkeys(out))


def _version_problems(spec: Dict[str, Any], ver: str, well_formed: bool) -> List[str]:
    if ver.startswith("v"):
        return [f"cdiVersion {ver!r}: write it without the 'v' (e.g. \"0.5.0\")"]
    if ver not in version.KNOWN:
        return [f"cdiVersion {ver!r} is not a released CDI version ({', '.join(version.KNOWN)})"]
    if not well_formed:  # minimum() reads the content and assumes the schema's shapes
        return []
    need = version.minimum(spec)
    if version.parse(ver) < version.parse(need):
        return [f"cdiVersion {ver!r} is too low for the content: it needs at least {need!r}"]
    return []


def _list(value: Any) -> List[Any]:
    """*value* when it is a list, else nothing (the schema has reported it)."""
    return value if isinstance(value, list) else []


def _all_edits(spec: Dict[str, Any]) -> List[Any]:
    out = []
    if isinstance(spec.get("containerEdits"), dict):
        out.append(("containerEdits", spec["containerEdits"]))
    for i, dev in enumerate(_list(spec.get("devices"))):
        if isinstance(dev, dict) and isinstance(dev.get("containerEdits"), dict):
            out.append((f"devices[{i}].containerEdits", dev["containerEdits"]))
    return out


def _edit_problems(where: str, edits: Dict[str, Any]) -> List[str]:
    out = []
    for e in _list(edits.get("env")):
        if isinstance(e, str) and (e.find("=") < 1):
            out.append(f"{where}.env: {e!r} must be KEY=VALUE with a non-empty KEY")
    for i, hook in enumerate(_list(edits.get("hooks"))):
        if isinstance(hook, dict) and hook.get("timeout") == 0:
            out.append(f"{where}.hooks[{i}].timeout: 0 is invalid; leave it out or use a positive number")
    for i, node in enumerate(_list(edits.get("deviceNodes"))):
        if isinstance(node, dict) and node.get("type") in ("c", "b") and \
                ("major" in node) != ("minor" in node):
            out.append(f"{where}.deviceNodes[{i}]: give both major and minor, or neither")
    return out


def load_file(path: str) -> Any:
    """Parse a spec file as JSON or YAML by its extension (raises ValueError,
    yaml.YAMLError, OSError); regular files of at most 16 MiB, depth and YAML aliases bounded."""
    from .. import bounded
    from .registry import MAX_SPEC_BYTES

    data = bounded.read(path, MAX_SPEC_BYTES)
    if path.endswith(".json"):
        return bounded.json_loads(data)
    from . import yamlload

    return yamlload.load(data)
