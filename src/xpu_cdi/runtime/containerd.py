"""containerd's ``config.toml``: read it (``doctor`` uses the readers) and
add the ``xpu`` runtime handler and the CDI settings.

Where things live depends on the file's ``version``:

=======  ================  ==========================================
version  containerd        CRI runtime settings (CDI, handlers)
=======  ================  ==========================================
1        1.x (deprecated)  ``[plugins.cri]``
2        1.x               ``[plugins."io.containerd.grpc.v1.cri"]``
3        2.0 - 2.2         ``[plugins."io.containerd.cri.v1.runtime"]``
4        2.3 and later     the same (version 4 moved only the server settings, ``[grpc]``...)
=======  ================  ==========================================

``enable_cdi`` exists from 1.7 (off by default) and is on by default in 2.x;
containerd 1.6 ignores it and needs the handler (the wrapper) instead.
"""

from __future__ import annotations

import copy
import fnmatch
import glob
import os
import shutil
from typing import Any, Dict, List, Optional, Tuple

import tomlkit

from ..cdi import registry
from . import release as _release
from . import tomlconf
from .tomlconf import get, load  # noqa: F401 - load is part of the reader API

DEFAULT_CONFIG = "/etc/containerd/config.toml"
CRI_PLUGIN = {1: "cri", 2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime",
              4: "io.containerd.cri.v1.runtime"}
RUNC_SHIM = "io.containerd.runc.v2"
ANNOTATIONS = "cdi.k8s.io/*"
DEFAULT_SPEC_DIRS = list(registry.DEFAULT_DIRS)  # the runtime's default: CDI's own
CDI_ON_BY_DEFAULT = (2, 0, 0)  # the first release whose enable_cdi defaults to true


def version(doc: Any) -> int:
    """The config version as containerd reads it: a file without ``version`` is 1."""
    v = get(doc, ["version"], 1)
    return v if v in CRI_PLUGIN else 1


def installed_version() -> Optional[str]:
    """``containerd --version``'s release (``1.6.20``), or None if not installed."""
    path = shutil.which("containerd")
    found = _release.probe(path) if path else None
    return ".".join(map(str, found)) if found else None


def version_for_release(release: Optional[str]) -> int:
    """The config version to write for a new file: 3 for containerd 2.x, else 2."""
    return 3 if release and int(release.split(".")[0]) >= 2 else 2


def cri_keys(doc: Any) -> List[str]:
    """Key path of the table that holds ``enable_cdi`` and ``containerd.runtimes``."""
    return ["plugins", CRI_PLUGIN[version(doc)]]


def cdi_enabled(doc: Any, release: Optional[Tuple[int, ...]] = None) -> bool:
    """Whether CDI is on (effective value when ``enable_cdi`` is unset).
    containerd 1.6 has no CDI whatever this says.

    Args:
        doc: the parsed config.
        release: the installed containerd release, when known: its default
            decides (on from 2.0, which also migrates version 2 files);
            without it the file's version does (only 2.x reads version 3 or 4).
    """
    value = get(doc, cri_keys(doc) + ["enable_cdi"])
    if value is not None:
        return bool(value)
    return release >= CDI_ON_BY_DEFAULT if release is not None else version(doc) >= 3


def cdi_spec_dirs(doc: Any) -> List[str]:
    """The CDI spec dirs containerd reads (its default when unset)."""
    return list(get(doc, cri_keys(doc) + ["cdi_spec_dirs"]) or DEFAULT_SPEC_DIRS)


def handlers(doc: Any) -> Dict[str, Dict[str, Any]]:
    """Runtime handlers by name (plain dicts: ``runtime_type``, ``options``...)."""
    found = get(doc, cri_keys(doc) + ["containerd", "runtimes"], {})
    return {k: v for k, v in found.items() if isinstance(v, dict)}


def binaries(doc: Any) -> Dict[str, str]:
    """Handler name -> the binary it runs (``options.BinaryName``; ``""``: the
    runc shim's default, runc on PATH), with containerd's built-in ``runc``
    handler where the file does not define one."""
    out = {name: str(get(h, ["options", "BinaryName"]) or "") for name, h in handlers(doc).items()}
    # the file overlays the built-in handler (naming other handlers drops it, see configure(),
    # but then the CRI plugin loads only with another default_runtime_name): count it as there
    out.setdefault("runc", "")
    return out


def default_runtime(doc: Any) -> str:
    """``default_runtime_name`` (containerd's default is ``runc``)."""
    return str(get(doc, cri_keys(doc) + ["containerd", "default_runtime_name"]) or "runc")


def imports(doc: Any) -> List[str]:
    """The ``imports`` list (drop-in files or globs)."""
    return [str(i) for i in get(doc, ["imports"], []) or []]


def load_merged(path: str) -> Dict[str, Any]:
    """*path* (a plain dict; empty when missing) with every file its ``imports``
    name merged over it in order: entries relative to the file's directory,
    globs sorted.

    Tables merge key by key, as containerd 2.x merges them.  containerd 1.x
    replaces a plugin's whole table with an imported one instead; this does
    not model that: a setting counts in whichever file it stands.

    Raises:
        RuntimeConfigError: the file or an import cannot be read or parsed.
    """
    out: Dict[str, Any] = load(path).unwrap()
    for pattern in imports(out):
        pattern = pattern if os.path.isabs(pattern) else os.path.join(os.path.dirname(path), pattern)
        for extra in sorted(glob.glob(pattern)):
            tomlconf.merge(out, load(extra).unwrap())
    return out


