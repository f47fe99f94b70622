"""Node labels saying what a node has: one computation, two ways to apply it
(an NFD feature file, :mod:`.nfd`; the Node through the API, :mod:`.node`).

The inventory is the host's, found as ``generate`` and ``topology --labels``
find it (discovery of each profile's cards, their PCIe placement), so the
labels exist before any spec does: the DaemonSets select nodes by them.
Keys are under one prefix (``xpu-cdi.io/``), the kind's class first::

    xpu-cdi.io/present=true                  any card of ours on the node
    xpu-cdi.io/<class>.present=true          per kind (xpu, npu, ...)
    xpu-cdi.io/<class>.count=8
    xpu-cdi.io/<class>.model=Ascend310P      when every card is one model (cardmodel)
    xpu-cdi.io/<class>.memory=96Gi           when the profile knows the model's memory
    xpu-cdi.io/<class>.driver-version=24.1.0-rc2
    xpu-cdi.io/<class>.switch-groups=0-3_4-7 ... the topology labels (topology.labels)
    xpu-cdi.io/<class>.hccs-domains=2        interconnect domains, and cards in each (interconnect)
    xpu-cdi.io/<class>.hccs-domain-size=8
    xpu-cdi.io/<class>.device-ips=16         cards with a RoCE address (Ascend: /etc/hccn.conf)

Values go through :func:`sanitise` (docs/topology.md, "Node labels").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .. import cardmodel, interconnect
from .. import topology as _topology
from ..driverversion import read_driver_version
from ..model import HostView

PREFIX = _topology.ANNOTATION_PREFIX  # "xpu-cdi.io/": every key of ours under it (which ones: ours())
MAX_VALUE = 63
_OUTSIDE = re.compile(r"[^A-Za-z0-9._-]+")
_EDGE = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")


def sanitise(text: str) -> str:
    """A valid label value from *text*: each run of characters outside ``[A-Za-z0-9._-]``
    becomes one ``_``, the first 63 characters are kept, then anything not alphanumeric
    is trimmed from both ends; ``""`` when nothing is left (the label is then left out)."""
    out = _OUTSIDE.sub("_", text.strip())[:MAX_VALUE]
    return _EDGE.sub("", out)


_OURS = re.compile(r"^xpu-cdi\.io/(present|[A-Za-z0-9_-]+\.[A-Za-z0-9_.-]+)$")


def ours(key: str) -> bool:
    """Whether a label key is one this module owns (and may remove): ``xpu-cdi.io/present`` and the
    ``xpu-cdi.io/<class>.<fact>`` keys; an admin's ``xpu-cdi.io/kubernetes-allocation`` is not
    (deploy/labels' admission policy holds the token to the same rule)."""
    return bool(_OURS.match(key))


@dataclass(frozen=True)
class Roots:
    """Where the host is read: sysfs (models, topology), proc and the driver root (version files)."""

    sysfs: str = "/"
    proc: str = "/"
    driver: str = "/"


def kind_labels(view: HostView, roots: Roots) -> Tuple[Dict[str, str], List[str]]:
    """The labels of one discovered kind, and a note per label left out."""
    profile = view.profile
    kind = profile.kind
    prefix = f"{PREFIX}{kind.partition('/')[2]}."
    notes: List[str] = []
    facts: Dict[str, str] = {"present": "true", "count": str(len(view.cards))}
    models = [cardmodel.of_card(profile, roots.sysfs, c.pci) for c in view.cards]
    names = sorted({m.name for m in models if m is not None})
    if len(names) == 1 and all(m is not None for m in models):
        facts["model"] = names[0]
        if models[0] is not None and models[0].memory:
            facts["memory"] = models[0].memory
    elif profile.models:
        notes.append(f"{prefix}model left out: " + (f"the cards are of several models ({', '.join(names)})"
                     if len(names) > 1 else "a card's model is not known (the host's functions are of several "
                     "models, or of none the profile lists)"))
    version = read_driver_version(profile, roots.proc, roots.driver)
    if version:
        facts["driver-version"] = version
    links = interconnect.read(profile, [c.index for c in view.cards], roots.sysfs, roots.driver)
    if links.domain_size:  # server-level facts only: the per-card ones are the DRA driver's attributes
        facts["hccs-domains"] = str(links.domains)
        facts["hccs-domain-size"] = str(links.domain_size)
    if links.source:
        facts["device-ips"] = str(sum(1 for link in links.cards.values() if link.device_ip))
    out: Dict[str, str] = {}
    for key, raw in facts.items():
        value = sanitise(raw)
        if value:
            out[prefix + key] = value
        else:
            notes.append(f"{prefix}{key} left out: {raw!r} has nothing a label value may hold")
    topo, topo_notes = _topology.labels(_topology.cards(view, roots.sysfs))
    out.update(topo)
    return out, notes + topo_notes


def compute(views: Sequence[HostView], roots: Roots) -> Tuple[Dict[str, str], List[str]]:
    """Every label of the node from what discovery found (*views*: one per kind with cards)."""
    out: Dict[str, str] = {}
    notes: List[str] = []
    for view in sorted(views, key=lambda v: v.profile.kind):
        labels, more = kind_labels(view, roots)
        out.update(labels)
        notes += more
    if out:
        out[PREFIX + "present"] = "true"
    return out, notes


def changes(current: Dict[str, str], wanted: Dict[str, str]) -> Dict[str, Optional[str]]:
    """The merge patch of ``metadata.labels`` taking *current* to *wanted*: ours only, a
    removed label as None; a label outside our prefix is never in it."""
    patch: Dict[str, Optional[str]] = {k: v for k, v in wanted.items() if ours(k) and current.get(k) != v}
    patch.update({k: None for k in current if ours(k) and k not in wanted})
    return patch
