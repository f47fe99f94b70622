"""Package hygiene: version in step, every module importable on its own."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import xpu_cdi

REPO = Path(__file__).resolve().parent.parent


def test_version_matches_pyproject() -> None:
    """pyproject.toml and the package agree on the version."""
    text = (REPO / "pyproject.toml").read_text()
    assert f'version = "{xpu_cdi.__version__}"' in text


def all_modules() -> list:
    mods = []
    for info in pkgutil.walk_packages(xpu_cdi.__path__, "xpu_cdi."):
        if info.name.endswith((".build", "._hoststat")) or ".__main__" in info.name:
            continue  # the cffi build script needs cffi's compiler; _hoststat is the compiled part
        mods.append(info.name)
    return mods


def test_modules_found() -> None:
    """The walk sees the package (an empty list would make the next test vacuous)."""
    assert {"xpu_cdi.cli", "xpu_cdi.hoststat", "xpu_cdi.cdi.registry"} <= set(all_modules())


@pytest.mark.parametrize("module", all_modules())
def test_imports_alone(module: str) -> None:
    """Each module imports in a fresh interpreter (no circular imports, no hidden order)."""
    r = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_package_init_imports_nothing() -> None:
    """Importing xpu_cdi loads no submodule: the hook pays only for what it uses."""
    code = "import sys, xpu_cdi; print(sorted(m for m in sys.modules if m.startswith('xpu_cdi')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['xpu_cdi']"
