"""Doctor checks of the driver and device nodes, each on a passing and a failing fake host."""

from __future__ import annotations

import json
import os

import pytest

from support import fakehost
from click.testing import CliRunner
from support.doctornode import Node, status, worst
from xpu_cdi.cli import main

pytestmark = pytest.mark.privileged


class TestDriver:
    def test_ok_with_cards_and_pci(self, node: Node) -> None:
        """Eight nodes and eight PCI devices of the vendor: ok, the count is named."""
        node.kunlunxin()
        _code, res = node.doctor()
        r = worst(res, "driver")
        assert r["status"] == "ok" and "8 card(s)" in r["found"] and "8 accelerator PCI function(s)" in r["found"]

    def test_nothing_at_all_fails_naming_the_driver(self, node: Node) -> None:
        """No card node and no PCI device: fail, saying where it looked and to install the driver."""
        code, res = node.doctor()
        r = worst(res, "driver")
        assert code == 1 and r["status"] == "fail"
        assert str(node.root / "dev/xpu[0-9]*") in r["found"]
        assert "install the vendor driver" in r["fix"] and "lspci" in r["fix"]

    def test_pci_devices_without_nodes_fail(self, node: Node) -> None:
        """Cards in the slots but no nodes: the driver is not loaded; the fix says load it."""
        host = node.kunlunxin()
        for i in host.cards:
            host.path(f"/dev/xpu{i}").unlink()
        _code, res = node.doctor()
        r = worst(res, "driver")
        assert r["status"] == "fail" and "8 accelerator PCI function(s) of vendor 0x1d22" in r["found"]
        assert "no driver bound" in r["found"] and "load it (`modprobe kunlun or xpu_driver`" in r["fix"]

    def test_fewer_nodes_than_pci_devices_warns(self, node: Node) -> None:
        """A card whose node vanished while its PCI device stays: warn, pointing at dmesg."""
        host = node.kunlunxin()
        host.remove_card(3)
        _code, res = node.doctor()
        r = worst(res, "driver")
        assert r["status"] == "warn" and "1 card(s) have no node" in r["found"] and "dmesg" in r["fix"]


class TestDeviceNodes:
    def test_registered_majors_pass(self, node: Node) -> None:
        """Character devices whose major /proc/devices lists: ok, naming the driver."""
        node.kunlunxin()
        _code, res = node.doctor()
        assert status(res, "device-nodes") == "ok"
        assert "240 (xpu)" in worst(res, "device-nodes")["found"]

    def test_regular_file_instead_of_node_fails(self, node: Node) -> None:
        """A regular file at /dev/xpu2 (a bind of a missing path): fail, the fix says remove and reload."""
        host = node.kunlunxin()
        host.path("/dev/xpu2").unlink()
        fakehost.write(host.path("/dev/xpu2"), "")
        _code, res = node.doctor()
        r = worst(res, "device-nodes")
        assert r["status"] == "fail" and "is a regular file" in r["found"] and "dev/xpu2" in r["found"]
        assert "remove the bogus entries" in r["fix"]

    def test_unregistered_major_fails(self, node: Node) -> None:
        """Nodes whose major no driver owns (left from an earlier load): fail, the fix recreates them."""
        host = node.kunlunxin(proc=False)
        fakehost.proc_devices(host.root, {250: "xpu"})
        _code, res = node.doctor()
        r = worst(res, "device-nodes")
        assert r["status"] == "fail" and "(major 240)" in r["found"]
        assert "udevadm trigger" in r["fix"] and "xpu-cdi generate" in r["fix"]

    def test_unreadable_proc_warns(self, node: Node) -> None:
        """Without <root>/proc/devices the majors cannot be verified: warn, naming --proc-root."""
        node.kunlunxin(proc=False)
        _code, res = node.doctor()
        r = worst(res, "device-nodes")
        assert r["status"] == "warn" and "--proc-root" in r["fix"]

    def test_proc_root_option(self, node: Node) -> None:
        """--proc-root reads /proc from another tree than --sysfs-root."""
        node.kunlunxin(proc=False)
        fakehost.proc_devices(node.tmp / "proc-tree", {240: "xpu"})
        _code, res = node.doctor("--proc-root", str(node.tmp / "proc-tree"))
        assert status(res, "device-nodes") == "ok"


