"""The resolver: C batch stat and sysfs lookups, and its pure-Python twin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import fakehost
from xpu_cdi import _pyresolver, resolver


@pytest.mark.privileged
class TestStatNodes:
    def test_c_backend_is_loaded(self) -> None:
        """The compiled extension is what the package uses after `make install`."""
        assert resolver.BACKEND == "c"

    def test_device_numbers_and_modes(self, host_root: Path) -> None:
        """Char nodes report type, major, minor, permission bits, owner."""
        fakehost.mknod(host_root / "dev/xpu5", 240, 5, 0o660)
        os.chown(host_root / "dev/xpu5", 0, 44)
        row = resolver.stat_nodes([str(host_root / "dev/xpu5")])[0]
        assert row == (0, "c", 240, 5, 0o660, 0, 44)

    def test_errors_and_non_devices(self, host_root: Path) -> None:
        """Missing paths carry errno; files and dirs are typed so callers can refuse them."""
        (host_root / "file").write_text("x")
        rows = resolver.stat_nodes([str(host_root / "missing"), str(host_root / "file"), str(host_root)])
        assert rows[0][0] == 2 and rows[0][1] == "\0"
        assert rows[1][:2] == (0, "-")
        assert rows[2][:2] == (0, "d")

    def test_identical_to_python_twin(self, host_root: Path) -> None:
        """C and Python give the same rows for a mixed batch across directories."""
        for i in range(20):
            fakehost.mknod(host_root / f"dev/xpu{i}", 240, i)
        fakehost.mknod(host_root / "dev/sub/n", 241, 7, 0o600)
        (host_root / "dev/link").symlink_to("xpu3")
        paths = [str(host_root / f"dev/xpu{i}") for i in range(20)] + [
            str(host_root / "dev/sub/n"), str(host_root / "dev/link"), "/dev/null",
            str(host_root / "nope/x"), "relative-path", "/"]
        assert resolver.stat_nodes(paths) == _pyresolver.stat_nodes(paths)

    def test_empty_batch(self) -> None:
        """No paths, no rows."""
        assert resolver.stat_nodes([]) == []


@pytest.mark.privileged
class TestPciOf:
    def test_card_behind_switch(self, xpu_host: fakehost.FakeHost) -> None:
        """The sysfs char link leads to the card's PCI address and NUMA node."""
        assert resolver.pci_of(str(xpu_host.root), 240, 5) == (xpu_host.pci[5], 1)
        assert resolver.pci_of(str(xpu_host.root), 240, 0) == (xpu_host.pci[0], 0)

    def test_same_as_python(self, xpu_host: fakehost.FakeHost) -> None:
        """C and Python agree, including for unknown devices."""
        for minor in (0, 3, 7, 99):
            assert resolver.pci_of(str(xpu_host.root), 240, minor) == \
                _pyresolver.pci_of(str(xpu_host.root), 240, minor)

    def test_unknown_device(self, host_root: Path) -> None:
        """No sysfs entry: both unknown."""
        assert resolver.pci_of(str(host_root), 240, 1) == (None, None)

    def test_non_pci_parent(self, host_root: Path) -> None:
        """A device whose parent is not a PCI function has no PCI address."""
        d = host_root / "sys/devices/platform/soc/xpu/xpu0"
        d.mkdir(parents=True)
        (d / "device").symlink_to("../..")
        link = host_root / "sys/dev/char/240:0"
        link.parent.mkdir(parents=True)
        link.symlink_to(os.path.relpath(d, link.parent))
        assert resolver.pci_of(str(host_root), 240, 0) == (None, None)
        assert _pyresolver.pci_of(str(host_root), 240, 0) == (None, None)


def test_fallback_when_extension_missing() -> None:
    """Without the extension the Python twin is used and stderr says so."""
    code = ("import sys; sys.modules['xpu_cdi._native._resolver'] = None\n"
            "from xpu_cdi import resolver\n"
            "print(resolver.BACKEND, resolver.stat_nodes(['/dev/null'])[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "python (0, 'c', 1, 3, 438, 0, 0)"
    assert "C resolver unavailable" in out.stderr and "pure-Python" in out.stderr
