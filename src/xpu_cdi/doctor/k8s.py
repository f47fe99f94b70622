"""RuntimeClass check: the handler a RuntimeClass names must be a runtime
handler this node's CRI runtime defines (checked from a manifest file, no
cluster access needed)."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

from . import configs
from .context import Context
from .result import Result, fail, ok, warn

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def runtimeclasses(path: str) -> List[Tuple[str, Any]]:
    """``(name, handler)`` of every RuntimeClass in a (multi-document) YAML manifest.

    Raises:
        OSError: the file cannot be read.
        ValueError: not a regular file, over 4 MiB, or a document over the bounds (xpu_cdi.bounded).
        yaml.YAMLError: it is not YAML.
    """
    import yaml

    from .. import bounded

    docs = list(yaml.load_all(bounded.read(path, 4 << 20), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    for doc in docs:
        bounded.check_tree(doc, max_nodes=bounded.MAX_SETTINGS_NODES)
    out = []
    for doc in docs:
        items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
        for item in items or []:
            if isinstance(item, dict) and item.get("kind") == "RuntimeClass":
                out.append((str((item.get("metadata") or {}).get("name", "?")), item.get("handler")))
    return out


def _handlers(ctx: Context) -> Dict[str, List[str]]:
    """handler name -> the runtimes (with config path) that define it, over installed/configured runtimes."""
    out: Dict[str, List[str]] = {}
    for runtime in ("containerd", "crio", "docker"):
        cfg = configs.load(ctx, runtime)
        if cfg.error or not (runtime in ctx.versions or cfg.exists):
            continue
        for name in cfg.handlers:
            out.setdefault(name, []).append(f"{runtime} ({cfg.path})")
    return out


def check_runtimeclass(ctx: Context) -> List[Result]:
    """runtimeclass: each RuntimeClass's handler is defined by this node's runtime."""
    out = []
    handlers = _handlers(ctx)
    for path in ctx.opts.runtimeclasses:
        try:
            found = runtimeclasses(path)
        except Exception as err:  # noqa: BLE001 - unreadable or not YAML
            out.append(fail("runtimeclass", f"cannot read {path!r}: {' '.join(str(err).split())}",
                            "pass a RuntimeClass manifest (`kubectl get runtimeclass NAME -o yaml > FILE`)"))
            continue
        if not found:
            out.append(fail("runtimeclass", f"{path!r} holds no RuntimeClass",
                            "pass a RuntimeClass manifest (`kubectl get runtimeclass NAME -o yaml > FILE`)"))
        for name, handler in found:
            if not isinstance(handler, str) or not _DNS_LABEL.match(handler) or len(handler) > 63:
                out.append(fail("runtimeclass", f"RuntimeClass {name!r} in {path!r}: handler {handler!r} is not "
                                                f"a lowercase DNS label", "set handler: "
                                                f"{ctx.opts.runtime_name} (the runtime's handler name)"))
            elif not handlers:
                out.append(warn("runtimeclass", f"RuntimeClass {name!r} -> handler {handler!r}: no containerd, "
                                                f"CRI-O or Docker config found to compare with",
                                "pass --containerd-config or --crio-config"))
            elif handler not in handlers:
                have = ", ".join(sorted(handlers))
                target = ctx.opts.runtime_name if ctx.opts.runtime_name in handlers else sorted(handlers)[0]
                out.append(fail("runtimeclass", f"RuntimeClass {name!r} in {path!r} has handler {handler!r} but "
                                                f"this node's runtime defines only {have}: pods using it fail "
                                                f"with 'no runtime for \"{handler}\" is configured' or never "
                                                f"get the cards",
                                f"set handler: {target} in the RuntimeClass (it must equal the handler name in "
                                f"the runtime config), or "
                                f"`xpu-cdi runtime configure --runtime-name {handler}`"))
            else:
                out.append(ok("runtimeclass", f"RuntimeClass {name!r} -> handler {handler!r}, defined by "
                                              f"{', '.join(handlers[handler])}"))
    return out