class TestPermissions:
    def test_0666_root_nodes_pass(self, node: Node) -> None:
        """Root-owned 0666 nodes: ok."""
        node.kunlunxin()
        _code, res = node.doctor()
        assert status(res, "device-permissions") == "ok"

    def test_group_only_mode_warns(self, node: Node) -> None:
        """0660 nodes give non-root containers 'permission denied': warn, the fix names 0666 and the group."""
        host = node.kunlunxin()
        os.chmod(host.path("/dev/xpu1"), 0o660)
        _code, res = node.doctor()
        r = worst(res, "device-permissions")
        assert r["status"] == "warn" and "mode 0660" in r["found"] and "permission denied" in r["found"]
        assert 'MODE="0666"' in r["fix"] and "supplementalGroups" in r["fix"]

    def test_closed_mode_fails(self, node: Node) -> None:
        """A node even its owner cannot open: fail, the fix chmods it."""
        host = node.kunlunxin()
        os.chmod(host.path("/dev/xpuctrl"), 0o000)
        _code, res = node.doctor()
        r = worst(res, "device-permissions")
        assert r["status"] == "fail" and "xpuctrl' mode 0000" in r["found"] and "chmod 0666" in r["fix"]

    def test_non_root_owner_warns(self, node: Node) -> None:
        """A node owned by a user: warn, the fix chowns it to root."""
        host = node.kunlunxin()
        os.chown(host.path("/dev/xpu0"), 1000, 1000)
        _code, res = node.doctor()
        r = worst(res, "device-permissions")
        assert r["status"] == "warn" and "uid 1000" in r["found"] and "chown root" in r["fix"]


class TestControlNodes:
    def test_present_passes(self, node: Node) -> None:
        """/dev/xpuctrl present: ok and named; Ascend lists its manager node too."""
        node.kunlunxin()
        _code, res = node.doctor()
        assert status(res, "control-nodes") == "ok" and "/dev/xpuctrl" in worst(res, "control-nodes")["found"]

    def test_missing_fails(self, node: Node) -> None:
        """No /dev/xpuctrl: fail, the vendor library sees 0 cards; the fix reloads the driver."""
        node.kunlunxin(ctrl=False)
        _code, res = node.doctor()
        r = worst(res, "control-nodes")
        assert r["status"] == "fail" and "xpuctrl" in r["found"] and "0 cards" in r["found"]
        assert "reload the driver" in r["fix"]

    def test_ascend_optional_nodes_noted(self, node: Node) -> None:
        """Ascend without dvpp_cmdlist (optional): still ok, the absent optional node is listed."""
        node.ascend()
        _code, res = node.doctor()
        r = worst(res, "control-nodes")
        assert r["status"] == "ok" and "/dev/davinci_manager" in r["found"] and "dvpp_cmdlist" in r["found"]

    def test_ascend_without_manager_fails(self, node: Node) -> None:
        """Ascend without davinci_manager: fail naming both accepted paths."""
        node.ascend(manager=False)
        _code, res = node.doctor()
        r = worst(res, "control-nodes")
        assert r["status"] == "fail" and "davinci_manager_docker" in r["found"]


class TestKunpengServer:
    """An Atlas 800T A2: NPUs beside Huawei NICs, SAS HBA and iBMC VGA (all vendor 0x19e5)."""

    def test_nics_and_npus_no_false_failure(self, node: Node) -> None:
        """Only the NPUs count as cards; the driver-owned 0660 nodes are the driver's design (the group a
        container user needs is named); the /dev/char links are checked."""
        node.host = fakehost.kunpeng_npu_server(node.root, cards=2)
        _code, res = node.doctor()
        drv = worst(res, "driver")
        assert drv["status"] == "ok" and "2 accelerator PCI function(s)" in drv["found"]
        perm = worst(res, "device-permissions")
        assert perm["status"] == "ok" and "uid 1000 (HwHiAiUser) or group 1000 (HwHiAiUser)" in perm["found"]
        assert worst(res, "dev-char")["status"] == "ok"

    def test_nics_only_names_no_card(self, node: Node) -> None:
        """NICs, SAS and iBMC but no NPU: not "6 card(s) have no node", just no accelerator found."""
        fakehost.kunpeng_nics(node.root)
        _code, res = node.doctor()
        assert [r["check"] for r in res if r["check"] == "driver"] == ["driver"]
        r = worst(res, "driver")
        assert r["status"] == "fail" and "no accelerator found" in r["found"]
        assert "card(s) have no node" not in json.dumps(res)

    def test_missing_dev_char_links_named_with_the_fix(self, node: Node) -> None:
        """Without udev's /dev/char links: one warning listing them, the fix is the system command."""
        node.host = fakehost.kunpeng_npu_server(node.root, cards=2, dev_char_links=False)
        _code, res = node.doctor()
        r = worst(res, "dev-char")
        assert r["status"] == "warn" and "241:0 (/dev/davinci0)" in r["found"] and "241:1" in r["found"]
        assert "xpu-cdi system create-dev-char-symlinks" in r["fix"]

    def test_the_command_creates_the_links(self, node: Node) -> None:
        """create-dev-char-symlinks --dry-run changes nothing; without it the links appear and doctor is happy."""
        node.host = fakehost.kunpeng_npu_server(node.root, cards=2, dev_char_links=False)
        args = ["system", "create-dev-char-symlinks", *node.roots]
        dry = CliRunner().invoke(main, [*args, "--dry-run"])
        assert dry.exit_code == 0 and "would create" in dry.output and "241:0 -> ../davinci0" in dry.output
        assert not (node.root / "dev/char").exists()
        assert CliRunner().invoke(main, args).exit_code == 0
        assert os.readlink(node.root / "dev/char/241:1") == "../davinci1"
        assert "all /dev/char links present" in CliRunner().invoke(main, args).output
        assert worst(node.doctor()[1], "dev-char")["status"] == "ok"


