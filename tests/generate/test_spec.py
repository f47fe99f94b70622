"""Spec building: structure, minimum cdiVersion, names, golden output, writing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml

from support import fakehost
from support import upstream_schema
from xpu_cdi.cdi import validate
from xpu_cdi.errors import SpecError
from xpu_cdi.generate import profile
from xpu_cdi.generate import spec as specmod
from xpu_cdi.generate.discover import Roots, discover
from xpu_cdi.generate.edits import EditOptions

pytestmark = pytest.mark.privileged
GOLDEN = Path(__file__).resolve().parent.parent / "data" / "specs"
HOOK = "/usr/bin/xpu-cdi-hook"


def build(host: fakehost.FakeHost, name: str, **kw: Any) -> Dict[str, Any]:
    edit = EditOptions(hook_path=HOOK, ld_library_path_env=kw.pop("ld_env", False))
    view = discover(profile.load_all([])[name], Roots(str(host.root), str(host.root), str(host.root)))
    return specmod.build(view, specmod.SpecOptions(edit=edit, **kw))


def normalised(spec: Dict[str, Any], root: Path) -> Any:
    return json.loads(json.dumps(spec).replace(str(root), "@ROOT@"))


class TestGolden:
    @pytest.mark.parametrize("name, maker, golden", [
        ("kunlunxin", lambda r: fakehost.kunlunxin(r, 8), "kunlunxin-8card.json"),
        ("ascend", lambda r: fakehost.ascend(r, 4), "ascend-910b-4npu.json"),
        ("ascend", lambda r: fakehost.kunpeng_npu_server(r, 2), "ascend-atlas800-hwhiaiuser.json"),
        ("ascend", fakehost.atlas200i_soc, "ascend-atlas200i-soc.json"),
        ("cambricon", lambda r: fakehost.cambricon_host(r, 2), "cambricon-mlu370-2card.json"),
        ("gaudi", lambda r: fakehost.gaudi_host(r, 2), "gaudi2-beside-intel-npu.json"),
        ("hygon", lambda r: fakehost.hygon_host(r, 2), "hygon-dcu-bmc.json"),
        ("mthreads", lambda r: fakehost.mthreads_host(r, 2), "mthreads-bmc-by-path.json"),
    ])
    def test_matches_golden(self, host_root: Path, name: str, maker: Any, golden: str) -> None:
        """generate's output for each fake host is exactly the reviewed golden spec, valid under our
        strict schema and the upstream CDI schema."""
        host = maker(host_root)
        spec = build(host, name)
        assert validate.problems(spec) == []
        upstream_schema.validator()(spec)
        upstream_schema.validator(upstream_schema.OLDEST)(spec)  # 0.5.0: older runtimes' schema too
        got = normalised(spec, host_root)
        path = GOLDEN / golden
        if os.environ.get("XPU_CDI_UPDATE_GOLDEN"):
            path.write_text(json.dumps(got, indent=2) + "\n")
        assert got == json.loads(path.read_text()), f"diff against {path}; XPU_CDI_UPDATE_GOLDEN=1 rewrites it"


class TestShape:
    def test_default_is_0_5_0_and_valid(self, xpu_host: fakehost.FakeHost) -> None:
        """Digit names and hostPath need 0.5.0, no more: podman 4.3 loads it."""
        spec = build(xpu_host, "kunlunxin")
        assert spec["cdiVersion"] == "0.5.0"
        assert validate.problems(spec) == []
        assert list(spec) == ["cdiVersion", "kind", "devices", "containerEdits"]

    def test_validates_against_upstream_schema(self, xpu_host: fakehost.FakeHost) -> None:
        """Every variant also passes the upstream CDI schemas (the newest to be had, and the
        0.6.0 one: every variant is at 0.5.0)."""
        checks = (upstream_schema.validator(), upstream_schema.validator(upstream_schema.OLDEST))
        for kw in ({}, {"name_strategies": ("index", "pci")}, {"all_device": False}, {"ld_env": True}):
            spec = build(xpu_host, "kunlunxin", **kw)
            assert spec["cdiVersion"] == "0.5.0"
            for check in checks:
                check(spec)

    def test_all_device_has_every_card(self, xpu_host: fakehost.FakeHost) -> None:
        """'all' carries every card node; control nodes stay at spec level."""
        spec = build(xpu_host, "kunlunxin")
        alldev = [d for d in spec["devices"] if d["name"] == "all"][0]
        assert [n["path"] for n in alldev["containerEdits"]["deviceNodes"]] == [f"/dev/xpu{i}" for i in range(8)]
        assert [n["path"] for n in spec["containerEdits"]["deviceNodes"]] == ["/dev/xpuctrl"]

    def test_no_all_device(self, xpu_host: fakehost.FakeHost) -> None:
        """--no-all-device leaves only per-card devices."""
        spec = build(xpu_host, "kunlunxin", all_device=False)
        assert [d["name"] for d in spec["devices"]] == [str(i) for i in range(8)]

    def test_pci_names(self, xpu_host: fakehost.FakeHost) -> None:
        """The pci strategy names devices by PCI address, valid under CDI's name rule."""
        spec = build(xpu_host, "kunlunxin", name_strategies=("pci",), all_device=False)
        assert [d["name"] for d in spec["devices"]] == [xpu_host.pci[i] for i in range(8)]
        assert validate.problems(spec) == []

    def test_pci_name_without_sysfs(self, host_root: Path) -> None:
        """A card with no PCI address cannot be named by it: a clear error."""
        host = fakehost.kunlunxin(host_root, 1, sysfs=False)
        with pytest.raises(SpecError, match="no PCI address in sysfs: use --device-name-strategy index"):
            build(host, "kunlunxin", name_strategies=("pci",))

    def test_ldcache_hook_by_default(self, npu_host: fakehost.FakeHost) -> None:
        """Libraries reach the loader through a createContainer hook, not LD_LIBRARY_PATH."""
        spec = build(npu_host, "ascend")
        [hook] = spec["containerEdits"]["hooks"]
        assert hook["hookName"] == "createContainer" and hook["path"] == HOOK
        assert hook["args"][:2] == ["xpu-cdi-hook", "update-ldcache"]
        assert "/usr/local/Ascend/driver/lib64/driver" in hook["args"]
        assert hook["env"] == ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"] and hook["timeout"] > 0
        assert "env" not in spec["containerEdits"]

    def test_ld_library_path_env_opt_in(self, npu_host: fakehost.FakeHost) -> None:
        """--ld-library-path-env sets the variable and drops the hook."""
        spec = build(npu_host, "ascend", ld_env=True)
        assert "hooks" not in spec["containerEdits"]
        [env] = spec["containerEdits"]["env"]
        assert env.startswith("LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64")

    def test_mount_options(self, xpu_host: fakehost.FakeHost) -> None:
        """Mounts are read-only binds, recognisable by their options."""
        spec = build(xpu_host, "kunlunxin")
        for m in spec["containerEdits"]["mounts"]:
            assert m["options"] == ["ro", "nosuid", "nodev", "bind"] and "type" not in m

    def test_kind_override(self, xpu_host: fakehost.FakeHost) -> None:
        """--vendor/--class change the kind; an invalid kind is refused."""
        assert build(xpu_host, "kunlunxin", vendor="example.com", device_class="acc")["kind"] == "example.com/acc"
        with pytest.raises(SpecError, match="class"):
            build(xpu_host, "kunlunxin", device_class="-bad")

    def test_annotations_raise_version(self, xpu_host: fakehost.FakeHost) -> None:
        """Device annotations (topology) need cdiVersion 0.6.0."""
        spec = build(xpu_host, "kunlunxin", annotations={"0": {"xpu-cdi.io/numa-node": "0"}})
        assert spec["cdiVersion"] == "0.6.0"


