"""`xpu-container-runtime`, the compiled wrapper alone, black-box: what it
writes into config.json for a request (nodes, cgroup rules, env, mounts,
hooks, gids), what it leaves alone, which runtime it execs with which
arguments, and the one line (exit 1, config.json untouched, no runtime
run) it answers each bad input with.  The runtime it execs is a recording
script; tests/e2e/test_wrapper_*.py run it in front of real runc, crun,
containerd and podman."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from support import runtimes
from support.hookkit import copy_binary
from support.wrapper_specs import KIND, base_config, index, spec
from xpu_cdi import deviceplugin
from xpu_cdi._version import VERSION

NAME = "xpu-container-runtime"
# the real runtime the wrapper execs: records its argv, stdin and the config.json it was given
RECORDER = """#!/bin/sh
PATH=/usr/bin:/bin
printf '%s\\n' "$0" "$@" > "$RECORD/argv"
cat > "$RECORD/stdin"
if [ -f "$BUNDLE/config.json" ]; then cp "$BUNDLE/config.json" "$RECORD/config.json"; fi
exit "${EXIT_WITH:-0}"
"""


@pytest.fixture(scope="module")
def wrapper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compiled wrapper copied alone into a private dir."""
    return copy_binary(NAME, tmp_path_factory.mktemp("wrapper-alone"))