class TestSharedNames:
    def test_another_vendors_render_node_is_not_checked(self, node: Node) -> None:
        """Hygon DCUs beside an Intel render node whose mode would warn: the Intel node is not Hygon's, so
        no check of the hygon profile names it."""
        node.host = fakehost.hygon_host(node.root, cards=2)
        fakehost.mknod(node.root / "dev/dri/renderD130", fakehost.DRI_MAJOR, 130, 0o600)
        pci = fakehost.pci_function(node.root, "0000:00:02.0", "0x8086", "0x46a6", "0x030000")
        fakehost._class_dev(node.root, pci, "drm", "renderD130", fakehost.DRI_MAJOR, 130)
        fakehost.dev_char_all(node.host)
        _code, res = node.doctor("--profile", "hygon")
        assert "renderD130" not in json.dumps([r for r in res if r["check"] != "spec-fresh"])
        assert worst(res, "device-permissions")["status"] == "ok"

    def test_soc_nodes_not_listed_on_a_server(self, node: Node) -> None:
        """The 310B-only nodes are not "optional nodes not present" on a 910B server."""
        node.ascend()
        _code, res = node.doctor()
        r = worst(res, "control-nodes")
        assert r["status"] == "ok" and "ts_aisle" not in r["found"] and "svm0" not in r["found"]


class TestCreateDevCharSymlinks:
    def test_a_stale_link_is_replaced(self, node: Node) -> None:
        """A /dev/char link left pointing at an old node (a driver reload moved the numbers) is replaced."""
        node.host = fakehost.kunpeng_npu_server(node.root, cards=1)
        stale = node.root / "dev/char/241:0"
        stale.unlink()
        stale.symlink_to("../hisi_hdc")
        r = CliRunner().invoke(main, ["system", "create-dev-char-symlinks", *node.roots])
        assert r.exit_code == 0 and "241:0 -> ../davinci0" in r.output
        assert os.readlink(stale) == "../davinci0"

    def test_a_link_that_cannot_be_made_stops_there(self, node: Node) -> None:
        """"created" is said of a link only once it is made; the one that cannot be (a directory
        in its place) is one line and exit 1, not a spec error's 5, and nothing after it is tried."""
        node.host = fakehost.kunpeng_npu_server(node.root, cards=3, dev_char_links=False)
        (node.root / "dev/char/241:1/in-the-way").mkdir(parents=True)
        r = CliRunner().invoke(main, ["system", "create-dev-char-symlinks", *node.roots])
        assert r.exit_code == 1, r.output
        assert "created " in r.output and "241:0 -> ../davinci0" in r.output
        assert "241:1 -> " not in r.output and "241:2" not in r.output
        assert f"xpu-cdi: cannot create '{node.root}/dev/char/241:1': Is a directory" in r.output
        assert os.readlink(node.root / "dev/char/241:0") == "../davinci0"
        assert not (node.root / "dev/char/241:2").exists()
        assert [p.name for p in (node.root / "dev/char").iterdir() if "tmp" in p.name] == []

    def test_no_cards_is_not_an_error(self, node: Node) -> None:
        """The refresh service runs the command on every host: without cards it says so and exits 0."""
        r = CliRunner().invoke(main, ["system", "create-dev-char-symlinks", *node.roots])
        assert r.exit_code == 0 and "no accelerator nodes" in r.output
        explicit = CliRunner().invoke(main, ["system", "create-dev-char-symlinks", "--profile", "ascend", *node.roots])
        assert explicit.exit_code == 1 and "no cards found" in explicit.output
