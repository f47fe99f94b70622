"""spec-fresh: is each spec what ``xpu-cdi generate`` would write now?

The comparison is ``generate.check.differences`` (the one behind
``generate --check``).  The options a spec was generated with are read back
from the spec itself (``generate.check.infer_options``, with
``generate.withtopology.like_spec`` for its topology annotations), so a spec made with
non-default options is only called stale when the host changed under it.
"""

from __future__ import annotations

from typing import List

from ..errors import XpuCdiError
from ..generate import check as _check
from ..generate import spec as _spec
from ..generate import withtopology
from .context import Context
from .result import Result, fail, ok, warn
from .specs import ours


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
                opts = withtopology.like_spec(sf.spec, st.view, _check.infer_options(sf.spec, st.view),
                                              ctx.opts.roots.sysfs)
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
