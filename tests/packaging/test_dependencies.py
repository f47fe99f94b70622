"""Every run-time dependency in pyproject.toml is a dependency of the .deb and of the .rpm too
(a library pip installs but the package forgets fails only on a user's host)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parents[2]
# PyPI name -> (Debian package, RPM package)
PACKAGES = {"click": ("python3-click", "python3-click"), "pyyaml": ("python3-yaml", "python3-pyyaml"),
            "jsonschema": ("python3-jsonschema", "python3-jsonschema"),
            "pyudev": ("python3-pyudev", "python3-pyudev"), "cffi": ("python3-cffi-backend", "python3-cffi"),
            "tomlkit": ("python3-tomlkit", "python3-tomlkit"), "grpcio": ("python3-grpcio", "python3-grpcio"),
            "protobuf": ("python3-protobuf", "python3-protobuf"),
            "kubernetes": ("python3-kubernetes", "python3-kubernetes"),
            "prometheus-client": ("python3-prometheus-client", "python3-prometheus_client"),
            "bcrypt": ("python3-bcrypt", "python3-bcrypt")}


def test_runtime_dependencies_are_package_dependencies() -> None:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = [re.split(r"[<>=!~ ;\[]", d, maxsplit=1)[0].lower() for d in deps]
    control = (REPO / "packaging/deb/debian/control").read_text()
    depends = re.search(r"^Depends:(.*?)(?=^\S)", control, re.M | re.S).group(1)  # type: ignore[union-attr]
    requires = re.findall(r"^Requires:\s*(\S+)", (REPO / "packaging/rpm/xpu-cdi.spec").read_text(), re.M)
    for name in names:
        assert name in PACKAGES, f"{name}: add its Debian and RPM package names to this test's table"
        deb, rpm = PACKAGES[name]
        assert re.search(rf"\b{re.escape(deb)}\b", depends), f"{name}: debian/control Depends lacks {deb}"
        assert rpm in requires, f"{name}: the RPM spec lacks Requires: {rpm}"
    # a dependency dropped from pyproject.toml leaves the table too (and so the packages' lists)
    assert sorted(set(PACKAGES) - set(names)) == []
