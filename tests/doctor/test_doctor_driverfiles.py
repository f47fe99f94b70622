"""Doctor checks of the driver files a profile mounts: present, and only root can change them."""

from __future__ import annotations

import os

import pytest

from support.doctornode import Node, status, worst

pytestmark = pytest.mark.privileged


class TestDriverFiles:
    def test_present_pass(self, node: Node) -> None:
        """XRE present: ok, listing what is mounted, the libraries and what is skipped."""
        node.kunlunxin()
        _code, res = node.doctor()
        r = worst(res, "driver-files")
        assert r["status"] == "ok" and "/usr/local/xpu" in r["found"] and "1 .so file(s)" in r["found"]
        assert "/usr/local/bin/xpu_smi" in r["found"]  # not present: listed as skipped

    def test_no_library_dir_fails(self, node: Node) -> None:
        """No /usr/local/xpu/lib64: fail with the loader's error; the fix installs the runtime."""
        node.kunlunxin(driver=False)
        _code, res = node.doctor()
        r = worst(res, "driver-files")
        assert r["status"] == "fail" and "cannot open shared object file" in r["found"]
        assert "usr/local/xpu/lib64" in r["found"] and "install the vendor user-space runtime" in r["fix"]

    def test_empty_library_dir_warns(self, node: Node) -> None:
        """A library dir without any .so: warn, the fix reinstalls."""
        host = node.kunlunxin()
        host.path("/usr/local/xpu/lib64/libxpuml.so.1").unlink()
        _code, res = node.doctor()
        r = worst(res, "driver-files")
        assert r["status"] == "warn" and "hold no .so files" in r["found"] and "reinstall" in r["fix"]


class TestDriverFileOwners:
    def test_root_owned_pass(self, node: Node) -> None:
        """Root-owned, 0755/0644 driver tree: ok."""
        node.kunlunxin()
        _code, res = node.doctor()
        assert status(res, "driver-file-owners") == "ok"

    def test_user_owned_library_dir_fails(self, node: Node) -> None:
        """lib64 owned by uid 1000: fail naming it; the fix chowns the mounted tree to root."""
        host = node.kunlunxin()
        os.chown(host.path("/usr/local/xpu/lib64"), 1000, 1000)
        _code, res = node.doctor()
        r = worst(res, "driver-file-owners")
        assert r["status"] == "fail" and "'/usr/local/xpu-5.0.21/lib64' is owned by uid 1000" in r["found"]
        assert f"chown -R root:root '{host.path('/usr/local/xpu-5.0.21')}'" in r["fix"]

    def test_group_writable_library_fails(self, node: Node) -> None:
        """A group-writable library: fail, the fix removes the write bits."""
        host = node.kunlunxin()
        os.chmod(host.path("/usr/local/xpu/lib64/libxpuml.so.1"), 0o775)
        _code, res = node.doctor()
        r = worst(res, "driver-file-owners")
        assert r["status"] == "fail" and "mode 0775 (group/other-writable)" in r["found"]
        assert "chmod -R go-w" in r["fix"]

    def test_user_owned_parent_fails(self, node: Node) -> None:
        """/usr/local owned by a user lets them swap the whole tree: fail."""
        host = node.kunlunxin()
        os.chown(host.path("/usr/local"), 1000, 1000)
        _code, res = node.doctor()
        r = worst(res, "driver-file-owners")
        assert r["status"] == "fail" and "'/usr/local' is owned by uid 1000" in r["found"]

    def test_ascend_tree_checked(self, node: Node) -> None:
        """Ascend: a user-owned file deep in the driver tree is found."""
        host = node.ascend()
        os.chown(host.path("/usr/local/Ascend/driver/lib64/driver/libascend_hal.so"), 1000, 0)
        _code, res = node.doctor()
        r = worst(res, "driver-file-owners")
        assert r["status"] == "fail" and "libascend_hal.so' is owned by uid 1000" in r["found"]
