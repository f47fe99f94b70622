"""CRI-O: read ``crio.conf`` plus its drop-ins (``doctor`` uses the
readers) and write our own drop-in with the ``xpu`` handler and
``cdi_spec_dirs``.

CRI-O always has CDI on; it reads ``crio.conf`` first, then every file of
``crio.conf.d`` in lexical order, later files winning key by key.  Our
drop-in belongs to xpu-cdi entirely and is rewritten whole on every run.
"""

from __future__ import annotations

import copy
import os
from typing import Any, Dict, List, Optional, Tuple

import tomlkit

from ..cdi import registry
from . import ocihooks, tomlconf
from .tomlconf import get, load

DEFAULT_CONFIG = "/etc/crio/crio.conf"
DEFAULT_DROP_IN = "/etc/crio/crio.conf.d/99-xpu-cdi.conf"
DEFAULT_SPEC_DIRS = list(registry.DEFAULT_DIRS)  # the runtime's default: CDI's own
HEADER = ("xpu-cdi: the runtime handler that runs xpu-container-runtime (CDI edits from the\n"
          "selection env vars and cdi.k8s.io/ annotations, then the real runtime), and the CDI\n"
          "spec dirs.  Written by `xpu-cdi runtime configure --runtime crio`: changes are lost.")


def sources(config: str, drop_in_dir: Optional[str], skip: Optional[str] = None) -> List[str]:
    """The files CRI-O reads, in order: *config* when it exists, then every
    file of *drop_in_dir* (any name) in lexical order, less *skip*."""
    out = [config] if os.path.exists(config) else []
    names = sorted(os.listdir(drop_in_dir)) if drop_in_dir and os.path.isdir(drop_in_dir) else []
    for name in names:
        path = os.path.join(drop_in_dir or "", name)
        if os.path.isfile(path) and os.path.abspath(path) != os.path.abspath(skip or ""):
            out.append(path)
    return out


def load_effective(config: str, drop_in_dir: Optional[str], skip: Optional[str] = None) -> Dict[str, Any]:
    """``crio.conf`` merged with the drop-ins of *drop_in_dir* as CRI-O merges them.

    Args:
        config: the main file (may be missing).
        drop_in_dir: the drop-in directory, or None.
        skip: a drop-in to leave out (ours, when we are about to replace it).

    Raises:
        RuntimeConfigError: a file cannot be read or parsed.
    """
    out: Dict[str, Any] = {}
    for path in sources(config, drop_in_dir, skip):
        tomlconf.merge(out, load(path).unwrap())
    return out


def handlers(doc: Any) -> Dict[str, Dict[str, Any]]:
    """Runtime handlers by name (``runtime_path``, ``runtime_type``, ``runtime_root``...)."""
    found = get(doc, ["crio", "runtime", "runtimes"], {}) or {}
    return {k: v for k, v in found.items() if isinstance(v, dict)}


def binary(name: str, handler: Dict[str, Any]) -> str:
    """The binary the handler *name* runs: ``runtime_path``, else *name* looked up on PATH."""
    return str(handler.get("runtime_path") or name)


def binaries(doc: Any) -> Dict[str, str]:
    """Handler name -> the binary it runs, with CRI-O's built-in ``runc``."""
    out = {name: binary(name, h) for name, h in handlers(doc).items()}
    out.setdefault("runc", "runc")
    return out


def default_runtime(doc: Any) -> Optional[str]:
    """``default_runtime`` if set (CRI-O's own default depends on its version)."""
    value = get(doc, ["crio", "runtime", "default_runtime"])
    return str(value) if value else None


def cdi_spec_dirs(doc: Any) -> List[str]:
    """The CDI spec dirs CRI-O reads (its default when unset)."""
    return list(get(doc, ["crio", "runtime", "cdi_spec_dirs"]) or DEFAULT_SPEC_DIRS)


def hooks_dirs(doc: Any) -> List[str]:
    """Where CRI-O looks for oci-hooks.d files."""
    return list(get(doc, ["crio", "runtime", "hooks_dir"]) or [ocihooks.DEFAULT_HOOKS_DIR])


def source_handler(effective: Dict[str, Any], name: str) -> Tuple[str, Dict[str, Any]]:
    """The OCI handler whose settings ours copies: ``runc`` (what the wrapper
    execs by default), else the default runtime, else ``crun``; ``("", {})`` if none."""
    found = handlers(effective)
    for cand in ("runc", default_runtime(effective), "crun"):
        h = found.get(cand or "")
        if cand and cand != name and h and h.get("runtime_type", "oci") == "oci":
            return cand, copy.deepcopy(h)
    return "", {}


def handler_for(effective: Dict[str, Any], name: str, wrapper: str) -> Dict[str, Any]:
    """Our handler: the source handler's settings with ``runtime_path`` = *wrapper*."""
    source = source_handler(effective, name)[1]
    new: Dict[str, Any] = {"runtime_path": wrapper, "runtime_type": "oci"}
    new.update({k: v for k, v in source.items() if k not in new and not isinstance(v, dict)})
    new.setdefault("runtime_root", "/run/runc")
    return new


def drop_in_doc(effective: Dict[str, Any], name: str, wrapper: str, set_as_default: bool,
                spec_dirs: List[str]) -> Any:
    """Our whole drop-in file as a TOML document."""
    doc = tomlkit.document()
    for line in HEADER.splitlines():
        doc.add(tomlkit.comment(line))
    runtime = tomlkit.table()
    runtime.add("cdi_spec_dirs", list(spec_dirs))
    if set_as_default:
        runtime.add("default_runtime", name)
    crio = tomlkit.table(is_super_table=True)
    crio.add("runtime", runtime)
    doc.add("crio", crio)
    tomlconf.add_table(tomlconf.ensure_table(runtime, ["runtimes"], explicit=False), name,
                       handler_for(effective, name, wrapper))
    return doc
