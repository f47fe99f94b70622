"""Helpers for Kubernetes device-plugin authors: turn the device ids kubelet
hands to ``Allocate`` into what the container runtime understands, checked
by the same rules the runtimes apply (an invalid name fails here, in the
plugin, instead of as a pod stuck in ``ContainerCreating``).

Three ways to hand devices to a container, see docs/device-plugin-authors.md; they
are named as NVIDIA's k8s-device-plugin names its ``--device-list-strategy``
values, and ``xpu-cdi device-plugin`` takes the same names:

* ``cdi-cri``: ``cdi_devices`` in ``ContainerAllocateResponse`` (Kubernetes
  1.28+, GA 1.31; the runtime must have CDI on): :func:`cdi_devices`;
* ``cdi-annotations``: a ``cdi.k8s.io/<plugin>_<id>`` annotation (any CDI
  runtime; the ``xpu`` wrapper on containerd 1.6): :func:`annotation`;
* ``envvar``: the selection env var with the ``xpu`` RuntimeClass (the
  wrapper or the hook does the work): :func:`selection_env`.

Needs only the standard library and ``xpu_cdi.cdi.names`` (the runtimes' rules).
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ..cdi import names
from ..errors import SelectionError

STRATEGIES = ("cdi-cri", "cdi-annotations", "envvar")
DEFAULT_STRATEGIES = ("cdi-cri", "cdi-annotations")  # both CDI forms: new and old kubelets alike
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_INDEX = re.compile(r"^[0-9]+$")


def qualified_names(kind: str, device_ids: Iterable[str]) -> List[str]:
    """``["kunlunxin.com/xpu=0", ...]`` for device ids under *kind*, in order, no duplicates.

    Args:
        kind: the CDI kind of the spec (``kunlunxin.com/xpu``).
        device_ids: CDI device names within the kind (``"0"``, ``"all"``, a PCI address).

    Raises:
        SelectionError: an invalid kind or device name, or no ids.
    """
    problem = names.kind_problem(kind)
    if problem:
        raise SelectionError(problem)
    out: List[str] = []
    for device_id in device_ids:
        q = names.qualified(kind, str(device_id))
        if q not in out:
            out.append(q)
    if not out:
        raise SelectionError(f"no device ids given for {kind!r}")
    return out


def cdi_devices(kind: str, device_ids: Iterable[str]) -> List[Dict[str, str]]:
    """The ``cdi_devices`` field of ``ContainerAllocateResponse``: ``[{"name": q}, ...]``.

    Raises:
        SelectionError: as :func:`qualified_names`.
    """
    return [{"name": q} for q in qualified_names(kind, device_ids)]


def allocation_id(device_ids: Iterable[str]) -> str:
    """A key-safe id for one allocation: the ids joined with ``-`` (characters
    an annotation key cannot hold replaced by ``_``), or a short hash when
    that would make the key too long."""
    ids = [str(d) for d in device_ids]
    readable = _ID_UNSAFE.sub("_", "-".join(ids)).strip("_.-")
    if readable and len(readable) <= 40:
        return readable
    import hashlib  # lazy: the helpers' users who never ask pay nothing

    return "h" + hashlib.sha256("\0".join(ids).encode()).hexdigest()[:16]


def annotation_key(plugin: str, allocation: str) -> str:
    """``cdi.k8s.io/<plugin>_<allocation>``, with ``/`` in the id turned into
    ``_`` as the reference library does.

    Raises:
        SelectionError: empty parts, or a key Kubernetes or the runtimes would reject.
    """
    if not plugin or not allocation:
        raise SelectionError(f"annotation key needs a plugin name and an allocation id, got "
                             f"{plugin!r} and {allocation!r}")
    key = f"{names.ANNOTATION_PREFIX}{plugin}_{allocation.replace('/', '_')}"
    problem = names.annotation_key_problem(key)
    if problem:
        raise SelectionError(problem)
    return key


def annotation(plugin: str, kind: str, device_ids: Iterable[str],
               allocation: Optional[str] = None) -> Tuple[str, str]:
    """``(key, value)`` of the ``cdi.k8s.io/`` annotation naming the devices.

    Args:
        plugin: the plugin's name, by convention ``vendor.class`` (``kunlunxin.com.xpu``
            is too long with long ids; ``xpu`` is fine).
        kind: the CDI kind.
        device_ids: device names within the kind.
        allocation: an id unique per allocation; default :func:`allocation_id`.

    Raises:
        SelectionError: an invalid name or key.
    """
    ids = list(dict.fromkeys(device_ids))  # a card named twice is injected once
    devices = qualified_names(kind, ids)
    key = annotation_key(plugin, allocation or allocation_id(ids))
    value = ",".join(devices)
    names.parse_annotation_value(key, value)  # what the hook and the wrapper parse must accept it
    return key, value


def selection_env(var: str, device_ids: Iterable[str]) -> Dict[str, str]:
    """``{"CXPU_VISIBLE_DEVICES": "0,2"}``: the selection variable the hook and
    the wrapper read (card indices, sorted, no duplicates; or ``all``).

    Raises:
        SelectionError: a bad variable name or an id that is not an index.
    """
    if not re.match(r"^[A-Z_][A-Z0-9_]*$", var):
        raise SelectionError(f"selection variable {var!r} must be an upper-case env var name")
    ids = [str(d).strip() for d in device_ids]
    if ids == ["all"]:
        return {var: "all"}
    bad = [d for d in ids if not _INDEX.match(d)]
    if bad or not ids:
        raise SelectionError(f"{var}: device ids {bad or ids!r} are not card indices: name devices by "
                             f"index (xpu-cdi generate --device-name-strategy index) or use cdi_devices")
    return {var: ",".join(str(i) for i in sorted({int(d) for d in ids}))}


def allocate_response(kind: str, device_ids: Iterable[str], strategies: Union[str, Sequence[str]] = "cdi-cri",
                      plugin: str = "xpu", env_var: str = "CXPU_VISIBLE_DEVICES",
                      env_ids: Optional[Iterable[str]] = None) -> Dict[str, object]:
    """A ``ContainerAllocateResponse`` as a dict: ``cdi_devices``, ``annotations``
    and/or ``envs``, one per strategy of :data:`STRATEGIES` asked.

    Args:
        strategies: one strategy name or several.
        env_ids: what ``envvar`` selects (card indices), when the device ids are
            other names (PCI addresses); default the device ids.

    Raises:
        SelectionError: an unknown strategy, or invalid names (see the other helpers).
    """
    ids = list(device_ids)
    asked = (strategies,) if isinstance(strategies, str) else tuple(strategies)
    bad = [s for s in asked if s not in STRATEGIES]
    if bad or not asked:
        raise SelectionError(f"unknown strategy {(bad or [''])[0]!r}: use one of {', '.join(STRATEGIES)}")
    out: Dict[str, object] = {}
    if "cdi-cri" in asked:
        out["cdi_devices"] = cdi_devices(kind, ids)
    if "cdi-annotations" in asked:
        key, value = annotation(plugin, kind, ids)
        out["annotations"] = {key: value}
    if "envvar" in asked:
        qualified_names(kind, ids)
        out["envs"] = selection_env(env_var, ids if env_ids is None else env_ids)
    return out
