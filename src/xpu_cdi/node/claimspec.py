"""Claim-scoped CDI specs: one file per prepared claim, for what exists only while it does.

The static specs (``xpu-cdi generate``) name the cards a host has; what a claim makes (an
Ascend vNPU) or takes (a share of a card) is named in a spec file of its own, written when the
claim is prepared and removed when it is unprepared, so the static specs are never touched.

API (every function takes the spec directory and the DRA driver's name):

* :func:`write(spec_dir, driver, claim_uid, devices, common) <write>` -> the qualified CDI names,
  in *devices*' order.  *devices* is ``[(suffix, containerEdits), ...]``: each becomes the device
  ``<claim uid>-<suffix>`` of the kind :func:`kind` (``k8s.huawei.com/claim``); *common* (may be
  empty) is the spec-level ``containerEdits`` every device of the file gets (the static spec's
  control nodes and driver mounts).  Atomic (temp file, rename): a runtime reads the old file or
  the new one, never half; not fsynced (what it names does not outlive the boot either: the spec
  dir is /var/run/cdi).  Writing again replaces the file.
* :func:`remove(spec_dir, driver, claim_uid) <remove>` -> whether a file was there.
* :func:`listed(spec_dir, driver) <listed>` -> ``{claim uid: path}`` of the files there (what a
  restarted driver compares with its checkpoint).

The file is ``<spec_dir>/xpu-cdi-claim_<driver>_<claim uid>.json``; its kind is not one of a
profile's, so the node daemons' inventory never takes its devices for cards.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from .. import atomic
from ..cdi import names, version

PREFIX = "xpu-cdi-claim_"
_UID = re.compile(r"^[A-Za-z0-9-]{1,64}$")


def kind(driver: str) -> str:
    """The CDI kind of *driver*'s claim-scoped devices: ``k8s.<driver>/claim``."""
    return f"k8s.{driver}/claim"


def path(spec_dir: str, driver: str, claim_uid: str) -> str:
    """The file of one claim.  Raises ValueError on a uid that is not one (it names a file)."""
    if not _UID.match(claim_uid):
        raise ValueError(f"claim uid {claim_uid!r} is not a uid")
    return os.path.join(spec_dir, f"{PREFIX}{driver}_{claim_uid}.json")


def write(spec_dir: str, driver: str, claim_uid: str, devices: Sequence[Tuple[str, Mapping[str, Any]]],
          common: Mapping[str, Any]) -> List[str]:
    """Write the claim's spec (atomically); its devices' qualified CDI names."""
    k = kind(driver)
    entries = []
    for suffix, edits in devices:
        name = f"{claim_uid}-{suffix}"
        problem = names.name_problem(name)
        if problem:
            raise ValueError(problem)
        entries.append({"name": name, "containerEdits": dict(edits)})
    spec: Dict[str, Any] = {"cdiVersion": "", "kind": k, "devices": entries}
    if common:
        spec["containerEdits"] = dict(common)
    spec["cdiVersion"] = version.minimum(spec)
    os.makedirs(spec_dir, mode=0o755, exist_ok=True)
    atomic.write_atomic(path(spec_dir, driver, claim_uid), json.dumps(spec, indent=1).encode() + b"\n",
                        durable=False)
    return [names.qualified(k, e["name"]) for e in entries]


def remove(spec_dir: str, driver: str, claim_uid: str) -> bool:
    """Remove the claim's spec (and a temp file a killed writer left); False when there was none."""
    atomic.remove_stale_temps(path(spec_dir, driver, claim_uid))
    try:
        os.unlink(path(spec_dir, driver, claim_uid))
    except FileNotFoundError:
        return False
    return True


def listed(spec_dir: str, driver: str) -> Dict[str, str]:
    """``{claim uid: path}`` of *driver*'s claim-scoped specs in *spec_dir*."""
    head = f"{PREFIX}{driver}_"
    try:
        files = os.listdir(spec_dir)
    except FileNotFoundError:
        return {}
    return {f[len(head):-5]: os.path.join(spec_dir, f) for f in files
            if f.startswith(head) and f.endswith(".json") and _UID.match(f[len(head):-5])}
