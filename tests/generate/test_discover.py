"""Discovery against fake host trees (real char nodes, fake sysfs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support import fakehost
from xpu_cdi.errors import DiscoveryError
from xpu_cdi.generate import profile
from xpu_cdi.generate.discover import Roots, discover, discover_all

pytestmark = pytest.mark.privileged


def roots(host: Path) -> Roots:
    return Roots(str(host), str(host), str(host))


@pytest.fixture(scope="module")
def profs() -> dict:
    return profile.load_all([])


class TestKunlunxin:
    def test_eight_cards_with_numbers_and_topology(self, xpu_host: fakehost.FakeHost, profs: dict) -> None:
        """Each card gets its node's real major/minor, PCI address and NUMA node."""
        view = discover(profs["kunlunxin"], roots(xpu_host.root))
        assert [c.index for c in view.cards] == list(range(8))
        for card in view.cards:
            node = card.nodes[0]
            assert node.container_path == f"/dev/xpu{card.index}"
            assert node.host.path == str(xpu_host.root / f"dev/xpu{card.index}")
            assert (node.host.type, node.host.major, node.host.minor) == ("c", 240, card.index)
            assert card.pci == xpu_host.pci[card.index] and card.numa_node == xpu_host.numa[card.index]
        assert [(n.container_path, n.host.minor) for n in view.shared_nodes] == [("/dev/xpuctrl", 200)]

    def test_mounts_and_library_dirs(self, xpu_host: fakehost.FakeHost, profs: dict) -> None:
        """Driver paths that exist are mounted; missing ones become notes."""
        view = discover(profs["kunlunxin"], roots(xpu_host.root))
        assert [(m.host_path, m.container_path) for m in view.mounts] == [
            (str(xpu_host.root / "usr/local/xpu"), "/usr/local/xpu"),
            (str(xpu_host.root / "usr/local/bin/xpu-smi"), "/usr/local/bin/xpu-smi")]
        assert view.library_dirs == ("/usr/local/xpu/lib64",)
        assert any("xpu_smi" in n for n in view.notes)

    def test_missing_control_node_is_an_error(self, host_root: Path, profs: dict) -> None:
        """Cards without /dev/xpuctrl mean a half-loaded driver: say so."""
        fakehost.kunlunxin(host_root, cards=2, ctrl=False)
        with pytest.raises(DiscoveryError, match="control node '/dev/xpuctrl' not found.*driver fully loaded"):
            discover(profs["kunlunxin"], roots(host_root))

    def test_no_cards_says_where_it_looked(self, host_root: Path, profs: dict) -> None:
        """An empty host names the globs it searched."""
        with pytest.raises(DiscoveryError, match=r"no cards found \(looked for '.*/dev/xpu\[0-9\]\*'"):
            discover(profs["kunlunxin"], roots(host_root))

    def test_regular_file_is_not_a_card(self, host_root: Path, profs: dict) -> None:
        """A plain file named like a node is refused, not turned into a broken spec."""
        fakehost.write(host_root / "dev/xpu0", "not a node")
        with pytest.raises(DiscoveryError, match="is a regular file, not a device node"):
            discover(profs["kunlunxin"], roots(host_root))

    def test_odd_entries_skipped_card_by_card(self, host_root: Path, profs: dict) -> None:
        """A directory, a symlink and a plain file under the card glob are skipped, one note each;
        the real cards still get their devices."""
        host = fakehost.kunlunxin(host_root, cards=2, sysfs=False)
        (host_root / "dev/xpu7").mkdir()
        (host_root / "dev/xpu8").symlink_to("xpu0")
        fakehost.write(host_root / "dev/xpu9", "left by a bind mount of a missing path")
        view = discover(profs["kunlunxin"], roots(host.root))
        assert [c.index for c in view.cards] == [0, 1]
        skipped = [n for n in view.notes if n.endswith("not a device node: skipped")]
        assert skipped == ["'/dev/xpu7' is a directory, not a device node: skipped",
                           "'/dev/xpu8' is a symlink, not a device node: skipped",
                           "'/dev/xpu9' is a regular file, not a device node: skipped"]

    def test_versioned_xre_symlink_is_mounted_as_the_link(self, xpu_host: fakehost.FakeHost, profs: dict) -> None:
        """/usr/local/xpu is a symlink to /usr/local/xpu-<ver>: the spec mounts the link, so an upgrade
        that flips it reaches new containers without a stale path in the spec."""
        view = discover(profs["kunlunxin"], roots(xpu_host.root))
        assert os.path.islink(view.mounts[0].host_path)
        assert view.mounts[0].container_path == "/usr/local/xpu"

    def test_legacy_layout(self, host_root: Path, profs: dict) -> None:
        """The /dev/kunlun/device<N> layout is found by the same profile."""
        fakehost.mknod(host_root / "dev/kunlun/device0", 240, 0)
        fakehost.mknod(host_root / "dev/xpuctrl", 240, 200)
        view = discover(profs["kunlunxin"], roots(host_root))
        assert [n.container_path for c in view.cards for n in c.nodes] == ["/dev/kunlun/device0"]

    def test_two_layouts_same_index_refused(self, host_root: Path, profs: dict) -> None:
        """Two nodes claiming one index would make two devices with one name."""
        fakehost.mknod(host_root / "dev/kunlun/device0", 240, 0)
        fakehost.mknod(host_root / "dev/xpu0", 240, 1)
        fakehost.mknod(host_root / "dev/xpuctrl", 240, 200)
        with pytest.raises(DiscoveryError, match="both claim card index 0"):
            discover(profs["kunlunxin"], roots(host_root))


