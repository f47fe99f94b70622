"""A kind's driver version: the profile's ``dra.driver_version_file`` read as semver.

What the DRA driver's ``driverVersion`` attribute, the node labels and the
exporter's ``xpu_cdi_driver_info`` show; here, below them all, so that the
exporter and the labeller do not load the DRA driver's slice builder for it.
"""

from __future__ import annotations

import re
from typing import Optional

from .hostfs import host_path, read_head
from .model import Profile

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?(?:[.-]([0-9A-Za-z]+))?")


def semver(text: str) -> str:
    """The first version in *text* as semver (``24.1.rc2`` -> ``24.1.0-rc2``, ``5.0.21.13`` -> ``5.0.21+13``), or ""."""
    m = _VERSION.search(text)
    if not m:
        return ""
    major, minor, patch, extra = (str(int(m.group(1))), str(int(m.group(2))),
                                  str(int(m.group(3))) if m.group(3) else "0", m.group(4))
    out = f"{major}.{minor}.{patch}"
    if extra:
        out += ("+" if extra.isdigit() else "-") + extra
    return out if len(out) <= 64 else ""


def read_driver_version(profile: Optional[Profile], proc_root: str, driver_root: str) -> str:
    """The driver's version from the profile's ``dra.driver_version_file``, as semver, or ""."""
    if profile is None or not profile.driver_version_file:
        return ""
    path = profile.driver_version_file
    return semver(read_head(host_path(proc_root if path.startswith("/proc/") else driver_root, path)))
