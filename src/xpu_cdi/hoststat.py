"""Facts about the host's device nodes for the tooling (``generate``, the
doctor, the device plugin): many nodes stat'ed in one call, and the PCI
address and NUMA node behind a character device.

The work is done by the compiled ``_native/_hoststat`` extension
(``_native/hoststat.c``), built with the package; there is no second
implementation to fall back on.
"""

from __future__ import annotations

import array
from typing import Any, List, Optional, Sequence, Tuple

from .errors import InstallError

Row = Tuple[int, str, int, int, int, int, int]

try:
    from ._native._hoststat import ffi, lib  # type: ignore[import-not-found]
except ImportError as _err:  # pragma: no cover - exercised by a subprocess test
    ffi = lib = None
    _MISSING = str(_err)


def _lib() -> Any:
    if lib is None:
        raise InstallError(f"the compiled extension xpu_cdi._native._hoststat cannot be loaded ({_MISSING}): "
                          f"reinstall xpu-cdi (`make install`, or the distribution package) with a C compiler present")
    return lib


def stat_nodes(paths: Sequence[str]) -> List[Row]:
    """Stat many host paths in one call.

    Args:
        paths: absolute host paths (symlinks are followed).

    Returns:
        One row per path: ``(errno, type, major, minor, mode, uid, gid)``.
        ``errno`` is 0 on success; ``type`` is ``"c"``, ``"b"``, ``"-"``
        (regular file), ``"d"`` or ``"?"`` (and ``"\\0"`` on error).

    Raises:
        MemoryError: no memory for the batch's scratch array.
    """
    c = _lib()
    if not paths:
        return []
    blob = ("\0".join(paths) + "\0").encode()
    n = len(paths)
    out = ffi.new("long long[]", n * 6)
    types = ffi.new("char[]", n)
    if c.xc_stat_nodes(blob, n, out, types) != 0:  # only -ENOMEM for the scratch array
        raise MemoryError(f"stat of {n} host paths: out of memory")
    # column-major results -> rows with zip over array slices: no per-row bytecode
    flat = array.array("q")
    flat.frombytes(ffi.buffer(out))
    typ = ffi.unpack(types, n).decode("ascii").replace("!", "\0")
    return list(zip(flat[0:n], typ, flat[n:2 * n], flat[2 * n:3 * n], flat[3 * n:4 * n],
                    flat[4 * n:5 * n], flat[5 * n:6 * n]))


def pci_of(sysfs_root: str, major: int, minor: int) -> Tuple[Optional[str], Optional[int]]:
    """PCI address and NUMA node of a character device, from sysfs.

    Args:
        sysfs_root: the root under which ``sys/dev/char`` is read (``/`` on a host).
        major, minor: the device numbers.

    Returns:
        ``(pci_address, numa_node)``; either is ``None`` when unknown.
    """
    c = _lib()
    buf = ffi.new("char[]", 64)
    numa = ffi.new("int *")
    if c.xc_pci_of(sysfs_root.encode(), major, minor, buf, 64, numa) != 0:
        return None, None
    pci = ffi.string(buf).decode()
    return (pci or None), (numa[0] if numa[0] >= 0 else None)
