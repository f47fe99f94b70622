"""Python face of the C resolver (``_native/resolver.c``).

This is the only module that imports the compiled ``_resolver``; when it
cannot be loaded the pure-Python twin in ``_pyresolver`` is used and a
one-line notice goes to stderr.  Both return identical results.
"""

from __future__ import annotations

import sys
from typing import List, Optional, Sequence, Tuple

from . import _pyresolver

Row = Tuple[int, str, int, int, int, int, int]
FIELDS = 7

try:
    from ._native._resolver import ffi, lib  # type: ignore[import-not-found]

    BACKEND = "c"
except ImportError as _err:  # pragma: no cover - exercised by a subprocess test
    ffi = lib = None
    BACKEND = "python"
    print(f"xpu-cdi: C resolver unavailable ({_err}); using the pure-Python resolver",
          file=sys.stderr)


def stat_nodes(paths: Sequence[str]) -> List[Row]:
    """Stat many host paths in one call.

    Args:
        paths: absolute host paths (symlinks are followed).

    Returns:
        One row per path: ``(errno, type, major, minor, mode, uid, gid)``.
        ``errno`` is 0 on success; ``type`` is ``"c"``, ``"b"``, ``"-"``
        (regular file), ``"d"`` or ``"?"`` (and ``"\\0"`` on error).
    """
    if lib is None or not paths:
        return _pyresolver.stat_nodes(paths)
    blob = b"\0".join(p.encode() for p in paths) + b"\0"
    n = len(paths)
    out = ffi.new("long long[]", n * FIELDS)
    lib.xc_stat_nodes(blob, n, out)
    flat = ffi.unpack(out, n * FIELDS)
    rows: List[Row] = []
    for i in range(0, n * FIELDS, FIELDS):
        rows.append((flat[i], chr(flat[i + 1]), flat[i + 2], flat[i + 3],
                     flat[i + 4], flat[i + 5], flat[i + 6]))
    return rows


def pci_of(sysfs_root: str, major: int, minor: int) -> Tuple[Optional[str], Optional[int]]:
    """PCI address and NUMA node of a character device, from sysfs.

    Args:
        sysfs_root: the root under which ``sys/dev/char`` is read (``/`` on a host).
        major, minor: the device numbers.

    Returns:
        ``(pci_address, numa_node)``; either is ``None`` when unknown.
    """
    if lib is None:
        return _pyresolver.pci_of(sysfs_root, major, minor)
    buf = ffi.new("char[]", 64)
    numa = ffi.new("int *")
    rv = lib.xc_pci_of(sysfs_root.encode(), major, minor, buf, 64, numa)
    if rv != 0:
        return None, None
    pci = ffi.string(buf).decode()
    return (pci or None), (numa[0] if numa[0] >= 0 else None)
