"""The arm64 Debian package (`make deb ARCH=arm64`: packaging/deb/build.sh cross-builds it with
Debian's toolchain and the arm64 -dev packages, lintian clean): its architecture, every compiled
file in it an aarch64 ELF (the hook and the wrapper, the host-stat extension), and the packaged
hook running under qemu-user against the arm64 libraries multiarch put on this machine."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Dict

import pytest

from support import DEPS_CHECK, elf
from xpu_cdi._version import VERSION

pytestmark = [pytest.mark.privileged]

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "packaging" / "deb" / "out" / "arm64"
QEMU = "/usr/bin/qemu-aarch64-static"


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """The package built from the checkout and unpacked: its path and the unpacked root."""
    r = subprocess.run(["sh", str(REPO / "packaging/deb/build.sh")], capture_output=True, text=True, timeout=1500,
                       env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "ARCH": "arm64", **DEPS_CHECK})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    path = OUT / f"xpu-cdi_{VERSION}_arm64.deb"
    assert r.stdout.strip().splitlines()[0] == str(path), r.stdout
    root = tmp_path_factory.mktemp("deb-arm64")
    subprocess.run(["dpkg-deb", "-x", str(path), str(root)], check=True)
    return {"deb": path, "root": root}


def test_architecture_and_version(deb: Dict[str, Path]) -> None:
    fields = subprocess.run(["dpkg-deb", "-f", str(deb["deb"]), "Architecture", "Version", "Package"],
                            capture_output=True, text=True, check=True).stdout
    assert fields.splitlines() == ["Architecture: arm64", f"Version: {VERSION}", "Package: xpu-cdi"]


def test_every_compiled_file_is_aarch64(deb: Dict[str, Path]) -> None:
    root = deb["root"]
    compiled = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and p.read_bytes()[:4] == b"\x7fELF"]
    names = sorted(p.name for p in compiled)
    assert "xpu-cdi-hook" in names and "xpu-container-runtime" in names
    assert any(n.startswith("_hoststat") and n.endswith(".so") for n in names), names
    for p in compiled:
        assert elf.header(p)["machine"] == elf.EM_AARCH64, p
    # the packaged binaries are the dynamic build (Debian's libyajl2, libyaml), as on amd64
    assert elf.header(root / "usr/bin/xpu-cdi-hook")["interp"]


def test_packaged_hook_runs_under_qemu(deb: Dict[str, Path]) -> None:
    """Under qemu-user, with the arm64 loader and libraries dpkg installed (multiarch)."""
    r = subprocess.run([QEMU, "-L", "/", str(deb["root"] / "usr/bin/xpu-cdi-hook"), "--help"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("usage: xpu-cdi-hook"), r
