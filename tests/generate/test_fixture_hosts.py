"""`xpu-cdi generate --profile auto` on fixture hosts shaped like each vendor's
published layout (tests/support/fakehost.py says which real host each imitates):
exactly the expected specs, per-card nodes in their card's device only,
odd /dev entries skipped with a note, a failing profile reported and
skipped with the others still written."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List

import pytest
from click.testing import CliRunner

from support import fakehost
from xpu_cdi.cli import main
from xpu_cdi.clikit import PROFILE_FAILED

pytestmark = pytest.mark.privileged
HOOK = "/usr/bin/xpu-cdi-hook"


def generate(host_root: Path, spec_dir: Path) -> Any:
    r = str(host_root)
    return CliRunner().invoke(main, ["generate", "--profiles-dir", str(spec_dir / "none"), "--dev-root", r,
                                     "--driver-root", r, "--sysfs-root", r, "--spec-dir", str(spec_dir),
                                     "--hook-path", HOOK])


def specs(spec_dir: Path) -> Dict[str, Dict[str, Any]]:
    return {n: json.loads((spec_dir / n).read_text()) for n in sorted(os.listdir(spec_dir)) if n.endswith(".json")}


def device_paths(spec: Dict[str, Any]) -> Dict[str, List[str]]:
    """device name -> container paths of its nodes."""
    return {d["name"]: [n["path"] for n in d["containerEdits"].get("deviceNodes", [])] for d in spec["devices"]}


def shared_paths(spec: Dict[str, Any]) -> List[str]:
    return [n["path"] for n in spec.get("containerEdits", {}).get("deviceNodes", [])]


def mounts(spec: Dict[str, Any]) -> List[str]:
    return [m["containerPath"] for m in spec.get("containerEdits", {}).get("mounts", [])]


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    d = tmp_path / "cdi"
    d.mkdir()
    return d


class TestEachVendor:
    def test_p800_server(self, host_root: Path, spec_dir: Path) -> None:
        """P800 + ASPEED BMC + a Kunlunxin storage function: one spec, 8 cards, xpuctrl shared, the XRE
        link mounted; the BMC's card0 and the by-path dir claim nothing."""
        fakehost.p800_server(host_root)
        r = generate(host_root, spec_dir)
        assert r.exit_code == 0, r.output
        got = specs(spec_dir)
        assert list(got) == ["kunlunxin.com-xpu.json"]
        spec = got["kunlunxin.com-xpu.json"]
        assert device_paths(spec) == {**{str(i): [f"/dev/xpu{i}"] for i in range(8)},
                                      "all": [f"/dev/xpu{i}" for i in range(8)]}
        assert shared_paths(spec) == ["/dev/xpuctrl"] and "/usr/local/xpu" in mounts(spec)

    def test_kunpeng_npu_server(self, host_root: Path, spec_dir: Path) -> None:
        """Atlas 800T A2 with NICs and iBMC: the Ascend spec only; the driver's 0660 HwHiAiUser nodes keep
        their owner, group and mode in the spec."""
        fakehost.kunpeng_npu_server(host_root, cards=2)
        r = generate(host_root, spec_dir)
        assert r.exit_code == 0, r.output
        spec = specs(spec_dir)["huawei.com-npu.json"]
        assert list(specs(spec_dir)) == ["huawei.com-npu.json"]
        node = spec["devices"][1]["containerEdits"]["deviceNodes"][0]
        assert (node["path"], node["uid"], node["gid"], node["fileMode"]) == ("/dev/davinci1", 1000, 1000, 0o660)
        assert all(n.get("uid") == 1000 for n in spec["containerEdits"]["deviceNodes"])

    def test_atlas200i_soc(self, host_root: Path, spec_dir: Path) -> None:
        """310B SoC: davinci_manager_docker as /dev/davinci_manager plus the SoC's nodes, all shared."""
        fakehost.atlas200i_soc(host_root)
        r = generate(host_root, spec_dir)
        assert r.exit_code == 0, r.output
        spec = specs(spec_dir)["huawei.com-npu.json"]
        shared = shared_paths(spec)
        assert shared[0] == "/dev/davinci_manager"
        assert {"/dev/svm0", "/dev/ts_aisle", "/dev/upgrade", "/dev/sys", "/dev/vdec", "/dev/vpc", "/dev/pngd",
                "/dev/venc", "/dev/log_drv", "/dev/event_sched"} <= set(shared)
        assert "/usr/local/sbin/npu-smi" in mounts(spec)

    def test_soc_nodes_not_taken_on_a_server(self, host_root: Path, spec_dir: Path) -> None:
        """A /dev/sys on a server (no davinci_manager_docker) is not given to Ascend containers."""
        fakehost.ascend(host_root, cards=1, sysfs=False)
        fakehost.mknod(host_root / "dev/sys", 241, 240)
        assert generate(host_root, spec_dir).exit_code == 0
        assert "/dev/sys" not in shared_paths(specs(spec_dir)["huawei.com-npu.json"])

    def test_cambricon_per_card_nodes(self, host_root: Path, spec_dir: Path) -> None:
        """MLU370 without cambricon_ctl: generated anyway; each card's five companion nodes sit in its own
        device only; cnmon is mounted, the host's neuware never."""
        fakehost.cambricon_host(host_root, cards=2)
        r = generate(host_root, spec_dir)
        assert r.exit_code == 0, r.output
        spec = specs(spec_dir)["cambricon.com-mlu.json"]

        def per(i: int) -> List[str]:
            return [f"/dev/{n.format(i=i)}" for n in ("cambricon_dev{i}", *fakehost.CAMBRICON_PER_CARD)]
        assert device_paths(spec) == {"0": per(0), "1": per(1), "all": per(0) + per(1)}
        assert shared_paths(spec) == [] and mounts(spec) == ["/usr/bin/cnmon"]

    def test_gaudi_beside_an_intel_npu(self, host_root: Path, spec_dir: Path) -> None:
        """/dev/accel/accel0 is an Intel NPU's: skipped with a note; Gaudi cards 1, 2 each carry their own
        accel_controlD node."""
        fakehost.gaudi_host(host_root, cards=2)
        r = generate(host_root, spec_dir)
        assert r.exit_code == 0, r.output
        spec = specs(spec_dir)["habana.ai-gaudi.json"]
        assert {k: v for k, v in device_paths(spec).items() if k != "all"} == {
            "1": ["/dev/accel/accel1", "/dev/accel/accel_controlD1"],
            "2": ["/dev/accel/accel2", "/dev/accel/accel_controlD2"]}
        assert shared_paths(spec) == []
        assert "'/dev/accel/accel0' belongs to PCI device 0000:00:0b.0 of vendor 0x8086, not 0x1da3" in r.output

    def test_gaudi_legacy_hl_layout(self, host_root: Path, spec_dir: Path) -> None:
        """A pre-accel habanalabs driver: /dev/hl<N> cards with their hl_controlD<N>."""
        fakehost.gaudi_legacy_host(host_root, cards=2)
        assert generate(host_root, spec_dir).exit_code == 0
        paths = device_paths(specs(spec_dir)["habana.ai-gaudi.json"])
        assert paths["0"] == ["/dev/hl0", "/dev/hl_controlD0"] and paths["1"] == ["/dev/hl1", "/dev/hl_controlD1"]

    def test_hygon_dri_pairs_by_pci_function(self, host_root: Path, spec_dir: Path) -> None:
        """Hygon DCUs behind an ASPEED BMC: card N gets renderD(128+N) and card(N+1), found through its PCI
        function; the BMC's card0 and the CPU's chipset functions are no one's card; kfd/mkfd shared."""
        fakehost.hygon_host(host_root, cards=2)
        r = generate(host_root, spec_dir)
        assert r.exit_code == 0, r.output
        spec = specs(spec_dir)["hygon.com-dcu.json"]
        paths = device_paths(spec)
        assert paths["0"] == ["/dev/dri/renderD128", "/dev/dri/card1"]
        assert paths["1"] == ["/dev/dri/renderD129", "/dev/dri/card2"]
        assert shared_paths(spec) == ["/dev/kfd", "/dev/mkfd"]
        assert all("/dev/dri/card0" not in p for p in paths.values())

    def test_mthreads_with_by_path_dir(self, host_root: Path, spec_dir: Path) -> None:
        """Moore Threads: udev's /dev/dri/by-path directory does not fail generate; each mtgpu.N gets the
        DRI pair of its PCI function."""
        fakehost.mthreads_host(host_root, cards=2)
        assert (host_root / "dev/dri/by-path").is_dir()
        r = generate(host_root, spec_dir)
        assert r.exit_code == 0, r.output
        paths = device_paths(specs(spec_dir)["mthreads.com-gpu.json"])
        assert paths["0"] == ["/dev/mtgpu.0", "/dev/dri/card1", "/dev/dri/renderD128"]
        assert paths["1"] == ["/dev/mtgpu.1", "/dev/dri/card2", "/dev/dri/renderD129"]

    def test_iluvatar_itrctl(self, host_root: Path, spec_dir: Path) -> None:
        """BI-V150 on driver 4.4: two chips, /dev/itrctl shared."""
        fakehost.iluvatar_host(host_root)
        assert generate(host_root, spec_dir).exit_code == 0
        spec = specs(spec_dir)["iluvatar.com-gpu.json"]
        assert shared_paths(spec) == ["/dev/itrctl"] and sorted(device_paths(spec)) == ["0", "1", "all"]