def handler_for(doc: Any, name: str, wrapper: str) -> Dict[str, Any]:
    """The ``name`` handler: the runc handler's settings (default runtime's if
    it is a runc one, else ``runc``) with ``BinaryName`` = *wrapper* and the
    ``cdi.k8s.io/*`` annotations passed through to the OCI spec.

    Without the annotation pass-through, containerd's CRI drops a device
    plugin's ``cdi.k8s.io/`` annotations before the runtime sees them.
    """
    found = handlers(doc)
    source = None
    for cand in (default_runtime(doc), "runc"):
        h = found.get(cand)
        if cand != name and h and str(h.get("runtime_type", RUNC_SHIM)).startswith("io.containerd.runc."):
            source = h
            break
    new = copy.deepcopy(source) if source else {}
    if not str(new.get("runtime_type", "")).startswith("io.containerd.runc."):
        new["runtime_type"] = RUNC_SHIM
    annotations = [str(a) for a in new.get("container_annotations") or []]
    if ANNOTATIONS not in annotations:
        annotations.append(ANNOTATIONS)
    new["container_annotations"] = annotations
    options = new.get("options") if isinstance(new.get("options"), dict) else {}
    options["BinaryName"] = wrapper
    new["options"] = options
    # plain scalars first, tables last, as TOML needs
    return dict(sorted(new.items(), key=lambda kv: isinstance(kv[1], dict)))


def configure(doc: Any, name: str, wrapper: str, enable_cdi: bool, set_as_default: bool,
              spec_dirs: List[str], new_version: int, source: Any = None) -> List[str]:
    """Add the handler (and CDI settings) to *doc* in place.

    Args:
        doc: the parsed config (possibly empty).
        name: handler name (the RuntimeClass handler).
        wrapper: absolute path of ``xpu-container-runtime``.
        enable_cdi: also set ``enable_cdi`` and ``cdi_spec_dirs``.
        set_as_default: make the handler ``default_runtime_name``.
        spec_dirs: CDI spec dirs for ``cdi_spec_dirs``.
        new_version: the version to write when *doc* is empty.
        source: the config the runc handler is copied from (default *doc*;
            the main file when *doc* is a drop-in).

    Returns:
        Notes for the user (one line each).
    """
    notes: List[str] = []
    if not doc:
        doc.add("version", new_version)
    elif "version" not in doc:
        notes.append("the file has no 'version': containerd reads it as version 1 ([plugins.cri])")
    cri = tomlconf.ensure_table(doc, cri_keys(doc))
    if enable_cdi:
        tomlconf.set_value(cri, "enable_cdi", True)
        tomlconf.set_value(cri, "cdi_spec_dirs", list(spec_dirs))
    ctr = tomlconf.ensure_table(cri, ["containerd"], explicit=set_as_default)
    runtimes = tomlconf.ensure_table(ctr, ["runtimes"], explicit=False)
    source = doc if source is None else source
    wanted = handler_for(source, name, wrapper)
    if name in runtimes and isinstance(runtimes[name], dict):
        # ours, but keep what an admin added: fill in missing settings, fix the rest
        current = get(runtimes, [name])
        updates = {k: v for k, v in wanted.items() if k not in current}
        if not str(current.get("runtime_type", "")).startswith("io.containerd.runc."):
            updates["runtime_type"] = RUNC_SHIM
        ann = [str(a) for a in current.get("container_annotations") or []]
        if ANNOTATIONS not in ann:
            updates["container_annotations"] = ann + [ANNOTATIONS]
        if isinstance(current.get("options"), dict):
            updates["options"] = {"BinaryName": wrapper}
        tomlconf.merge_into(runtimes[name], updates)
    else:
        if not handlers(doc) and not handlers(source):
            # containerd's built-in runc handler lives only as long as the file names
            # no handler at all: a file with just ours would lose it, and the CRI
            # plugin refuses to load when the default handler is missing
            tomlconf.add_table(runtimes, "runc", {"runtime_type": RUNC_SHIM})
            notes.append("added an explicit 'runc' handler: naming any handler replaces containerd's built-in one")
        tomlconf.add_table(runtimes, name, wanted)
    if set_as_default:
        tomlconf.set_value(ctr, "default_runtime_name", name)
    return notes


def drop_in_doc(main: Any, name: str, wrapper: str, enable_cdi: bool, set_as_default: bool,
                spec_dirs: List[str], new_version: int) -> Any:
    """The drop-in document for *main*'s version.

    containerd 2.x (version 3 or 4) merges imported tables key by key, so the
    drop-in holds only our settings; 1.x replaces a plugin's whole table with
    the imported one, so there the drop-in starts from a copy of *main*'s
    CRI table.
    """
    doc = tomlkit.document()
    v = version(main) if main else new_version
    doc.add("version", v)
    if v < 3:
        cri = get(main, ["plugins", CRI_PLUGIN[v]])
        if cri:
            plugins = tomlconf.ensure_table(doc, ["plugins"])
            tomlconf.add_table(plugins, CRI_PLUGIN[v], cri)
    configure(doc, name, wrapper, enable_cdi, set_as_default, spec_dirs, v, source=main)
    return doc


def ensure_import(main: Any, drop_in: str, new_version: int) -> bool:
    """Make *main* import *drop_in* unless an existing entry (or glob) covers it."""
    current = imports(main)
    if any(fnmatch.fnmatchcase(drop_in, pattern) for pattern in current):
        return False
    if not main:
        main.add("version", new_version)
    tomlconf.set_value(main, "imports", current + [drop_in])
    return True
