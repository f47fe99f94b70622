"""Read CDI spec directories the way the reference library does.

* Only ``*.json`` and ``*.yaml`` files directly inside a directory are specs.
* Directories are given lowest priority first (``/etc/cdi``, then
  ``/var/run/cdi``): a later directory's device replaces an earlier one.
* The same qualified device in two files of one directory drops both
  ("conflicting device").
* A broken file is reported and skipped; it never affects other files.

The Python tooling's reader (doctor, runtime configure, the device plugin);
the compiled hook and wrapper read spec dirs the same way in C, checked
against the same cases by the black-box tests of the binaries.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import bounded
from ..errors import SpecError

DEFAULT_DIRS = ("/etc/cdi", "/var/run/cdi")
INDEX_SUFFIX = ".xpu-cdi"  # the hook index beside a spec: CDI readers take only *.json and *.yaml
MAX_SPEC_BYTES = 16 << 20  # a spec of 4096 cards is ~2 MiB; anything near this is not ours
MAX_FILES = 4096


class Device:
    """A device found in a spec file."""

    __slots__ = ("qualified", "name", "kind", "path", "spec", "edits")

    def __init__(self, kind: str, name: str, path: str, spec: Dict[str, Any], edits: Dict[str, Any]):
        self.kind, self.name, self.path, self.spec, self.edits = kind, name, path, spec, edits
        self.qualified = f"{kind}={name}"


class Registry:
    """The devices of a set of spec directories, after precedence and conflicts."""

    def __init__(self, dirs: Sequence[str]) -> None:
        self.dirs = list(dirs)
        self.devices: Dict[str, Device] = {}
        self.specs: Dict[str, Dict[str, Any]] = {}  # path -> spec
        self.indexes: Dict[str, Dict[str, Any]] = {}  # kind -> hook index of the winning spec
        self.problems: List[str] = []  # one line per broken file or conflict


def _check(spec: Any, path: str) -> Tuple[str, List[Dict[str, Any]]]:
    """Structural checks the reference library makes before accepting a file."""
    if not isinstance(spec, dict):
        raise SpecError(f"spec {path!r}: expected an object at the top")
    for key in ("cdiVersion", "kind", "devices"):
        if key not in spec:
            raise SpecError(f"spec {path!r}: missing required field {key!r}")
    kind = spec["kind"]
    if not isinstance(kind, str) or kind.count("/") != 1:
        raise SpecError(f"spec {path!r}: invalid kind {kind!r} (write it as vendor/class, e.g. kunlunxin.com/xpu)")
    devices = spec["devices"]
    if not isinstance(devices, list) or not devices:
        raise SpecError(f"spec {path!r}: 'devices' must be a non-empty list")
    for dev in devices:
        if not isinstance(dev, dict) or not isinstance(dev.get("name"), str) \
                or not isinstance(dev.get("containerEdits"), dict):
            raise SpecError(f"spec {path!r}: every device needs a 'name' and 'containerEdits'")
        _check_edits(dev["containerEdits"], f"spec {path!r}: device {dev['name'][:64]!r}")
    edits = spec.get("containerEdits")
    if edits is not None and not isinstance(edits, dict):
        raise SpecError(f"spec {path!r}: 'containerEdits' must be an object")
    if edits is not None:
        _check_edits(edits, f"spec {path!r}: containerEdits")
    return kind, devices


# the fields every edit list's entries need; the reference library's strict
# parser refuses a file that breaks them too
_EDIT_FIELDS = {"deviceNodes": ("path",), "mounts": ("hostPath", "containerPath"), "hooks": ("hookName", "path")}


def _check_edits(edits: Dict[str, Any], where: str) -> None:
    env = edits.get("env")
    if env is not None and (not isinstance(env, list) or not all(isinstance(e, str) for e in env)):
        raise SpecError(f"{where}: 'env' must be a list of strings")
    for key, required in _EDIT_FIELDS.items():
        items = edits.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            raise SpecError(f"{where}: {key!r} must be a list")
        for item in items:
            if not isinstance(item, dict) or not all(isinstance(item.get(f), str) for f in required):
                raise SpecError(f"{where}: every entry of {key!r} needs {' and '.join(map(repr, required))}")


def _read(path: str) -> Any:
    try:
        data = bounded.read(path, MAX_SPEC_BYTES)
    except bounded.InputError as err:
        raise SpecError(f"spec {path!r}: {err}") from None
    if path.endswith(".yaml"):
        import yaml  # lazy: JSON specs, which generate writes, need no YAML parser

        from . import yamlload

        try:
            return yamlload.load(data)
        except yaml.YAMLError as err:
            raise SpecError(f"spec {path!r}: not valid YAML: {' '.join(str(err).split())[:300]}") from None
    try:
        return bounded.json_loads(data)
    except ValueError as err:
        raise SpecError(f"spec {path!r}: not valid JSON: {err}") from None


def _read_index(path: str) -> Optional[Dict[str, Any]]:
    try:
        data = bounded.read_json(path + INDEX_SUFFIX, MAX_SPEC_BYTES)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("xpuCdiIndex") == 1 else None


def _load_dir(d: str, reg: Registry) -> Dict[str, Device]:
    try:
        names = sorted(os.listdir(d))
    except FileNotFoundError:
        return {}
    except OSError as err:
        reg.problems.append(f"spec dir {d!r}: cannot list: {err.strerror}")
        return {}
    if len(names) > MAX_FILES:
        reg.problems.append(f"spec dir {d!r}: {len(names)} entries, only the first {MAX_FILES} read")
        names = names[:MAX_FILES]
    found: Dict[str, Device] = {}
    conflicts: Dict[str, List[str]] = {}
    for name in names:
        if not (name.endswith(".json") or name.endswith(".yaml")):
            continue
        path = os.path.join(d, name)
        index = _read_index(path)
        try:
            spec = _read(path)
            kind, devices = _check(spec, path)
        except SpecError as err:
            reg.problems.append(str(err))
            continue
        except OSError as err:
            reg.problems.append(f"spec {path!r}: cannot read: {err.strerror}")
            continue
        reg.specs[path] = spec
        if index is not None and index.get("kind") == kind:
            index = dict(index, specPath=path)
            reg.indexes.setdefault(d + "\0" + kind, index)
        for dev in devices:
            q = f"{kind}={dev['name']}"
            if q in found:
                conflicts.setdefault(q, [found[q].path]).append(path)
                continue
            found[q] = Device(kind, dev["name"], path, spec, dev["containerEdits"])
    for q, paths in conflicts.items():
        del found[q]
        reg.problems.append(f"conflicting device {q!r} in {', '.join(repr(p) for p in paths)}: "
                            f"both dropped; keep it in one file")
    return found


def load(dirs: Sequence[str] = DEFAULT_DIRS) -> Registry:
    """Read every spec in *dirs* (lowest priority first)."""
    reg = Registry(dirs)
    indexes: Dict[str, Dict[str, Any]] = {}
    for d in dirs:
        before = set(reg.indexes)
        reg.devices.update(_load_dir(d, reg))
        for key in set(reg.indexes) - before:
            indexes[key.partition("\0")[2]] = reg.indexes[key]  # later dir wins per kind
    reg.indexes = indexes
    return reg