class TestWrite:
    def test_json_with_hook_index(self, xpu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """The spec is written 0644 with a hook index the hook can use for env selection."""
        spec = build(xpu_host, "kunlunxin")
        view = discover(profile.load_all([])["kunlunxin"], Roots(*(str(xpu_host.root),) * 3))
        opts = specmod.SpecOptions(edit=EditOptions(hook_path=HOOK))
        path = tmp_path / "kunlunxin.com-xpu.json"
        specmod.write(str(path), spec, "json", specmod.hook_index(view, spec, opts))
        assert json.loads(path.read_text()) == spec
        assert oct(path.stat().st_mode & 0o777) == "0o644"
        index = json.loads((tmp_path / "kunlunxin.com-xpu.json.xpu-cdi").read_text())
        assert index["kind"] == "kunlunxin.com/xpu" and index["indices"]["7"] == "7"
        assert index["selection"]["env"] == ["CXPU_VISIBLE_DEVICES"]  # XPU_VISIBLE_DEVICES is in-process only
        assert "compact" not in index

    def test_yaml_index_has_no_copy(self, xpu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """A YAML spec's index is the same as a JSON one's: the hook reads YAML itself."""
        spec = build(xpu_host, "kunlunxin")
        path = tmp_path / "k.yaml"
        specmod.write(str(path), spec, "yaml", {"xpuCdiIndex": 1, "kind": spec["kind"]})
        assert yaml.safe_load(path.read_text()) == spec
        index = json.loads((tmp_path / "k.yaml.xpu-cdi").read_text())
        assert index == {"xpuCdiIndex": 1, "kind": spec["kind"], "spec": "k.yaml"}

    def test_unwritable_dir(self, xpu_host: fakehost.FakeHost) -> None:
        """A write failure is a SpecError naming the path."""
        with pytest.raises(SpecError, match="cannot write spec '/proc/nope.json'"):
            specmod.write("/proc/nope.json", build(xpu_host, "kunlunxin"), "json", None)

    @pytest.mark.parametrize("path, fmt, want", [
        ("a.yaml", None, "yaml"), ("a.json", None, "json"), ("a", None, "json"), ("a.yaml", "json", "json")])
    def test_format_of(self, path: str, fmt: Any, want: str) -> None:
        """The format follows --format, else the extension."""
        assert specmod.format_of(path, fmt) == want

    def test_yml_refused(self) -> None:
        """.yml is ignored by runtimes, so writing one is refused."""
        with pytest.raises(SpecError, match="only read \\*.json and \\*.yaml"):
            specmod.format_of("a.yml", None)
