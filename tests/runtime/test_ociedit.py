"""Applying CDI edits to an OCI config.json (runtime/ociedit.py)."""

from __future__ import annotations

import copy
import os
import stat
from pathlib import Path
from typing import Any, Dict

import pytest

from wrapper_specs import base_config, edits
from xpu_cdi.errors import SpecError
from xpu_cdi.runtime import ociedit


class TestApply:
    def test_devices_get_nodes_and_cgroup_rules(self) -> None:
        """Each node becomes a linux.devices entry and an allow rule with the spec's permissions."""
        cfg = base_config()
        ociedit.apply(cfg, edits())
        devs = {d["path"]: d for d in cfg["linux"]["devices"]}
        assert devs["/dev/xpu2"] == {"path": "/dev/xpu2", "type": "c", "major": 240, "minor": 2,
                                     "fileMode": 0o666, "uid": 0, "gid": 0}
        rules = cfg["linux"]["resources"]["devices"]
        assert rules[0] == {"allow": False, "access": "rwm"}
        assert {"allow": True, "type": "c", "major": 240, "minor": 2, "access": "rw"} in rules
        assert {"allow": True, "type": "c", "major": 240, "minor": 200, "access": "rwm"} in rules

    def test_env_replaces_keys_and_merges_library_path(self) -> None:
        """Env entries replace same-named ones; LD_LIBRARY_PATH keeps the image's dirs first."""
        cfg = base_config()
        ociedit.apply(cfg, edits())
        env = cfg["process"]["env"]
        assert "KEEP=2" in env and "KEEP=1" not in env and "XPU_DRIVER=1" in env
        assert [e for e in env if e.startswith("LD_LIBRARY_PATH=")] == [
            "LD_LIBRARY_PATH=/opt/app/lib:/usr/local/xpu/lib64:/usr/local/xpu/lib"]

    def test_library_path_from_hook_alone(self) -> None:
        """An update-ldcache hook's folders set LD_LIBRARY_PATH when the image has none."""
        cfg = {"process": {"env": ["PATH=/bin"]}}
        e = edits()
        e["env"] = []
        ociedit.apply(cfg, e)
        assert "LD_LIBRARY_PATH=/usr/local/xpu/lib64:/usr/local/xpu/lib" in cfg["process"]["env"]

    def test_mounts_are_bind_and_parents_first(self) -> None:
        """A CDI mount becomes a bind mount placed before mounts below it."""
        cfg = base_config()
        ociedit.apply(cfg, edits())
        dests = [m["destination"] for m in cfg["mounts"]]
        assert dests.index("/usr/local/xpu") < dests.index("/usr/local/xpu/etc")
        assert dests[:2] == ["/proc", "/dev"]
        new = next(m for m in cfg["mounts"] if m["destination"] == "/usr/local/xpu")
        assert new == {"destination": "/usr/local/xpu", "source": "/host/usr/local/xpu", "type": "bind",
                       "options": ["ro", "nosuid", "nodev", "bind"]}

    def test_hooks_go_to_their_stage(self) -> None:
        """A CDI hook lands in config.json under its hookName, without hookName."""
        cfg = base_config()
        ociedit.apply(cfg, edits())
        (hook,) = cfg["hooks"]["createContainer"]
        assert hook["path"] == "/usr/bin/xpu-cdi-hook" and "hookName" not in hook and hook["timeout"] == 10

    def test_second_apply_changes_nothing(self) -> None:
        """A retried create on an edited config adds no duplicates."""
        cfg = base_config()
        ociedit.apply(cfg, edits())
        once = copy.deepcopy(cfg)
        ociedit.apply(cfg, edits())
        assert cfg == once

    def test_existing_device_and_mount_are_replaced(self) -> None:
        """A node or mount already at the same path is replaced, as CDI runtimes do."""
        cfg = base_config()
        cfg["linux"]["devices"] = [{"path": "/dev/xpu2", "type": "c", "major": 1, "minor": 3}]
        cfg["mounts"].append({"destination": "/usr/local/xpu/", "source": "/elsewhere", "type": "bind"})
        ociedit.apply(cfg, edits())
        assert [d["major"] for d in cfg["linux"]["devices"] if d["path"] == "/dev/xpu2"] == [240]
        assert [m["source"] for m in cfg["mounts"] if m["destination"].rstrip("/") == "/usr/local/xpu"] == [
            "/host/usr/local/xpu"]

    def test_additional_gids(self) -> None:
        """additionalGids are added once."""
        cfg = {"process": {"user": {"uid": 0, "gid": 0, "additionalGids": [5]}}}
        ociedit.apply(cfg, {"additionalGids": [5, 44]})
        ociedit.apply(cfg, {"additionalGids": [5, 44]})
        assert cfg["process"]["user"]["additionalGids"] == [5, 44]


class TestDeviceNumbers:
    def test_missing_numbers_are_read_from_the_host_node(self, tmp_path: Path) -> None:
        """Type, major, minor and mode come from hostPath when the spec leaves them out."""
        node = tmp_path / "xpu5"
        os.mknod(node, stat.S_IFCHR | 0o640, os.makedev(240, 5))
        try:
            dev = ociedit.oci_device({"path": "/dev/xpu5", "hostPath": str(node)})
        finally:
            node.unlink()  # no device node outlives the test
        assert (dev["type"], dev["major"], dev["minor"], dev["fileMode"]) == ("c", 240, 5, 0o640)

    def test_missing_host_node_is_a_clear_error(self, tmp_path: Path) -> None:
        """A node the spec names but the host lost says so and how to fix it."""
        with pytest.raises(SpecError, match=r"cannot read host node .*xpu-cdi generate"):
            ociedit.oci_device({"path": "/dev/xpu9", "hostPath": str(tmp_path / "gone")})

    def test_regular_file_is_not_a_device(self, tmp_path: Path) -> None:
        """A host path that is not a device node is refused."""
        (tmp_path / "f").write_text("")
        with pytest.raises(SpecError, match="not a device node"):
            ociedit.oci_device({"path": "/dev/x", "hostPath": str(tmp_path / "f")})


class TestBadEdits:
    @pytest.mark.parametrize("bad, match", [
        ({"deviceNodes": [{"path": "dev/xpu0", "type": "c", "major": 1, "minor": 1, "fileMode": 1}]}, "absolute"),
        ({"mounts": [{"hostPath": "/a", "containerPath": "b"}]}, "containerPath"),
        ({"hooks": [{"hookName": "preStart", "path": "/bin/true"}]}, "unknown hookName"),
        ({"hooks": [{"hookName": "prestart", "path": "true"}]}, "must be absolute"),
        ({"env": ["NOVALUE"]}, "KEY=VALUE"),
    ])
    def test_malformed_edit_is_refused(self, bad: Dict[str, Any], match: str) -> None:
        """Malformed edits raise SpecError naming the problem."""
        with pytest.raises(SpecError, match=match):
            ociedit.apply(base_config(), bad)
