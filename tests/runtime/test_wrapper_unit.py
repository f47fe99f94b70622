"""xpu-container-runtime without a real runtime: argument handling, the
runtime lookup, config.json editing and pass-through, driven as a real
process with a recording stand-in for runc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from wrapper_specs import WRAPPER

from xpu_cdi.errors import RuntimeConfigError
from xpu_cdi.generate import profile
from xpu_cdi.runtime import bundle, wrapper

FAKE_RUNC = """#!/bin/sh
printf '%s\\n' "$@" > "$RECORD"
exit 0
"""


class TestArguments:
    @pytest.mark.parametrize("args, want", [
        (["--root", "/r", "--log", "/l", "--log-format", "json", "create", "--bundle", "/b", "id"], (6, "create")),
        (["--systemd-cgroup", "run", "-b", "x", "id"], (1, "run")),
        (["--debug", "--root=/r", "state", "id"], (2, "state")),
        (["--version"], (-1, None)),
        ([], (-1, None)),
    ])
    def test_split_command(self, args: List[str], want: Any) -> None:
        """The subcommand is found after runc's and crun's global options."""
        assert wrapper.split_command(args) == want

    @pytest.mark.parametrize("args, want", [
        (["create", "--bundle", "/b", "id"], "/b"),
        (["create", "--bundle=/b", "id"], "/b"),
        (["create", "-b", "/b", "id"], "/b"),
        (["create", "-bundle", "/b", "id"], "/b"),
        (["create", "--pid-file", "/p", "id"], None),
    ])
    def test_bundle_option(self, args: List[str], want: Optional[str]) -> None:
        """--bundle in every spelling runc accepts; absent means the cwd."""
        assert wrapper.option_value(args, 1, ("--bundle", "-bundle", "-b")) == want

    def test_spec_dirs(self) -> None:
        """XPU_CDI_SPEC_DIRS wins, else the CDI defaults."""
        assert wrapper.spec_dirs({"XPU_CDI_SPEC_DIRS": "/a::/b"}) == ["/a", "/b"]
        assert wrapper.spec_dirs({}) == ["/etc/cdi", "/var/run/cdi"]


class TestFindRuntime:
    def test_env_path(self, tmp_path: Path) -> None:
        """XPU_CDI_RUNTIME as an absolute path is used as it is."""
        fake = tmp_path / "crun"
        fake.write_text("#!/bin/sh\n")
        fake.chmod(0o755)
        assert wrapper.find_runtime({"XPU_CDI_RUNTIME": str(fake)}, WRAPPER) == str(fake)

    @pytest.mark.parametrize("self_path", [WRAPPER, f"{WRAPPER}.py"], ids=["front end", "python half"])
    def test_copies_of_the_wrapper_on_path_are_skipped(self, tmp_path: Path, self_path: str) -> None:
        """A 'runc' that is really this wrapper is passed over for the next one on PATH; run as
        <front end>.py (a deferral), the front end counts as itself too."""
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        os.symlink(WRAPPER, tmp_path / "a" / "runc")
        real = tmp_path / "b" / "runc"
        real.write_text("#!/bin/sh\n")
        real.chmod(0o755)
        env = {"PATH": f"{tmp_path / 'a'}:{tmp_path / 'b'}"}
        assert wrapper.find_runtime(env, self_path) == str(real)

    def test_self_is_refused(self) -> None:
        """XPU_CDI_RUNTIME pointing at the wrapper itself is an error, not a loop."""
        with pytest.raises(RuntimeConfigError, match="is this wrapper"):
            wrapper.find_runtime({"XPU_CDI_RUNTIME": WRAPPER}, WRAPPER)

    def test_copy_of_itself_is_caught(self, tmp_path: Path) -> None:
        """A runtime that is another copy of the wrapper ends in one error line, not an exec loop."""
        copy = tmp_path / "runc"
        copy.write_text(f"#!/bin/sh\nexec {WRAPPER} \"$@\"\n")
        copy.chmod(0o755)
        r = subprocess.run([WRAPPER, "state", "x"], env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1 and "started by itself" in r.stderr, r.stderr

    def test_missing_runtime(self, tmp_path: Path) -> None:
        """No runc anywhere: the message says how to fix it."""
        with pytest.raises(RuntimeConfigError, match="XPU_CDI_RUNTIME"):
            wrapper.find_runtime({"PATH": str(tmp_path)}, WRAPPER)


class Run:
    """The wrapper run as a process with a recording fake runc."""

    def __init__(self, tmp_path: Path, spec_dir: Path) -> None:
        self.record = tmp_path / "argv"
        self.fake = tmp_path / "fake-runc"
        self.fake.write_text(FAKE_RUNC)
        self.fake.chmod(0o755)
        self.bundle = tmp_path / "bundle"
        self.bundle.mkdir()
        self.env = {"PATH": "/usr/bin:/bin", "XPU_CDI_RUNTIME": str(self.fake), "RECORD": str(self.record),
                    "XPU_CDI_SPEC_DIRS": str(spec_dir)}

    def config(self, env: List[str], annotations: Optional[Dict[str, str]] = None) -> Path:
        path = self.bundle / "config.json"
        path.write_text(json.dumps({"ociVersion": "1.0.2", "process": {"env": ["PATH=/bin", *env], "args": ["sh"]},
                                    "root": {"path": "rootfs"}, "annotations": annotations or {},
                                    "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]}}}))
        return path

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        if self.record.exists():
            self.record.unlink()
        return subprocess.run([WRAPPER, *args], env=self.env, capture_output=True, text=True, timeout=30)

    def argv(self) -> List[str]:
        return self.record.read_text().splitlines() if self.record.exists() else []


@pytest.fixture
def run(tmp_path: Path, spec_dir: Path) -> Run:
    return Run(tmp_path, spec_dir)


class TestProcess:
    def test_other_commands_pass_through(self, run: Run) -> None:
        """state/kill/delete reach the real runtime with the very same arguments."""
        args = ["--root", "/run/x", "--log", str(run.bundle / "log"), "kill", "id", "KILL"]
        r = run(*args)
        assert r.returncode == 0, r.stderr
        assert run.argv() == args

    def test_nothing_requested_leaves_config_alone(self, run: Run) -> None:
        """A container without devices: config.json is not rewritten (same bytes, same inode)."""
        cfg = run.config(["CXPU_VISIBLE_DEVICES=void"])
        before = (cfg.read_bytes(), cfg.stat().st_ino, cfg.stat().st_mtime_ns)
        args = ["--root", "/r", "create", "--bundle", str(run.bundle), "c1"]
        r = run(*args)
        assert r.returncode == 0, r.stderr
        assert (cfg.read_bytes(), cfg.stat().st_ino, cfg.stat().st_mtime_ns) == before
        assert run.argv() == args

    def test_create_edits_config_then_execs(self, run: Run) -> None:
        """create with CXPU_VISIBLE_DEVICES=1: nodes, rules, mount, env and hook are in config.json."""
        cfg = run.config(["CXPU_VISIBLE_DEVICES=1"])
        cfg.chmod(0o600)
        args = ["create", "-b", str(run.bundle), "--pid-file", "/p", "c1"]
        r = run(*args)
        assert r.returncode == 0, r.stderr
        assert run.argv() == args
        out = json.loads(cfg.read_text())
        assert [d["path"] for d in out["linux"]["devices"]] == ["/dev/xpuctrl", "/dev/xpu1"]
        assert {"allow": True, "type": "c", "major": 240, "minor": 1, "access": "rwm"} in \
            out["linux"]["resources"]["devices"]
        assert "LD_LIBRARY_PATH=/usr/local/xpu/lib64" in out["process"]["env"]
        assert out["hooks"]["createContainer"][0]["args"][1] == "update-ldcache"
        assert cfg.stat().st_mode & 0o777 == 0o600, "the file keeps its mode"
        assert not [p for p in os.listdir(run.bundle) if p != "config.json"], "no temp files left"

    def test_retried_create_is_idempotent(self, run: Run) -> None:
        """A second create on the edited config.json leaves it byte-identical."""
        cfg = run.config(["CXPU_VISIBLE_DEVICES=0,2"])
        assert run("create", "--bundle", str(run.bundle), "c1").returncode == 0
        once = cfg.read_bytes()
        assert run("create", "--bundle", str(run.bundle), "c1").returncode == 0
        assert cfg.read_bytes() == once

    def test_run_without_bundle_uses_cwd(self, run: Run) -> None:
        """runc's default bundle is the current directory."""
        cfg = run.config([], {"cdi.k8s.io/test_x": "kunlunxin.com/xpu=3"})
        r = subprocess.run([WRAPPER, "run", "c1"], env=run.env, cwd=run.bundle, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "/dev/xpu3" in [d["path"] for d in json.loads(cfg.read_text())["linux"]["devices"]]

    @pytest.mark.parametrize("env, annotations, words", [
        (["CXPU_VISIBLE_DEVICES=7"], {}, ["no card 7", "spec dirs searched"]),
        ([], {"cdi.k8s.io/test_x": "kunlunxin.com/xpu"}, ["'kunlunxin.com/xpu'", "not fully qualified",
                                                          "spec dirs searched"]),
        ([], {"cdi.k8s.io/test_x": "huawei.com/npu=1"}, ["'huawei.com/npu=1'", "no spec defines kind"]),
    ])
    def test_bad_request_is_one_line_and_no_exec(self, run: Run, spec_dir: Path, env: List[str],
                                                 annotations: Dict[str, str], words: List[str]) -> None:
        """A bad request: exit 1, one line naming the device and the spec dirs, runtime not run."""
        cfg = run.config(env, annotations)
        before = cfg.read_bytes()
        log = run.bundle / "runc.log"
        r = run("--log", str(log), "--log-format", "json", "create", "--bundle", str(run.bundle), "c1")
        assert r.returncode == 1
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("xpu-container-runtime: "), r.stderr
        for w in words + [str(spec_dir)]:
            assert w in lines[0]
        assert run.argv() == [], "the real runtime must not run"
        assert cfg.read_bytes() == before
        logged = json.loads(log.read_text().splitlines()[-1])
        assert logged["level"] == "error" and logged["msg"] == lines[0]

    def test_selection_without_a_spec_of_its_kind(self, run: Run, tmp_path: Path) -> None:
        """CXPU_VISIBLE_DEVICES on a node whose only spec is of another kind is refused, naming the dirs
        searched: the known variables come from the profiles through every index generate writes."""
        from xpu_cdi.generate import spec as spec_writer

        other = tmp_path / "none1"
        other.mkdir()
        (other / "huawei.com-npu.json.xpu-cdi").write_text(json.dumps({
            "xpuCdiIndex": 1, "kind": "huawei.com/npu", "selection": {"env": ["ASCEND_VISIBLE_DEVICES"]},
            "indices": {}, "knownSelection": spec_writer.known_selection()}))
        run.env["XPU_CDI_SPEC_DIRS"] = f"{tmp_path / 'none1'}:{tmp_path / 'none2'}"
        run.config(["CXPU_VISIBLE_DEVICES=2"])
        r = run("create", "--bundle", str(run.bundle), "c1")
        assert r.returncode == 1
        assert "kunlunxin.com/xpu" in r.stderr and f"{tmp_path / 'none1'}:{tmp_path / 'none2'}" in r.stderr

    def test_variable_an_admin_dropped_is_ignored(self, run: Run, spec_dir: Path) -> None:
        """An index for the kind that no longer lists CXPU_VISIBLE_DEVICES: the variable means nothing."""
        idx = spec_dir / "kunlunxin.com-xpu.json.xpu-cdi"
        data = json.loads(idx.read_text())
        data["selection"]["env"] = ["SITE_CARDS"]
        idx.write_text(json.dumps(data))
        cfg = run.config(["CXPU_VISIBLE_DEVICES=2"])
        before = cfg.read_bytes()
        r = run("create", "--bundle", str(run.bundle), "c1")
        assert r.returncode == 0, r.stderr
        assert cfg.read_bytes() == before

    def test_broken_config_json(self, run: Run) -> None:
        """A config.json that asks for cards but is not JSON stops the create, naming the file."""
        (run.bundle / "config.json").write_text('{"process": {"env": ["CXPU_VISIBLE_DEVICES=1"')
        r = run("create", "--bundle", str(run.bundle), "c1")
        assert r.returncode == 1 and "config.json" in r.stderr and "not valid JSON" in r.stderr
        assert run.argv() == []

    @pytest.mark.parametrize("text", [
        '{"process":{"env":["CXPU_VISIBLE_DEVICES=1"]},"x":' + "[" * 100000 + "]" * 100000 + "}",
        '{"process":{"env":["CXPU_VISIBLE_DEVICES=1"]},"mounts":[{"destination":5}]}',
    ])
    def test_hostile_config_is_one_line(self, run: Run, text: str) -> None:
        """Deep nesting or a mount without a string destination: our one-line error, no traceback."""
        (run.bundle / "config.json").write_text(text)
        r = run("create", "--bundle", str(run.bundle), "c1")
        assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
        assert r.stderr.startswith("xpu-container-runtime: ") and run.argv() == []

    def test_broken_config_without_request_is_runc_s_business(self, run: Run) -> None:
        """Without any request the wrapper does not even parse config.json: runc reports its own errors."""
        (run.bundle / "config.json").write_text("{not json")
        r = run("create", "--bundle", str(run.bundle), "c1")
        assert r.returncode == 0 and run.argv() == ["create", "--bundle", str(run.bundle), "c1"]


class TestMayRequest:
    @pytest.mark.parametrize("text, want", [
        ('{"process":{"env":["PATH=/bin","CXPU_VISIBLE_DEVICES=1"]}}', True),
        ('{"process":{"env":["ASCEND_VISIBLE_DEVICES=0"]}}', True),
        ('{"annotations":{"cdi.k8s.io/x":"a/b=c"}}', True),
        ('{"process":{"env":["PATH=/bin","NVIDIA_VISIBLE_DEVICES=all"]}}', False),
        ('{"process":{"env":["KUNLUN_CARDS=1"]}}', True),
        ('{"process":{"args":["echo","KUNLUN_CARDS"]}}', False),
    ])
    def test_precheck(self, tmp_path: Path, text: str, want: bool) -> None:
        """Only configs that name a selection variable (of an index, or known to the profiles) or cdi.k8s.io go the slow way."""
        (tmp_path / "site.json.xpu-cdi").write_text(json.dumps({
            "xpuCdiIndex": 1, "kind": "example.com/card", "selection": {"env": ["KUNLUN_CARDS"]},
            "knownSelection": {"CXPU_VISIBLE_DEVICES": "kunlunxin.com/xpu", "ASCEND_VISIBLE_DEVICES": "huawei.com/npu"}}))
        assert bundle.may_request(text.encode(), [str(tmp_path)]) is want

    def test_nothing_requested_imports_nothing_heavy(self, spec_dir: Path, tmp_path: Path) -> None:
        """A container without a request costs no json, re or typing import."""
        bundle = tmp_path / "b"
        bundle.mkdir()
        (bundle / "config.json").write_text(json.dumps({"process": {"env": ["PATH=/bin"]}}))
        src = str(Path(wrapper.__file__).parents[2])
        code = (f"import sys\nsys.path.insert(0, {src!r})\nfrom xpu_cdi.runtime import wrapper\n"
                f"assert wrapper.prepare({str(bundle)!r}, {{'XPU_CDI_SPEC_DIRS': {str(spec_dir)!r}}}) == []\n"
                "print(' '.join(sorted(sys.modules)))")
        # -I -S as the launcher runs it: site would import re and typing on its own
        r = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        loaded = set(r.stdout.split())
        assert not loaded & {"json", "re", "typing", "enum", "xpu_cdi.hook.select", "xpu_cdi.cdi.registry"}, \
            sorted(loaded & {"json", "re", "typing", "enum"})


def test_hot_path_imports(spec_dir: Path, tmp_path: Path) -> None:
    """Editing a config imports no click, yaml, jsonschema, pyudev, tomlkit or cffi."""
    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps({"process": {"env": ["CXPU_VISIBLE_DEVICES=1"]}}))
    code = ("import sys, os\nfrom xpu_cdi.runtime import wrapper\n"
            f"assert wrapper.prepare({str(bundle)!r}, {{'XPU_CDI_SPEC_DIRS': {str(spec_dir)!r}}})\n"
            "print(' '.join(sorted(sys.modules)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(r.stdout.split())
    assert "xpu_cdi.runtime.ociedit" in loaded
    heavy = {m for m in loaded if m.split(".")[0] in {"click", "yaml", "jsonschema", "pyudev", "tomlkit", "cffi",
                                                       "_cffi_backend", "dataclasses", "xpu_cdi.model"}}
    assert not heavy, f"hot path imported {sorted(heavy)}"
    ours = {m for m in loaded if m.startswith("xpu_cdi.")}
    assert ours <= {"xpu_cdi.errors", "xpu_cdi.atomic", "xpu_cdi.cdi", "xpu_cdi.cdi.registry", "xpu_cdi.cdi.names",
                    "xpu_cdi.hook", "xpu_cdi.hook.select", "xpu_cdi.hook.jsonload", "xpu_cdi.runtime", "xpu_cdi.runtime.wrapper",
                    "xpu_cdi.runtime.ociedit", "xpu_cdi.runtime.jsondump", "xpu_cdi.runtime.bundle"}, sorted(ours)


def test_known_selection_is_the_profiles_data() -> None:
    """The known selection variables generate writes into every index are those of the built-in,
    non-experimental profiles (no table in the wrapper's code)."""
    from xpu_cdi.generate import spec

    want = {var: p.kind for p in profile.load_all(()).values() if not p.experimental for var in p.selection.env}
    assert spec.known_selection() == want and "ASCEND_VISIBLE_DEVICES" in want
    assert not hasattr(wrapper, "KNOWN_SELECTION")


def test_launcher(run: Run, tmp_path: Path) -> None:
    """`xpu-cdi runtime install-launcher` installs the compiled wrapper and its -I -S Python half."""
    from click.testing import CliRunner

    from xpu_cdi.cli import main

    path = tmp_path / "bin" / "xpu-container-runtime"
    r = CliRunner().invoke(main, ["runtime", "install-launcher", str(path)])
    assert r.exit_code == 0, r.output
    assert path.read_bytes()[:4] == b"\x7fELF"  # the compiled front end...
    assert Path(f"{path}.py").read_text().startswith(f"#!{os.path.realpath(sys.executable)} -IS\n")  # ...its Python half
    assert path.stat().st_mode & 0o777 == 0o755
    cfg = run.config(["CXPU_VISIBLE_DEVICES=2"])
    out = subprocess.run([str(path), "create", "--bundle", str(run.bundle), "c1"], env=run.env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert run.argv() == ["create", "--bundle", str(run.bundle), "c1"]
    assert "/dev/xpu2" in cfg.read_text()
