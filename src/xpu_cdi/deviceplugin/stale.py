"""Is a spec the plugin serves stale for this host?  The ``generate --check`` test, for the log.

Run when the specs change (not on the health poll: it rediscovers the
host).  Health already marks the cards whose nodes moved; this names
everything else that differs (a card added, driver files gone), so that
the log says to re-run ``generate`` before a pod finds out.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from ..errors import XpuCdiError
from ..node.inventory import KindSet


def notes(kinds: Dict[str, KindSet], profiles: Sequence[Any], roots: Any) -> List[str]:
    """One line per spec that differs from what ``generate`` would write now.

    Args:
        kinds: what the plugin serves.
        profiles: the loaded profiles.
        roots: ``generate.discover.Roots`` of the host.
    """
    from ..generate import check as _check
    from ..generate import discover as _discover
    from ..generate import spec as _spec
    from ..generate import withtopology

    by_name = {p.name: p for p in profiles}
    out: List[str] = []
    for ks in kinds.values():
        prof = by_name.get(ks.profile or "")
        if prof is None:
            continue
        try:
            view = _discover.discover(prof, roots, auto=True)
        except XpuCdiError as err:
            out.append(f"{ks.kind}: cannot rediscover the host to compare the spec ({err})")
            continue
        for path in ks.spec_paths:
            spec = ks.specs[path]
            if view is None:
                out.append(f"{path} is stale: no {prof.name} cards are found on the host now "
                           f"(run `xpu-cdi generate`, or check the driver)")
                continue
            try:
                opts = withtopology.like_spec(spec, view, _check.infer_options(spec, view), roots.sysfs)
                fresh = _spec.build(view, opts)
            except XpuCdiError as err:
                out.append(f"{path}: not compared with the host: {err}")
                continue
            diffs = _check.differences(spec, fresh)
            if diffs:
                out.append(f"{path} is stale for this host: {'; '.join(diffs)} (run `xpu-cdi generate`)")
    return out