class TestMixedHosts:
    def test_two_vendors_and_a_bmc(self, host_root: Path, spec_dir: Path) -> None:
        """Kunlunxin cards, Ascend NPUs, an ASPEED BMC and udev's by-path dir: exactly two specs."""
        fakehost.p800_server(host_root)
        fakehost.ascend(host_root, cards=2, owner=(1000, 1000))
        r = generate(host_root, spec_dir)
        assert r.exit_code == 0, r.output
        got = specs(spec_dir)
        assert list(got) == ["huawei.com-npu.json", "kunlunxin.com-xpu.json"]
        assert sorted(device_paths(got["huawei.com-npu.json"])) == ["0", "1", "all"]

    def test_failing_profile_skipped_others_written(self, host_root: Path, spec_dir: Path) -> None:
        """Ascend without davinci_manager fails alone: one line naming it and the fix, Kunlunxin's spec is
        written, and the exit status says a profile failed."""
        fakehost.kunlunxin(host_root, cards=2)
        fakehost.ascend(host_root, cards=1, manager=False)
        r = generate(host_root, spec_dir)
        assert r.exit_code == PROFILE_FAILED, r.output
        assert list(specs(spec_dir)) == ["kunlunxin.com-xpu.json"]
        [line] = [ln for ln in r.output.splitlines() if "skipped: profile 'ascend'" in ln]
        assert "davinci_manager" in line and "driver fully loaded" in line
