"""Build a CDI spec (a dict) from what discovery found, serialise it, and
write it with the hook index beside it."""

from __future__ import annotations

import json
import os
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .. import atomic
from ..cdi import names, version
from ..cdi.registry import INDEX_SUFFIX
from ..errors import SpecError
from ..model import Card, HostView
from . import edits as _edits

STRATEGIES = ("index", "pci")
INDEX_FORMAT = 1


class SpecOptions(NamedTuple):
    """Options of ``xpu-cdi generate`` that shape the spec."""

    edit: _edits.EditOptions
    name_strategies: Tuple[str, ...] = ("index",)
    all_device: bool = True
    vendor: Optional[str] = None
    device_class: Optional[str] = None
    annotations: Mapping[str, Mapping[str, str]] = MappingProxyType({})  # device name -> annotations


def kind_of(view: HostView, opts: SpecOptions) -> str:
    """The spec's kind, ``--vendor``/``--class`` overriding the profile's.

    Raises:
        SpecError: the resulting kind is not a valid CDI kind.
    """
    kind = f"{opts.vendor or view.profile.vendor}/{opts.device_class or view.profile.device_class}"
    problem = names.kind_problem(kind)
    if problem:
        raise SpecError(problem)
    return kind


def card_names(card: Card, strategies: Sequence[str]) -> List[str]:
    """The device names of one card under the naming strategies.

    Raises:
        SpecError: the pci strategy for a card whose PCI address is unknown.
    """
    out = []
    for strategy in strategies:
        if strategy == "index":
            out.append(str(card.index))
        elif strategy == "pci":
            if not card.pci:
                raise SpecError(f"card {card.index} ({card.nodes[0].host.path!r}) has no PCI address in "
                                f"sysfs: use --device-name-strategy index")
            out.append(card.pci)
        else:
            raise SpecError(f"unknown device name strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
    return out


def build(view: HostView, opts: SpecOptions) -> Dict[str, Any]:
    """The CDI spec for one profile's cards, at the minimum cdiVersion it needs."""
    devices: List[Dict[str, Any]] = []
    for card in view.cards:
        for name in card_names(card, opts.name_strategies):
            dev: Dict[str, Any] = {"name": name}
            if name in opts.annotations:
                dev["annotations"] = dict(opts.annotations[name])
            dev["containerEdits"] = _edits.card_edits(card)
            devices.append(dev)
    if opts.all_device:
        devices.append({"name": "all", "containerEdits": _edits.all_edits(view.cards)})
    spec: Dict[str, Any] = {"cdiVersion": "", "kind": kind_of(view, opts), "devices": devices}
    shared = _edits.shared_edits(view, opts.edit)
    if shared:
        spec["containerEdits"] = shared
    spec["cdiVersion"] = version.minimum(spec)
    return spec


def hook_index(view: HostView, spec: Dict[str, Any], opts: SpecOptions) -> Dict[str, Any]:
    """What the hook and the wrapper need beside the spec: how a container's
    environment selects cards (profiles are YAML, which the hook never parses)."""
    sel = view.profile.selection
    return {
        "xpuCdiIndex": INDEX_FORMAT,
        "kind": spec["kind"],
        "profile": view.profile.name,
        "selection": {"env": list(sel.env), "aliases": list(sel.alias_prefixes), "none": list(sel.none_values),
                      "all": list(sel.all_words), "ignoreCase": sel.ignore_case, "uuidsFrom": sel.uuids_from},
        "indices": {str(c.index): card_names(c, opts.name_strategies)[0] for c in view.cards},
        "all": "all" if opts.all_device else None,
        "knownSelection": known_selection(),
    }


def known_selection() -> Dict[str, str]:
    """Selection variable -> kind of the built-in, non-experimental profiles.

    Written into every index: one of them set with no spec of its kind means
    the container asked for cards this host cannot give, which the wrapper
    refuses rather than start the container without them.
    """
    from . import profile as _profile

    return {var: f"{p.vendor}/{p.device_class}" for p in _profile.load_all(()).values()
            if not p.experimental for var in p.selection.env}


def file_name(kind: str, fmt: str) -> str:
    """``kunlunxin.com/xpu`` -> ``kunlunxin.com-xpu.json``."""
    return kind.replace("/", "-") + "." + fmt


def format_of(path: str, fmt: Optional[str]) -> str:
    """The output format: *fmt* when given, else from the extension (default json).

    Raises:
        SpecError: an extension CDI readers would ignore (``.yml``) or an unknown one.
    """
    if fmt:
        return fmt
    ext = os.path.splitext(path)[1]
    if ext == ".yaml":
        return "yaml"
    if ext in (".json", ""):
        return "json"
    raise SpecError(f"output {path!r}: runtimes only read *.json and *.yaml specs "
                    f"(not {ext!r}); rename it or pass --format")


def dumps(spec: Dict[str, Any], fmt: str) -> bytes:
    """Serialise a spec as JSON or YAML (keys in the order built)."""
    if fmt == "json":
        return (json.dumps(spec, indent=2) + "\n").encode()
    import yaml  # only the YAML format needs it

    return yaml.safe_dump(spec, sort_keys=False, default_flow_style=False).encode()


def write(path: str, spec: Dict[str, Any], fmt: str, index: Optional[Dict[str, Any]]) -> None:
    """Write *spec* atomically (mode 0644), then its hook index.

    Raises:
        SpecError: the file cannot be written.
    """
    data = dumps(spec, fmt)
    try:
        atomic.write_atomic(path, data)
        if index is not None:
            index = dict(index, spec=os.path.basename(path))
            atomic.write_atomic(path + INDEX_SUFFIX, json.dumps(index, separators=(",", ":")).encode())
    except OSError as err:
        raise SpecError(f"cannot write spec {path!r}: {err.strerror or err}") from err
