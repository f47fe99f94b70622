"""hoststat: the C batch stat of host device nodes and the sysfs PCI lookup."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from support import fakehost
from xpu_cdi import hoststat


@pytest.mark.privileged
class TestStatNodes:
    def test_device_numbers_and_modes(self, host_root: Path) -> None:
        """Char nodes report type, major, minor, permission bits, owner."""
        fakehost.mknod(host_root / "dev/xpu5", 240, 5, 0o660)
        os.chown(host_root / "dev/xpu5", 0, 44)
        row = hoststat.stat_nodes([str(host_root / "dev/xpu5")])[0]
        assert row == (0, "c", 240, 5, 0o660, 0, 44)

    def test_errors_and_non_devices(self, host_root: Path) -> None:
        """Missing paths carry errno; files and dirs are typed so callers can refuse them."""
        (host_root / "file").write_text("x")
        rows = hoststat.stat_nodes([str(host_root / "missing"), str(host_root / "file"), str(host_root)])
        assert rows[0][0] == 2 and rows[0][1] == "\0"
        assert rows[1][:2] == (0, "-")
        assert rows[2][:2] == (0, "d")

    def test_mixed_batch_is_what_stat_says(self, host_root: Path) -> None:
        """A mixed batch across directories: each row is what os.stat says of its path, in order."""
        for i in range(20):
            fakehost.mknod(host_root / f"dev/xpu{i}", 240, i)
        fakehost.mknod(host_root / "dev/sub/n", 241, 7, 0o600)
        (host_root / "dev/link").symlink_to("xpu3")
        paths = [str(host_root / f"dev/xpu{i}") for i in range(20)] + [
            str(host_root / "dev/sub/n"), str(host_root / "dev/link"), "/dev/null",
            str(host_root / "nope/x"), "relative-path", "/"]
        rows = hoststat.stat_nodes(paths)
        assert len(rows) == len(paths)
        for path, row in zip(paths, rows):
            try:
                st = os.stat(path)
            except OSError as err:
                assert row[:2] == (err.errno, "\0"), (path, row)
                continue
            kind = {stat.S_IFCHR: "c", stat.S_IFBLK: "b", stat.S_IFREG: "-", stat.S_IFDIR: "d"}.get(
                stat.S_IFMT(st.st_mode), "?")
            want = (0, kind, os.major(st.st_rdev) if kind in "cb" else 0, os.minor(st.st_rdev) if kind in "cb" else 0,
                    stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
            assert row == want, path

    def test_empty_batch(self) -> None:
        """No paths, no rows."""
        assert hoststat.stat_nodes([]) == []


@pytest.mark.privileged
class TestPciOf:
    def test_card_behind_switch(self, xpu_host: fakehost.FakeHost) -> None:
        """The sysfs char link leads to the card's PCI address and NUMA node."""
        assert hoststat.pci_of(str(xpu_host.root), 240, 5) == (xpu_host.pci[5], 1)
        assert hoststat.pci_of(str(xpu_host.root), 240, 0) == (xpu_host.pci[0], 0)

    def test_unknown_device(self, host_root: Path) -> None:
        """No sysfs entry: both unknown."""
        assert hoststat.pci_of(str(host_root), 240, 1) == (None, None)

    def test_unknown_minor_on_a_real_layout(self, xpu_host: fakehost.FakeHost) -> None:
        """A minor the fake host has no card for: unknown, not another card's address."""
        assert hoststat.pci_of(str(xpu_host.root), 240, 99) == (None, None)

    def test_non_pci_parent(self, host_root: Path) -> None:
        """A device whose parent is not a PCI function has no PCI address."""
        d = host_root / "sys/devices/platform/soc/xpu/xpu0"
        d.mkdir(parents=True)
        (d / "device").symlink_to("../..")
        link = host_root / "sys/dev/char/240:0"
        link.parent.mkdir(parents=True)
        link.symlink_to(os.path.relpath(d, link.parent))
        assert hoststat.pci_of(str(host_root), 240, 0) == (None, None)


def test_missing_extension_is_one_clear_error() -> None:
    """Without the compiled extension there is no second implementation: the first call
    raises one InstallError naming the extension and the fix (the CLI prints it as one line)."""
    code = ("import sys; sys.modules['xpu_cdi._native._hoststat'] = None\n"
            "from xpu_cdi import hoststat, errors\n"
            "try:\n    hoststat.stat_nodes(['/dev/null'])\n"
            "except errors.InstallError as err:\n    print(err)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr == ""
    assert out.stdout.startswith("the compiled extension xpu_cdi._native._hoststat cannot be loaded (")
    assert out.stdout.rstrip().endswith("reinstall xpu-cdi (`make install`, or the distribution package) with a C "
                                        "compiler present") and out.stdout.count("\n") == 1