class TestAscend:
    def test_four_npus_and_manager_nodes(self, npu_host: fakehost.FakeHost, profs: dict) -> None:
        """davinci<N> per card; manager, svm and hdc shared; absent optional nodes noted."""
        view = discover(profs["ascend"], roots(npu_host.root))
        assert [c.index for c in view.cards] == [0, 1, 2, 3]
        assert [n.container_path for n in view.shared_nodes] == [
            "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
        assert any("dvpp_cmdlist" in n for n in view.notes)
        assert set(view.library_dirs) == {"/usr/local/Ascend/driver/lib64",
                                          "/usr/local/Ascend/driver/lib64/common",
                                          "/usr/local/Ascend/driver/lib64/driver"}

    def test_310b_manager_docker_node(self, host_root: Path, profs: dict) -> None:
        """On 310B the _docker manager node is used and appears as /dev/davinci_manager."""
        fakehost.ascend(host_root, cards=1, manager=False)
        fakehost.mknod(host_root / "dev/davinci_manager_docker", 241, 250)
        view = discover(profs["ascend"], roots(host_root))
        mgr = [n for n in view.shared_nodes if n.container_path == "/dev/davinci_manager"]
        assert len(mgr) == 1 and mgr[0].host.minor == 250

    def test_vnpu_keeps_container_name(self, host_root: Path, profs: dict) -> None:
        """A vdavinci<N> node appears as /dev/davinci<N> in the container."""
        fakehost.mknod(host_root / "dev/vdavinci5", 241, 105)
        fakehost.mknod(host_root / "dev/davinci_manager", 241, 200)
        view = discover(profs["ascend"], roots(host_root))
        node = view.cards[0].nodes[0]
        assert (view.cards[0].index, node.container_path) == (5, "/dev/davinci5")
        assert node.host.path.endswith("/dev/vdavinci5")

    def test_missing_manager_fails(self, host_root: Path, profs: dict) -> None:
        """davinci_manager is mandatory."""
        fakehost.ascend(host_root, cards=1, manager=False)
        with pytest.raises(DiscoveryError, match="davinci_manager"):
            discover(profs["ascend"], roots(host_root))


class TestAuto:
    def test_picks_present_profiles_only(self, xpu_host: fakehost.FakeHost, profs: dict) -> None:
        """auto keeps only profiles whose cards exist."""
        found = discover_all(list(profs.values()), roots(xpu_host.root), auto=True)
        assert [v.profile.name for v in found.views] == ["kunlunxin"] and found.failures == ()

    def test_both_vendors(self, host_root: Path, profs: dict) -> None:
        """A host with two kinds of card yields one view per kind."""
        fakehost.kunlunxin(host_root / "x", cards=2, sysfs=False)
        fakehost.ascend(host_root / "x", cards=2, sysfs=False)
        found = discover_all(list(profs.values()), roots(host_root / "x"), auto=True)
        assert sorted(v.profile.name for v in found.views) == ["ascend", "kunlunxin"]

    def test_a_failing_profile_does_not_stop_the_others(self, host_root: Path, profs: dict) -> None:
        """Ascend without its manager node fails alone: Kunlunxin still gets its view, and the failure
        is one line naming the profile and the fix."""
        fakehost.kunlunxin(host_root, cards=2, sysfs=False)
        fakehost.ascend(host_root, cards=1, sysfs=False, manager=False)
        found = discover_all(list(profs.values()), roots(host_root), auto=True)
        assert [v.profile.name for v in found.views] == ["kunlunxin"]
        [(name, line)] = found.failures
        assert name == "ascend" and "davinci_manager" in line and "driver fully loaded" in line
        assert "\n" not in line

    def test_failure_outside_auto_is_raised(self, host_root: Path, profs: dict) -> None:
        """--profile ascend on the same host: the error itself, exit path unchanged."""
        fakehost.ascend(host_root, cards=1, sysfs=False, manager=False)
        with pytest.raises(DiscoveryError, match="davinci_manager"):
            discover_all([profs["ascend"]], roots(host_root), auto=False)

    def test_other_vendor_render_node_ignored(self, host_root: Path, profs: dict) -> None:
        """A render node whose PCI vendor is not Hygon's is not claimed by the hygon profile."""
        fakehost.mknod(host_root / "dev/dri/renderD128", 226, 128)
        pci = fakehost._pci_device(host_root, ["pci0000:00", "0000:00:02.0"], "0x8086", "0x46a6", 0)
        fakehost._class_dev(host_root, pci, "drm", "renderD128", 226, 128)
        with pytest.raises(DiscoveryError, match="no accelerator cards found"):
            discover_all([profs["hygon"]], roots(host_root), auto=True)

    def test_other_vendor_render_node_skipped_card_by_card(self, host_root: Path, profs: dict) -> None:
        """One Intel render node beside two Hygon DCUs costs only itself, with one note."""
        host = fakehost.hygon_host(host_root, cards=2)
        fakehost.mknod(host_root / "dev/dri/renderD130", fakehost.DRI_MAJOR, 130)
        pci = fakehost.pci_function(host_root, "0000:00:02.0", "0x8086", "0x46a6", "0x030000")
        fakehost._class_dev(host_root, pci, "drm", "renderD130", fakehost.DRI_MAJOR, 130)
        view = discover(profs["hygon"], roots(host.root), auto=True)
        assert [c.index for c in view.cards] == [0, 1]
        assert [n for n in view.notes if "renderD130" in n] == [
            "'/dev/dri/renderD130' belongs to PCI device 0000:00:02.0 of vendor 0x8086, not 0x1d94: skipped"]

    def test_nothing_found(self, host_root: Path, profs: dict) -> None:
        """An empty host is one clear error naming the dev root."""
        with pytest.raises(DiscoveryError, match=f"no accelerator cards found under '{host_root}'"):
            discover_all(list(profs.values()), roots(host_root), auto=True)
