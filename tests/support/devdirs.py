"""Directories where the tests' fake device nodes work.

A node made on a filesystem mounted ``nodev`` cannot be opened (EACCES), and a stock
Debian 13 host mounts ``/tmp`` as a nodev tmpfs.  So fake hosts never go to the temp
dir blindly: the first of the environment's temp dir and /var/tmp (the filesystem
Debian keeps for persistent temp files) that allows device nodes; when the temp dir is
nodev, tests/conftest.py also moves pytest's own base temp dir there.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Optional

import pytest

ST_NODEV = 4  # os.ST_NODEV
REPO = Path(__file__).resolve().parents[2]


def allows_device_nodes(path: Path) -> bool:
    """False when *path*'s filesystem is mounted nodev (device nodes there cannot be opened)."""
    return not (os.statvfs(path).f_flag & ST_NODEV)


def device_capable_base() -> Optional[Path]:
    """The temp dir, else /var/tmp, whichever first allows device nodes (None: neither)."""
    for d in (Path(tempfile.gettempdir()), Path("/var/tmp")):
        if d.is_dir() and allows_device_nodes(d):
            return d
    return None


def pytest_basetemp() -> Optional[Path]:
    """A base temp dir for pytest on a filesystem with device nodes, when the temp dir has
    none (None: pytest's default is fine).  One per checkout, so that two checkouts'
    runs never clear each other's (pytest empties its --basetemp at start)."""
    if allows_device_nodes(Path(tempfile.gettempdir())):
        return None
    base = device_capable_base()
    if base is None:
        return None
    tag = hashlib.sha256(str(REPO).encode()).hexdigest()[:10]
    return base / f"xpu-cdi-pytest-{os.getuid()}-{tag}"


def device_tmpdir(prefix: str) -> Path:
    """A fresh directory (the caller removes it) where device nodes work; a skip, saying
    why, where there is none."""
    base = device_capable_base()
    if base is None:
        pytest.skip(f"both {tempfile.gettempdir()} and /var/tmp are on nodev filesystems: fake device "
                    "nodes cannot be opened; set TMPDIR to a directory on a filesystem without nodev")
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))
