"""One refresh of the spec directory: the generate pipeline, written only
where the content changed.

Used by ``xpu-cdi watch`` (after each debounced trigger) and by ``watch
--once`` (the systemd refresh unit and the package scripts).  It goes
through the same steps as ``generate`` (``options.plan -> spec.build ->
spec.write``), compares the bytes with the files on disk, removes specs of
kinds whose cards are gone, and records what it wrote in a manifest so that
the package's removal scripts delete exactly that.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence

from .. import atomic
from ..errors import DiscoveryError, SpecError
from ..generate import check as _check
from ..generate import spec as _spec
from ..log import WARNING, Log
from ..model import Discovery, Profile


@dataclass(frozen=True)
class Target:
    """What a refresh produces: the generate pipeline with fixed options.

    ``plan`` is ``generate.options.plan`` bound to the profiles and roots; ``select``
    returns the profiles the watch cares about (for event matching and for
    recognising specs of kinds that vanished).
    """

    plan: Callable[[], Discovery]
    select: Callable[[], List[Profile]]
    spec_dir: str
    fmt: str
    options: _spec.SpecOptions
    manifest: Optional[str] = None


def _read(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _index_matches(path: str, expected: Dict[str, Any]) -> bool:
    """The hook index beside *path* says what *expected* says."""
    data = _read(path + _spec.INDEX_SUFFIX)
    try:
        current = json.loads(data) if data is not None else None
    except ValueError:
        return False
    return isinstance(current, dict) and current == expected


def read_manifest(path: Optional[str]) -> List[str]:
    """The files a watch run recorded as written (one absolute path per line)."""
    data = _read(path) if path else None
    return [line for line in (data or b"").decode().splitlines() if line.startswith("/")]


def _save_manifest(path: Optional[str], files: Sequence[str]) -> None:
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o755, exist_ok=True)
    atomic.write_atomic(path, "".join(f"{p}\n" for p in sorted(set(files))).encode())


def _remove(path: str) -> bool:
    removed = False
    for p in (path, path + _spec.INDEX_SUFFIX):
        try:
            os.unlink(p)
            removed = True
        except FileNotFoundError:
            pass
    return removed


def _ours(path: str, profiles: FrozenSet[str]) -> bool:
    """A spec xpu-cdi wrote for one of *profiles* (it has our hook index)."""
    try:
        index = json.loads(_read(path + _spec.INDEX_SUFFIX) or b"null")
    except ValueError:
        return False
    return isinstance(index, dict) and index.get("profile") in profiles


def refresh(target: Target, log: Log) -> int:
    """Run the generate pipeline once and bring the spec directory in line.

    Writes each kind's spec only when its content changed; removes xpu-cdi
    specs of the watched profiles whose cards are all gone, and a spec of
    the same kind in the other format (two files defining the same devices
    in one directory make runtimes drop both).  Logs one line per change.

    Returns:
        The number of files written or removed.

    Raises:
        XpuCdiError: profiles cannot be loaded or a spec cannot be written.
    """
    try:
        return _refresh(target, log)
    except OSError as err:
        raise SpecError(f"spec dir {target.spec_dir!r}: {err.strerror or err} ({err.filename})") from err


def _refresh(target: Target, log: Log) -> int:
    try:
        found = target.plan()
    except DiscoveryError:
        found = Discovery(())  # no cards at all: not an error for a watcher
    for _name, failure in found.failures:
        log(f"skipped: {failure}", WARNING)
    views = found.views
    # a profile that failed this time keeps its spec: its cards may only be
    # half-loaded, and removing the spec would fail containers that run fine
    failed = {name for name, _f in found.failures}
    watched = frozenset(p.name for p in target.select() if p.name not in failed)
    manifest = set(read_manifest(target.manifest))
    changes = 0
    keep = set()
    for view in views:
        spec = _spec.build(view, target.options)
        path = os.path.join(target.spec_dir, _spec.file_name(spec["kind"], target.fmt))
        keep.add(path)
        index = dict(_spec.hook_index(view, spec, target.options), spec=os.path.basename(path))
        data = _spec.dumps(spec, target.fmt)
        old = _read(path)
        if old == data and _index_matches(path, index):
            continue
        why = "new spec" if old is None else "; ".join(_check.differences(_old_spec(path), spec)) or "reformatted"
        if not os.path.isdir(target.spec_dir):
            os.makedirs(target.spec_dir, mode=0o755)
            manifest.add(os.path.join(os.path.abspath(target.spec_dir), ""))  # ours to remove when empty
        _spec.write(path, spec, target.fmt, _spec.hook_index(view, spec, target.options))
        manifest.update((path, path + _spec.INDEX_SUFFIX))
        log(f"wrote {path}: {spec['kind']}, {len(view.cards)} card(s), {why}")
        changes += 1
    for name in sorted(_listdir(target.spec_dir)):
        path = os.path.join(target.spec_dir, name)
        if path in keep or not name.endswith((".json", ".yaml")) or not _ours(path, watched):
            continue
        kinds = {os.path.splitext(os.path.basename(k))[0] for k in keep}
        reason = ("same kind written as " + target.fmt if os.path.splitext(name)[0] in kinds
                  else "its cards are gone")
        if _remove(path):
            manifest.difference_update((path, path + _spec.INDEX_SUFFIX))
            log(f"removed {path}: {reason}")
            changes += 1
    if target.manifest and (changes or not os.path.exists(target.manifest)):
        _save_manifest(target.manifest, [p for p in manifest if os.path.exists(p)])
    return changes


def _old_spec(path: str) -> Optional[Dict[str, Any]]:
    try:
        return _check.read(path)
    except SpecError:
        return None  # unreadable: differences() reports "no spec on disk"


def _listdir(d: str) -> List[str]:
    try:
        return os.listdir(d)
    except FileNotFoundError:
        return []
