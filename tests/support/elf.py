"""What an ELF file's header says it runs on (the arm64 tests read it: no `file` or readelf needed)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, Dict

EM_AARCH64, EM_X86_64 = 183, 62
ET_DYN = 3  # position-independent executables and shared objects
PT_DYNAMIC, PT_INTERP = 2, 3


def header(path: Path) -> Dict[str, Any]:
    """machine (e_machine), type (e_type), and whether it names an interpreter or has a dynamic section."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF", f"{path} is not ELF"
    assert data[4] == 2 and data[5] == 1, f"{path}: 64-bit little-endian expected"
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    (e_phoff,) = struct.unpack_from("<Q", data, 32)
    e_phentsize, e_phnum = struct.unpack_from("<HH", data, 54)
    kinds = [struct.unpack_from("<I", data, e_phoff + i * e_phentsize)[0] for i in range(e_phnum)]
    return {"machine": e_machine, "type": e_type, "interp": PT_INTERP in kinds, "dynamic": PT_DYNAMIC in kinds}
