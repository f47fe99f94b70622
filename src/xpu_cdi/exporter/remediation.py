"""The remediation decisions of this node's daemons, as the exporter's counters.

A node daemon whose kinds have a remediation policy (:mod:`xpu_cdi.remedy`:
the DRA driver's ``--evict``) counts each decision in its status file, per
kind: ``kinds.<kind>.evictions`` and ``.restores``, each ``{reason: n}``.  The
exporter reads every status file beside its own (``/run/xpu-cdi/*.json``) at
each pass and sums them per kind and reason: the two pods of a rolling update
each count their own.  A daemon's counts start at 0 with its process (a
restart is a counter reset, which ``increase()`` and ``rate()`` allow for);
a kind whose policy evicts (``kinds.<kind>.remediation.evict``) has its
series from the start, at 0, so that the first decision is an increase.
The daemons themselves stay without an HTTP listener.
"""

from __future__ import annotations

import glob
import os
from typing import Dict, Tuple

from .. import bounded, remedy

ACTIONS = {"evictions": "evict", "restores": "restore"}  # status key -> the decision's action
MAX_BYTES = 1 << 20

Counts = Dict[Tuple[str, str, str], float]  # (action, kind, reason) -> decisions


def read(run_dir: str, own: str = "") -> Counts:
    """The decisions counted in the status files of *run_dir* (*own*: the exporter's, skipped); an
    unreadable or foreign file adds nothing."""
    out: Counts = {}
    for path in sorted(glob.glob(os.path.join(run_dir, "*.json"))):
        if own and os.path.abspath(path) == os.path.abspath(own):
            continue
        try:
            doc = bounded.read_json(path, MAX_BYTES)
        except (OSError, ValueError):
            continue  # being replaced, or not ours: the next pass reads it
        kinds = doc.get("kinds") if isinstance(doc, dict) else None
        for kind, state in (kinds.items() if isinstance(kinds, dict) else ()):
            policy = state.get("remediation") if isinstance(state, dict) else None
            if isinstance(policy, dict) and policy.get("evict") is True:
                for action, reasons in remedy.REASONS.items():
                    for reason in reasons:
                        out.setdefault((action, str(kind), reason), 0.0)
            for key, action in ACTIONS.items():
                counts = state.get(key) if isinstance(state, dict) else None
                for reason, n in (counts.items() if isinstance(counts, dict) else ()):
                    if isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 0:
                        k = (action, str(kind), str(reason))
                        out[k] = out.get(k, 0.0) + float(n)
    return out
