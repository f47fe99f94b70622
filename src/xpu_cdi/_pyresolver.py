"""Pure-Python twin of ``_native/resolver.c``, used only when the compiled
extension cannot be loaded.  Results must be identical: tests compare them."""

from __future__ import annotations

import os
import re
import stat as _stat
from typing import List, Optional, Sequence, Tuple

Row = Tuple[int, str, int, int, int, int, int]
_PCI = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]$")


def _type_of(mode: int) -> str:
    if _stat.S_ISCHR(mode):
        return "c"
    if _stat.S_ISBLK(mode):
        return "b"
    if _stat.S_ISREG(mode):
        return "-"
    if _stat.S_ISDIR(mode):
        return "d"
    return "?"


def stat_nodes(paths: Sequence[str]) -> List[Row]:
    """Stat each path (following links); see resolver.stat_nodes."""
    rows: List[Row] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError as err:
            rows.append((err.errno or 0, "\0", 0, 0, 0, 0, 0))
            continue
        rows.append((0, _type_of(st.st_mode), os.major(st.st_rdev), os.minor(st.st_rdev),
                     st.st_mode & 0o7777, st.st_uid, st.st_gid))
    return rows


def pci_of(sysfs_root: str, major: int, minor: int) -> Tuple[Optional[str], Optional[int]]:
    """PCI address and NUMA node of a char device; see resolver.pci_of."""
    root = "" if sysfs_root == "/" else sysfs_root
    link = f"{root}/sys/dev/char/{major}:{minor}/device"
    if not os.path.exists(link):
        return None, None
    real = os.path.realpath(link)
    base = os.path.basename(real)
    if not _PCI.match(base):
        return None, None
    numa: Optional[int] = None
    try:
        with open(os.path.join(real, "numa_node")) as f:
            text = f.read(31).strip()
        value = int(text)
        numa = value if value >= 0 else None
    except (OSError, ValueError):
        pass
    return base, numa
