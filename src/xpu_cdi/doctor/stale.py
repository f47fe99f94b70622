"""spec-fresh: is each spec what ``xpu-cdi generate`` would write now?

The comparison is ``generate.check.differences`` (the one behind
``generate --check``).  The options a spec was generated with are read back
from the spec itself (naming strategy, ``all`` device, hook path, env form,
topology annotations, kind override), so a spec made with non-default
options is only called stale when the host changed under it.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List

from ..errors import XpuCdiError
from ..generate import check as _check
from ..generate import edits as _edits
from ..generate import spec as _spec
from ..model import PCI_ADDRESS, HostView
from ..topology import ANNOTATION_PREFIX
from .context import Context
from .result import Result, fail, ok, warn
from .specs import ours



def _hooks(spec: Dict[str, Any]) -> List[Dict[str, Any]]:
    edits = spec.get("containerEdits") or {}
    return [h for h in edits.get("hooks") or [] if isinstance(h, dict)]


def infer_options(spec: Dict[str, Any], view: HostView) -> _spec.SpecOptions:
    """The ``generate`` options that would have produced *spec* (annotations left empty)."""
    names = [str(d.get("name")) for d in spec.get("devices") or [] if isinstance(d, dict)]
    strategies: List[str] = []
    for name in names:
        strategy = "pci" if PCI_ADDRESS.match(name) else "index" if name.isdigit() else ""
        if strategy and strategy not in strategies:
            strategies.append(strategy)
    ours_hook = [h for h in _hooks(spec) if (h.get("args") or [""])[0] == "xpu-cdi-hook"]
    hook = str(ours_hook[0]["path"]) if ours_hook else \
        os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "xpu-cdi-hook")
    timeout = int(ours_hook[0].get("timeout", 10)) if ours_hook else 10
    env = (spec.get("containerEdits") or {}).get("env") or []
    vendor, _sep, cls = str(spec.get("kind", "")).partition("/")
    return _spec.SpecOptions(
        edit=_edits.EditOptions(hook_path=hook, hook_timeout=timeout,
                                ld_library_path_env=any(str(e).startswith("LD_LIBRARY_PATH=") for e in env)),
        name_strategies=tuple(strategies) or ("index",), all_device="all" in names,
        vendor=vendor if vendor != view.profile.vendor else None,
        device_class=cls if cls != view.profile.device_class else None)


def _with_topology(spec: Dict[str, Any]) -> bool:
    return any(k.startswith(ANNOTATION_PREFIX) for d in spec.get("devices") or [] if isinstance(d, dict)
               for k in (d.get("annotations") or {}))


def check_fresh(ctx: Context) -> List[Result]:
    """spec-fresh: each of our specs matches a fresh build from what is on the host now."""
    out = []
    for st in ctx.states:
        files = [sf for sf in ours(ctx, st) if sf.spec]
        if not files:
            continue
        if st.view is None:
            why = st.error or "no cards found"
            out.append(fail("spec-fresh", f"{st.profile.name}: cannot rebuild the spec to compare ({why}), so "
                                          f"{', '.join(repr(sf.path) for sf in files)} describe(s) cards "
                                          f"that are not usable now",
                            "fix the driver problems above, then run `xpu-cdi generate`"))
            continue
        for sf in files:
            assert sf.spec is not None
            try:
                opts = infer_options(sf.spec, st.view)
                if _with_topology(sf.spec):
                    from .. import topology

                    opts = topology.spec_options(st.view, opts, ctx.opts.roots.sysfs)
                fresh = _spec.build(st.view, opts)
            except XpuCdiError as err:
                out.append(warn("spec-fresh", f"{sf.path!r}: not compared: {err}",
                                "run `xpu-cdi generate` with the options you use"))
                continue
            diffs = _check.differences(sf.spec, fresh)
            if diffs:
                out.append(fail("spec-fresh", f"{sf.path!r} is stale: {'; '.join(diffs)}",
                                "run `xpu-cdi generate` (cards, nodes or driver files changed since it was "
                                "written; a udev rule or systemd path unit can do it on every change)"))
            else:
                out.append(ok("spec-fresh", f"{sf.path!r} matches the host ({len(st.view.cards)} card(s))"))
    return out
