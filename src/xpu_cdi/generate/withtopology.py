"""``generate --with-topology``: a spec's options with its cards' topology annotations.

The annotations are :mod:`xpu_cdi.topology`'s (the PCIe tree under ``--sysfs-root``); this
module is where generate, and what compares a spec with a fresh build (``generate --check``'s
callers: doctor's spec-fresh, the device plugin's stale check), takes them, so that topology
itself imports nothing of generate.
"""

from __future__ import annotations

from typing import Any, Dict

from .. import topology
from ..model import HostView
from . import spec as _spec


def spec_options(view: HostView, opts: Any, sysfs_root: str) -> Any:
    """*opts* (``generate.spec.SpecOptions``) with the topology annotations of *view*'s cards.

    What ``generate --with-topology`` builds with; the annotations raise the
    spec's cdiVersion to 0.6.0.
    """
    names = {c.index: _spec.card_names(c, opts.name_strategies) for c in view.cards}
    return opts._replace(annotations=topology.device_annotations(topology.cards(view, sysfs_root), names))


def like_spec(spec: Dict[str, Any], view: HostView, opts: Any, sysfs_root: str) -> Any:
    """*opts* with *view*'s topology annotations when *spec* carries ours (it was written with
    ``--with-topology``): what ``generate`` would write now for a spec like it."""
    if not any(k.startswith(topology.ANNOTATION_PREFIX) for d in spec.get("devices") or [] if isinstance(d, dict)
               for k in (d.get("annotations") or {})):
        return opts
    return spec_options(view, opts, sysfs_root)
