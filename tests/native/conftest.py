"""Fixtures of the compiled front end's unit tests (src/xpu_cdi/_native/fast)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import xpu_cdi._native


@pytest.fixture(scope="session")
def fast_bin() -> Path:
    """The directory of the compiled front end's binaries: $XPU_CDI_FAST_BIN
    (a build dir, for working on the C code without reinstalling), else the
    installed package's ``_native/bin``."""
    d = os.environ.get("XPU_CDI_FAST_BIN")
    return Path(d) if d else Path(xpu_cdi._native.__file__).resolve().parent / "bin"