class Box:
    """A bundle, a spec dir with a 4-card spec (device 2 carrying *dev_edits*) and the recorder."""

    def __init__(self, tmp: Path, exe: Path) -> None:
        self.exe = exe
        self.record = tmp / "record"
        self.record.mkdir()
        self.runtime = tmp / "runc"
        self.runtime.write_text(RECORDER)
        self.runtime.chmod(0o755)
        self.bundle = tmp / "bundle"
        (self.bundle / "rootfs").mkdir(parents=True)
        self.spec_dir = tmp / "cdi"
        self.spec_dir.mkdir()
        self.write_spec(spec())
        self.env = {"PATH": "", "XPU_CDI_RUNTIME": str(self.runtime), "XPU_CDI_SPEC_DIRS": str(self.spec_dir),
                    "RECORD": str(self.record), "BUNDLE": str(self.bundle)}

    def write_spec(self, doc: Dict[str, Any]) -> None:
        (self.spec_dir / "kunlunxin.com-xpu.json").write_text(json.dumps(doc))
        (self.spec_dir / "kunlunxin.com-xpu.json.xpu-cdi").write_text(json.dumps(index()))

    def device_edits(self, edits: Dict[str, Any]) -> None:
        """Card 2 of the spec carries *edits* (and the spec no shared edits)."""
        doc = spec()
        doc["devices"][2]["containerEdits"] = edits
        del doc["containerEdits"]
        self.write_spec(doc)

    def config(self, env: List[str], **extra: Any) -> Path:
        cfg = dict(base_config(), ociVersion="1.0.2", root={"path": "rootfs"}, **extra)
        cfg["process"]["env"] += env
        path = self.bundle / "config.json"
        path.write_text(json.dumps(cfg, indent="\t"))  # not compact: Go's encoder output is not ours
        return path

    def run(self, *args: str, env: Optional[Dict[str, str]] = None, stdin: bytes = b"",
            cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
        for p in self.record.iterdir():
            p.unlink()
        return subprocess.run([str(self.exe), *args], env={**self.env, **(env or {})}, input=stdin,
                              capture_output=True, timeout=60, cwd=cwd)

    def create(self, **kw: Any) -> subprocess.CompletedProcess:
        return self.run("create", "--bundle", str(self.bundle), "c1", **kw)

    def edited(self) -> Dict[str, Any]:
        return json.loads((self.bundle / "config.json").read_text())

    def argv(self) -> List[str]:
        return (self.record / "argv").read_text().splitlines()

    def ran(self) -> bool:
        return (self.record / "argv").exists()


@pytest.fixture
def box(tmp_path: Path, wrapper: Path) -> Box:
    return Box(tmp_path, wrapper)


def ok(r: subprocess.CompletedProcess) -> None:
    assert (r.returncode, r.stderr) == (0, b""), r.stderr


class TestEdits:
    def test_devices_get_nodes_and_cgroup_rules(self, box: Box) -> None:
        """Each node (the card's and the spec's control node) becomes a linux.devices entry and an
        allow rule with the spec's permissions, after the image's deny-all."""
        box.config(["CXPU_VISIBLE_DEVICES=2"])
        ok(box.create())
        linux = box.edited()["linux"]
        assert linux["devices"] == [
            {"path": "/dev/xpuctrl", "type": "c", "major": 240, "minor": 200, "fileMode": 438, "uid": 0, "gid": 0},
            {"path": "/dev/xpu2", "type": "c", "major": 240, "minor": 2, "fileMode": 438, "uid": 0, "gid": 0}]
        assert linux["resources"]["devices"] == [
            {"allow": False, "access": "rwm"},
            {"allow": True, "type": "c", "major": 240, "minor": 200, "access": "rwm"},
            {"allow": True, "type": "c", "major": 240, "minor": 2, "access": "rwm"}]

    def test_env_replaces_keys_and_merges_library_path(self, box: Box) -> None:
        """Spec env replaces same-named entries; LD_LIBRARY_PATH keeps the image's dirs first and
        gains the update-ldcache hook's folders."""
        box.device_edits({"deviceNodes": spec()["devices"][2]["containerEdits"]["deviceNodes"],
                          "env": ["XPU_DRIVER=1", "KEEP=2", "LD_LIBRARY_PATH=/usr/local/xpu/lib64"],
                          "hooks": [{"hookName": "createContainer", "path": "/usr/bin/xpu-cdi-hook",
                                     "args": ["xpu-cdi-hook", "update-ldcache", "--folder", "/usr/local/xpu/lib64",
                                              "--folder=/usr/local/xpu/lib"]}]})
        box.config(["CXPU_VISIBLE_DEVICES=2"])
        ok(box.create())
        env = box.edited()["process"]["env"]
        assert "KEEP=2" in env and "KEEP=1" not in env and "XPU_DRIVER=1" in env
        assert [e for e in env if e.startswith("LD_LIBRARY_PATH=")] == [
            "LD_LIBRARY_PATH=/opt/app/lib:/usr/local/xpu/lib64:/usr/local/xpu/lib"]

    def test_mounts_are_bind_and_parents_first(self, box: Box) -> None:
        """A CDI mount becomes a bind mount placed before the image's mounts below it."""
        box.config(["CXPU_VISIBLE_DEVICES=2"])
        ok(box.create())
        mounts = box.edited()["mounts"]
        dests = [m["destination"] for m in mounts]
        assert dests == ["/proc", "/dev", "/usr/local/xpu", "/usr/local/xpu/etc"]
        assert mounts[2] == {"destination": "/usr/local/xpu", "source": "/host/usr/local/xpu", "type": "bind",
                             "options": ["ro", "nosuid", "nodev", "bind"]}

    def test_hooks_go_to_their_stage(self, box: Box) -> None:
        """A CDI hook lands under its hookName's stage, without hookName."""
        box.config(["CXPU_VISIBLE_DEVICES=2"])
        ok(box.create())
        assert box.edited()["hooks"] == {"createContainer": [
            {"path": "/usr/bin/xpu-cdi-hook", "args": ["xpu-cdi-hook", "update-ldcache", "--folder",
                                                       "/usr/local/xpu/lib64"],
             "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "timeout": 10}]}

    def test_retried_create_changes_nothing(self, box: Box) -> None:
        """A create retried on the edited config adds no duplicates, byte for byte."""
        box.config(["CXPU_VISIBLE_DEVICES=0-3"])
        ok(box.create())
        once = (box.bundle / "config.json").read_bytes()
        ok(box.create())
        assert (box.bundle / "config.json").read_bytes() == once

    @pytest.mark.parametrize("existing", ["/usr/local/xpu/", "//usr/local/xpu", "/usr//local/./xpu"])
    def test_existing_device_and_mount_are_replaced(self, box: Box, existing: str) -> None:
        """A node or mount already at the same path is replaced, as CDI runtimes do; a mount's path is
        the same however it is spelled (slashes repeated, even two leading ones, "." components)."""
        path = box.config(["CXPU_VISIBLE_DEVICES=2"])
        cfg = json.loads(path.read_text())
        cfg["linux"]["devices"] = [{"path": "/dev/xpu2", "type": "c", "major": 1, "minor": 3}]
        cfg["mounts"].append({"destination": existing, "source": "/elsewhere", "type": "bind"})
        path.write_text(json.dumps(cfg))
        ok(box.create())
        got = box.edited()
        assert [d["major"] for d in got["linux"]["devices"] if d["path"] == "/dev/xpu2"] == [240]
        assert [m["source"] for m in got["mounts"] if m["source"] in ("/elsewhere", "/host/usr/local/xpu")] == [
            "/host/usr/local/xpu"], got["mounts"]

    def test_additional_gids_added_once(self, box: Box) -> None:
        box.device_edits({"deviceNodes": spec()["devices"][2]["containerEdits"]["deviceNodes"],
                          "additionalGids": [5, 44]})
        path = box.config(["CXPU_VISIBLE_DEVICES=2"])
        cfg = json.loads(path.read_text())
        cfg["process"]["user"] = {"uid": 0, "gid": 0, "additionalGids": [5]}
        path.write_text(json.dumps(cfg))
        ok(box.create())
        ok(box.create())
        assert box.edited()["process"]["user"]["additionalGids"] == [5, 44]

    def test_mode_kept_and_no_temp_file_left(self, box: Box) -> None:
        path = box.config(["CXPU_VISIBLE_DEVICES=1"])
        path.chmod(0o640)
        ok(box.create())
        assert stat.S_IMODE(path.stat().st_mode) == 0o640
        assert sorted(p.name for p in box.bundle.iterdir()) == ["config.json", "rootfs"]

    @pytest.mark.privileged
    def test_missing_numbers_are_read_from_the_host_node(self, box: Box, tmp_path: Path) -> None:
        """Type, major, minor and mode come from hostPath when the spec leaves them out."""
        node = tmp_path / "xpu5"
        os.mknod(node, stat.S_IFCHR | 0o640, os.makedev(240, 5))
        try:
            box.device_edits({"deviceNodes": [{"path": "/dev/xpu5", "hostPath": str(node)}]})
            box.config(["CXPU_VISIBLE_DEVICES=2"])
            ok(box.create())
        finally:
            node.unlink()  # no device node outlives the test
        [dev] = box.edited()["linux"]["devices"]
        assert (dev["path"], dev["type"], dev["major"], dev["minor"], dev["fileMode"]) == ("/dev/xpu5", "c", 240, 5,
                                                                                           0o640)

    def test_values_the_device_plugin_sends_are_parsed(self, box: Box) -> None:
        """The env form and the annotation form deviceplugin builds select the same cards."""
        env = deviceplugin.selection_env("CXPU_VISIBLE_DEVICES", ["2", "0"])
        box.config([f"{k}={v}" for k, v in env.items()])
        ok(box.create())
        by_env = [d["path"] for d in box.edited()["linux"]["devices"]]
        key, value = deviceplugin.annotation("xpu", KIND, ["2", "0"])
        box.config([], annotations={key: value})
        ok(box.create())
        assert sorted(d["path"] for d in box.edited()["linux"]["devices"]) == sorted(by_env) == [
            "/dev/xpu0", "/dev/xpu2", "/dev/xpuctrl"]

    def test_yaml_spec_written_by_another_tool(self, box: Box) -> None:
        """A YAML spec as Go's yaml.Marshal writes it (keys sorted, strings bare) is read as its JSON form."""
        (box.spec_dir / "vendor.yaml").write_text(
            "cdiVersion: 0.6.0\ncontainerEdits:\n  env:\n  - VENDOR_VISIBLE=all\ndevices:\n- containerEdits:\n"
            "    deviceNodes:\n    - hostPath: /dev/null\n      path: /dev/accel0\n      permissions: rw\n"
            "  name: \"0\"\nkind: vendor.example/accel\n")
        box.config([], annotations={"cdi.k8s.io/a": "vendor.example/accel=0"})
        ok(box.create())
        got = box.edited()
        assert got["linux"]["devices"] == [{"path": "/dev/accel0", "type": "c", "major": 1, "minor": 3,
                                            "fileMode": 0o666, "uid": 0, "gid": 0}]
        assert "VENDOR_VISIBLE=all" in got["process"]["env"]


class TestPassThrough:
    def test_nothing_asked_leaves_config_alone(self, box: Box) -> None:
        """config.json untouched (same bytes, same mtime); the runtime exec'd with the arguments and stdin."""
        path = box.config(["CXPU_VISIBLE_DEVICES=void"])
        before = path.stat()
        text = path.read_bytes()
        ok(box.run("--root", "/run/x", "create", "--bundle", str(box.bundle), "c1", stdin=b"console"))
        assert path.read_bytes() == text and path.stat().st_mtime_ns == before.st_mtime_ns
        assert box.argv() == [str(box.runtime), "--root", "/run/x", "create", "--bundle", str(box.bundle), "c1"]
        assert (box.record / "stdin").read_bytes() == b"console"

    @pytest.mark.parametrize("args", [["state", "c1"], ["kill", "c1", "KILL"], ["delete", "--force", "c1"],
                                      ["--version"], ["features"]])
    def test_other_commands(self, box: Box, args: List[str]) -> None:
        """Every command but create/run goes straight to the runtime, config.json unread."""
        path = box.config(["CXPU_VISIBLE_DEVICES=9"])  # a bad request: only create/run would refuse it
        text = path.read_bytes()
        ok(box.run(*args))
        assert box.argv() == [str(box.runtime), *args] and path.read_bytes() == text

    @pytest.mark.parametrize("args", [["--version"], ["-version"], ["--root", "/run/x", "--version"]])
    def test_version_is_ours_then_the_runtime_s(self, box: Box, args: List[str]) -> None:
        """A global --version: our line and a blank one, then the runtime run with the same arguments
        (nvidia-container-runtime's order); the package version, the one build_bin.py passes in."""
        box.runtime.write_text(RECORDER.replace("exit ", "echo 'runc version 1.2.3'\nexit "))
        r = box.run(*args)
        assert (r.returncode, r.stderr) == (0, b"")
        assert r.stdout.decode() == f"{NAME}, version {VERSION}\n\nrunc version 1.2.3\n"
        assert box.argv() == [str(box.runtime), *args]

    def test_version_after_the_command_is_the_runtime_s(self, box: Box) -> None:
        """`exec c1 cmd --version` is the container's command: the wrapper says nothing of its own."""
        ok(box.run("exec", "c1", "cmd", "--version"))
        assert box.argv() == [str(box.runtime), "exec", "c1", "cmd", "--version"]

    def test_version_in_front_of_real_runc(self, wrapper: Path) -> None:
        """Before the real runc (the suite's): ours, a blank line, then runc's own lines."""
        runtimes.require("runc")
        r = subprocess.run([str(wrapper), "--version"], capture_output=True, text=True, timeout=60,
                           env={"PATH": "", "XPU_CDI_RUNTIME": shutil.which("runc") or ""})
        ours, blank, theirs = r.stdout.split("\n", 2)
        assert (r.returncode, r.stderr, ours, blank) == (0, "", f"{NAME}, version {VERSION}", "")
        assert theirs.startswith("runc version ") and "\nspec: " in theirs, theirs

    def test_exit_code_of_the_runtime(self, box: Box) -> None:
        box.config([])
        r = box.create(env={"EXIT_WITH": "7"})
        assert (r.returncode, r.stderr) == (7, b"")

    def test_run_without_bundle_uses_the_cwd(self, box: Box) -> None:
        box.config(["CXPU_VISIBLE_DEVICES=1"])
        ok(box.run("run", "c1", cwd=box.bundle))
        assert "/dev/xpu1" in [d["path"] for d in json.loads((box.record / "config.json").read_text())["linux"][
            "devices"]]

    def test_runtime_from_path_skips_the_wrapper_itself(self, box: Box, tmp_path: Path) -> None:
        """No XPU_CDI_RUNTIME: runc from PATH, passing over a 'runc' that is a link to the wrapper."""
        first, second = tmp_path / "first", tmp_path / "second"
        first.mkdir()
        second.mkdir()
        (first / "runc").symlink_to(box.exe)
        (second / "runc").symlink_to(box.runtime)
        env = dict(box.env, PATH=f"{first}:{second}")
        del env["XPU_CDI_RUNTIME"]
        box.config([])
        r = subprocess.run([str(box.exe), "state", "c1"], env=env, capture_output=True, timeout=60)
        ok(r)
        assert box.argv() == [str(second / "runc"), "state", "c1"]


class TestRefused:
    """One line on stderr, exit 1, config.json untouched, the runtime never run."""

    def refused(self, box: Box, message: str) -> None:
        path = box.bundle / "config.json"
        text = path.read_bytes() if path.exists() else None
        r = box.create()
        assert (r.returncode, r.stdout, r.stderr.decode()) == (1, b"", f"{NAME}: {message}\n")
        assert not box.ran()
        assert (path.read_bytes() if path.exists() else None) == text

    @pytest.mark.parametrize("text, message", [
        ('{"root": {"path": "rootfs"}, "process": {"env": ["CXPU_VISIBLE_DEVICES=1"]}, "a": ' + "[" * 200
         + "]" * 200 + "}", "nested deeper than 100 levels at line 1, column 183 (byte 182)"),
        ('{"root": {"path": "rootfs"}, "process": {"env": ["CXPU_VISIBLE_DEVICES=1"]}, "x": 1, "x": 2}',
         'duplicate key "x" at line 1, column 89 (byte 88)'),
        ('{"process": {"env": ["CXPU_VISIBLE_DEVICES=1"]}, "n": 1e999}',
         "a number out of the range of a double at line 1, column 60 (byte 59)"),
        ('{"process": {"env": ["CXPU_VISIBLE_DEVICES=1"]}, "n": 123456789012345678901234567890}',
         "an integer out of the 64-bit range at line 1, column 85 (byte 84)"),
        ('{"process": {"env": ["CXPU_VISIBLE_DEVICES=1"]}, "annotations": {"cdi.k8s.io/a": "x", "cdi.k8s.io/a": "y"}}',
         'duplicate key "cdi.k8s.io/a" at line 1, column 101 (byte 100)'),
    ], ids=["too-deep", "duplicate-key", "huge-float", "huge-int", "duplicate-annotation"])
    def test_hostile_config(self, box: Box, text: str, message: str) -> None:
        (box.bundle / "config.json").write_text(text)
        self.refused(box, f"'{box.bundle}/config.json' is not valid JSON: {message}")

    def test_oversized_config(self, box: Box) -> None:
        path = box.config(["CXPU_VISIBLE_DEVICES=1"])
        with open(path, "a") as f:
            f.write(" " * (4 << 20))
        self.refused(box, f"'{path}' is larger than {4 << 20} bytes: refusing to parse it")

    @pytest.mark.parametrize("edits, message", [
        ({"deviceNodes": [{"path": "dev/xpu0", "type": "c", "major": 1, "minor": 1, "fileMode": 1}]},
         "device node: 'path' is not an absolute path"),
        ({"mounts": [{"hostPath": "/a", "containerPath": "b"}]},
         "a mount without hostPath or an absolute containerPath"),
        ({"hooks": [{"hookName": "preStart", "path": "/bin/true"}]}, "a hook with an unknown hookName"),
        ({"hooks": [{"hookName": "prestart", "path": "true"}]}, "a hook whose path is not absolute"),
        ({"env": ["NOVALUE"]}, "env entry NOVALUE: expected KEY=VALUE"),
        ({"deviceNodes": [{"path": "/dev/x", "hostPath": "/etc/hostname"}]},
         "device node /dev/x: /etc/hostname is not a device node"),
    ], ids=["relative-node", "relative-mount", "unknown-stage", "relative-hook", "env-without-value",
            "not-a-device"])
    def test_malformed_edits(self, box: Box, edits: Dict[str, Any], message: str) -> None:
        box.device_edits(edits)
        box.config(["CXPU_VISIBLE_DEVICES=2"])
        self.refused(box, message)

    def test_host_node_gone(self, box: Box, tmp_path: Path) -> None:
        box.device_edits({"deviceNodes": [{"path": "/dev/xpu9", "hostPath": str(tmp_path / "gone")}]})
        box.config(["CXPU_VISIBLE_DEVICES=2"])
        self.refused(box, f"device node /dev/xpu9: cannot stat {tmp_path}/gone: No such file or directory")

    def test_a_copy_of_itself_as_the_runtime(self, box: Box, tmp_path: Path) -> None:
        """XPU_CDI_RUNTIME naming another copy of the wrapper: one error, not an exec loop."""
        other = tmp_path / "other"
        other.mkdir()
        box.config([])
        r = box.create(env={"XPU_CDI_RUNTIME": str(copy_binary(NAME, other))})
        assert r.returncode == 1 and r.stderr.decode().count("\n") == 1 and not box.ran(), r.stderr
        assert r.stderr.decode().startswith(f"{NAME}: started by itself"), r.stderr


def test_spec_broken_by_another_tool_is_a_warning(box: Box) -> None:
    """A YAML spec with a duplicate key beside ours: one warning naming it, our card still served."""
    (box.spec_dir / "other.yaml").write_text("a: 1\na: 2\n")
    box.config(["CXPU_VISIBLE_DEVICES=1"])
    r = box.create()
    assert (r.returncode, r.stderr.decode()) == (0, f"{NAME}: warning: spec '{box.spec_dir}/other.yaml': not valid "
                                                    "YAML: duplicate key \"a\" at line 2, column 1\n")
    assert "/dev/xpu1" in [d["path"] for d in box.edited()["linux"]["devices"]]
