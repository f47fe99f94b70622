"""What the tests of the compiled C share: build_bin.py, the one place that says how the
binaries are built, loaded by path as setup.py loads it (the package it sits in is what is
being built)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

BUILD_BIN = Path(__file__).resolve().parents[2] / "src" / "xpu_cdi" / "_native" / "build_bin.py"


@pytest.fixture(scope="session")
def build_bin() -> Any:
    if not (BUILD_BIN.parent / "hotpath").is_dir():
        pytest.skip(f"no C sources beside {BUILD_BIN} (an installed package, not a checkout)")
    spec = importlib.util.spec_from_file_location("xpu_cdi_build_bin", BUILD_BIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
