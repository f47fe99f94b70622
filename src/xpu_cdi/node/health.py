"""Is a card usable now?  Cheap checks, run on every uevent and on a short poll.

A card is Healthy when:

* each of its device nodes (and the spec's shared nodes) exists with the
  type and major/minor the spec gives: a driver reload that moved the
  numbers makes the spec stale, and a container given the old numbers gets
  nothing (the card is Unhealthy until ``generate``/``watch`` rewrites the
  spec; it is never removed, so running pods keep their allocation);
* its PCI function is still present in sysfs (hot-unplug, a dead link);
* the profile's own cheap driver-state source (its ``health_state``), where
  it has one, says the card runs (Kunlunxin: ``/proc/xpu/dev<N>/state`` is
  ``RUNNING`` or ``NORMAL``; a missing file is not a fault, older drivers
  have none).

Each card is judged on its own facts: one card's fault marks that card
only, and a card that is fine again is Healthy again (no latch).
"""

from __future__ import annotations

import os
import stat
from typing import Optional, Sequence

from ..generate.discover import host_path
from ..model import Profile
from .inventory import SpecCard, NodeRef

_TYPES = {"c": stat.S_ISCHR, "b": stat.S_ISBLK}


def node_problem(node: NodeRef) -> str:
    """Why *node* does not match the spec, or ``""``."""
    try:
        st = os.stat(node.path)
    except FileNotFoundError:
        return f"{node.path} is missing"
    except OSError as err:
        return f"{node.path}: {err.strerror}"
    is_type = _TYPES.get(node.type)
    if is_type is not None and not is_type(st.st_mode):
        return f"{node.path} is not a {'character' if node.type == 'c' else 'block'} device"
    if node.major is not None and node.minor is not None \
            and (os.major(st.st_rdev), os.minor(st.st_rdev)) != (node.major, node.minor):
        return (f"{node.path} is {os.major(st.st_rdev)}:{os.minor(st.st_rdev)} but the spec says "
                f"{node.major}:{node.minor} (driver reloaded? the spec is stale: run `xpu-cdi generate`)")
    return ""


def driver_state_problem(profile: Optional[Profile], index: Optional[int], proc_root: str) -> str:
    """What the profile's driver-state file says is wrong with card *index*, or ``""``."""
    if profile is None or not profile.health_state_file or index is None:
        return ""
    path = host_path(proc_root, profile.health_state_file.format(index=index))
    try:
        with open(path) as f:
            value = f.read(64).strip()
    except OSError:
        return ""  # no such file on this driver: nothing to say
    if value.upper() in profile.health_running:
        return ""
    return f"driver reports state {value or '(empty)'!r} in {path}"


def problem(card: SpecCard, shared: Sequence[NodeRef], profile: Optional[Profile], sysfs_root: str,
            proc_root: str) -> str:
    """Why *card* is Unhealthy, or ``""`` when it is Healthy."""
    for node in card.nodes + tuple(shared):
        why = node_problem(node)
        if why:
            return why
    if card.pci and not os.path.exists(host_path(sysfs_root, f"/sys/bus/pci/devices/{card.pci}")):
        return f"PCI function {card.pci} is gone from sysfs"
    return driver_state_problem(profile, card.index, proc_root)
